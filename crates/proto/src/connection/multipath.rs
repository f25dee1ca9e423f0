//! Multipath QUIC inside the connection (draft-ietf-quic-multipath-21): negotiation, path IDs
//! and their limits, opening paths, path status, abandonment, and the frames that carry them.
//! Each path's own state (addresses, validation, packet-number space, congestion control)
//! is its [`Path`]; this module owns what concerns several paths at once.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use smallvec::SmallVec;

use super::path::{Life, Path, PathId, ValidationTimeout};
use super::sent::SentFrames;
use super::spaces::{PacketSpace, Pns};
use super::{Connection, EndpointEvent, Event};
use crate::frame::{self, Frame};
use crate::multipath::{PacketHint, PathScheduler, PathView, SchedulerCx};
use crate::time::Instant;
use crate::types::{TransportError, error_code};

/// PATH_ABANDON error codes (draft §4.3.1).
pub mod abandon_code {
    pub const NO_ERROR: u64 = 0x0;
    pub const APPLICATION_ABANDON_PATH: u64 = 0x3e;
    pub const PATH_RESOURCE_LIMIT_REACHED: u64 = 0x3e75;
    pub const PATH_UNSTABLE_OR_POOR: u64 = 0x3e76;
    pub const NO_CID_AVAILABLE_FOR_PATH: u64 = 0x3e77;
}

/// Why a path could not be opened or changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("multipath QUIC was not negotiated (both sides must enable it)")]
    NotNegotiated,
    #[error("the handshake is not confirmed yet: open paths once the connection is established")]
    HandshakeNotConfirmed,
    #[error("only the client opens paths (draft-ietf-quic-multipath-21 §3)")]
    NotClient,
    #[error("the peer's path ID limit ({0}) is reached; asked it for more with PATHS_BLOCKED")]
    PathIdsBlocked(u32),
    #[error(
        "every path ID up to our own limit ({0}) is in use or spent: raise MultipathConfig::max_path_id"
    )]
    OwnPathIdLimit(u32),
    #[error("the peer gave no connection ID for path {0} yet; asked with PATH_CIDS_BLOCKED")]
    NoConnectionId(PathId),
    #[error("no such open path: {0}")]
    UnknownPath(PathId),
    #[error("path {0} is the last open path: close the connection instead")]
    LastPath(PathId),
}

impl PathError {
    /// Whether the same call may succeed later without the caller changing anything: the
    /// peer's connection IDs or path IDs for a new path may still be on their way (the
    /// connection asked for them).
    pub fn is_temporary(&self) -> bool {
        matches!(
            self,
            PathError::NoConnectionId(_)
                | PathError::PathIdsBlocked(_)
                | PathError::HandshakeNotConfirmed
        )
    }
}

/// Our PATH_STATUS of a path: its sequence number, whether it is available (else backup),
/// and whether the frame waits to be sent.
#[derive(Debug, Clone, Copy)]
struct LocalStatus {
    seq: u64,
    available: bool,
    pending: bool,
}

/// What the connection knows of multipath once both sides advertised it.
pub(super) struct MultipathState {
    /// The highest path ID the peer may use: our initial_max_path_id, raised by MAX_PATH_ID.
    pub local_max: u32,
    /// The highest path ID we may use.
    pub peer_max: u32,
    /// The peer's initial_max_path_id: its MAX_PATH_ID may never go below.
    peer_initial_max: u32,
    /// A MAX_PATH_ID frame (with `local_max`) waits to be sent.
    pub max_path_id_pending: bool,
    /// PATHS_BLOCKED waits to be sent, with the limit that blocked us.
    pub paths_blocked: Option<u32>,
    /// PATH_CIDS_BLOCKED frames waiting: path -> the next sequence number we expect.
    pub cids_blocked: BTreeMap<PathId, u64>,
    /// PATH_ABANDON frames waiting: path -> error code.
    pub abandon_pending: BTreeMap<PathId, u64>,
    /// Every path ID abandoned by either side: never used again.
    abandoned: BTreeSet<PathId>,
    local_status: BTreeMap<PathId, LocalStatus>,
    /// The peer's PATH_STATUS of each path: (sequence number, available).
    peer_status: BTreeMap<PathId, (u64, bool)>,
    scheduler: Box<dyn PathScheduler>,
    /// Scratch space of the scheduler's ranking.
    order: Vec<PathId>,
    /// The hint of the next data packet the scheduler ranked paths for.
    hint: Option<PacketHint>,
}

impl MultipathState {
    pub fn new(local_max: u32, peer_max: u32, scheduler: Box<dyn PathScheduler>) -> Self {
        MultipathState {
            local_max,
            peer_max,
            peer_initial_max: peer_max,
            max_path_id_pending: false,
            paths_blocked: None,
            cids_blocked: BTreeMap::new(),
            abandon_pending: BTreeMap::new(),
            abandoned: BTreeSet::new(),
            local_status: BTreeMap::new(),
            peer_status: BTreeMap::new(),
            scheduler,
            order: Vec::new(),
            hint: None,
        }
    }

    /// A path ID in a frame from the peer: above the limit we set is a violation.
    fn check(&self, path_id: u64, ty: u64) -> Result<PathId, TransportError> {
        if path_id > u64::from(self.local_max) {
            return Err(
                TransportError::protocol_violation("path ID above the maximum we allowed")
                    .with_frame(ty),
            );
        }
        Ok(PathId(path_id as u32))
    }

    pub fn is_abandoned(&self, id: PathId) -> bool {
        self.abandoned.contains(&id)
    }

    /// Path IDs both sides allow, in order.
    fn usable_ids(&self) -> impl Iterator<Item = PathId> + '_ {
        (0..=self.local_max.min(self.peer_max))
            .map(PathId)
            .filter(|id| !self.abandoned.contains(id))
    }

    /// Control frames wait to be sent.
    pub fn has_pending(&self) -> bool {
        self.max_path_id_pending
            || self.paths_blocked.is_some()
            || !self.cids_blocked.is_empty()
            || !self.abandon_pending.is_empty()
            || self.local_status.values().any(|s| s.pending)
    }

    fn peer_backup(&self, id: PathId) -> bool {
        self.peer_status.get(&id).is_some_and(|&(_, a)| !a)
    }

    fn local_backup(&self, id: PathId) -> bool {
        self.local_status.get(&id).is_some_and(|s| !s.available)
    }
}

impl Connection {
    /// Both sides advertised multipath (and the handshake gave its parameters).
    pub(super) fn multipath_active(&self) -> bool {
        self.multipath.is_some()
    }

    /// The peer's transport parameters arrived: enable multipath if both sides advertised
    /// it. A peer that advertises it with a zero-length connection ID breaks the draft (§2.1).
    pub(super) fn negotiate_multipath(
        &mut self,
        peer_max: Option<u64>,
    ) -> Result<(), TransportError> {
        let Some(peer_max) = peer_max else {
            return Ok(());
        };
        if self.peer_initial_scid.is_some_and(|c| c.is_empty()) {
            return Err(TransportError::protocol_violation(
                "initial_max_path_id with a zero-length connection ID",
            ));
        }
        let (Some(local_max), Some(mp)) = (self.advertised_max_path_id, &self.config.multipath)
        else {
            return Ok(());
        };
        let peer_max = u32::try_from(peer_max).unwrap_or(u32::MAX);
        self.multipath = Some(MultipathState::new(
            local_max,
            peer_max,
            mp.scheduler.build(),
        ));
        Ok(())
    }

    /// The path IDs we give the peer connection IDs for: every one both sides allow and not
    /// abandoned (draft §3.2.1: issue for each unused path ID), or path 0 alone.
    pub(super) fn cid_paths(&self) -> Vec<PathId> {
        match &self.multipath {
            Some(mp) => mp.usable_ids().collect(),
            None => vec![PathId::INITIAL],
        }
    }

    /// Opens a new path from `local` (`None`: the socket's choice) to `remote`, using the
    /// lowest path ID for which both sides have connection IDs. The path carries data once
    /// its validation succeeds. Client only, once the handshake is confirmed.
    pub fn open_path(
        &mut self,
        now: Instant,
        local: Option<SocketAddr>,
        remote: SocketAddr,
    ) -> Result<PathId, PathError> {
        if self.side.is_server() {
            return Err(PathError::NotClient);
        }
        let Some(mp) = &self.multipath else {
            return Err(PathError::NotNegotiated);
        };
        if !self.handshake_confirmed() {
            return Err(PathError::HandshakeNotConfirmed);
        }
        let unused: Vec<PathId> = mp
            .usable_ids()
            .filter(|id| self.slot_of(*id).is_none())
            .collect();
        let Some(&id) = unused
            .iter()
            .find(|id| self.remote_cids.active(**id).is_some())
        else {
            let mp = self.multipath.as_mut().expect("checked");
            return Err(match unused.first() {
                Some(&id) => {
                    mp.cids_blocked.insert(id, 0);
                    PathError::NoConnectionId(id)
                }
                None if mp.local_max < mp.peer_max => PathError::OwnPathIdLimit(mp.local_max),
                None => {
                    mp.paths_blocked = Some(mp.peer_max);
                    PathError::PathIdsBlocked(mp.peer_max)
                }
            });
        };
        let pi = self.add_path(now, id, remote);
        self.paths[pi].local = local;
        self.paths[pi].opened_locally();
        self.start_path_validation(now, pi);
        tracing::debug!(path = %id, %remote, "opening path");
        Ok(id)
    }

    /// A new path `id` to `remote`, with fresh congestion state; returns its slot.
    fn add_path(&mut self, now: Instant, id: PathId, remote: SocketAddr) -> usize {
        // The acknowledgement policy is the connection's (ACK_FREQUENCY applies to all
        // paths): a new path starts with what the others use.
        let acks = self.paths[0].space.ack.params();
        let mut path = Path::new(
            id,
            remote,
            PacketSpace::new(acks, self.config.packet_threshold, self.config.reordering),
            false,
            true,
            &self.config,
            now,
        );
        if let Some(p) = &self.peer_params {
            path.on_peer_max_udp_payload(
                self.config.max_udp_payload_size,
                p.max_udp_payload_size,
                self.config.mtu_discovery,
            );
        }
        self.paths.push(path);
        self.paths.len() - 1
    }

    /// Sends a PATH_CHALLENGE on path slot `pi` and times its answer (RFC 9000 §8.2.4).
    fn start_path_validation(&mut self, now: Instant, pi: usize) {
        let mut data = [0u8; 8];
        rand::RngCore::fill_bytes(&mut self.rng, &mut data);
        let deadline = now + self.validation_timeout();
        self.paths[pi].start_validation(data, deadline);
    }

    /// How long a path validation may take: three PTOs, at least six initial RTTs
    /// (RFC 9000 §8.2.4).
    pub(super) fn validation_timeout(&self) -> Duration {
        (self.max_pto() * 3).max(self.config.initial_rtt * 6)
    }

    /// The slot of the path a 1-RTT datagram arrived on, from its destination connection ID:
    /// `Some((slot, true))` for a path the peer opens with it (a slot made for it, to be
    /// dropped again if no packet decrypts), `None` when the datagram must be dropped.
    pub(super) fn resolve_path(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        data: &[u8],
    ) -> Option<(usize, bool)> {
        let Some(mp) = &self.multipath else {
            return Some((0, false));
        };
        let len = self.local_cids.cid_len;
        if data.first().is_none_or(|b| b & 0x80 != 0) || data.len() < 1 + len {
            return Some((0, false));
        }
        let dcid = crate::types::ConnectionId::new(&data[1..1 + len]);
        let Some(id) = self.local_cids.path_of(&dcid) else {
            // Not (or no longer) ours: it fails decryption on path 0's keys and is dropped.
            return Some((0, false));
        };
        if let Some(pi) = self.slot_of(id) {
            return Some((pi, false));
        }
        // Only clients open paths, once the handshake is confirmed, with a path ID not
        // abandoned before (draft §3.1, §3.4).
        if self.side.is_client() || !self.handshake_confirmed() || mp.is_abandoned(id) {
            return None;
        }
        Some((self.add_path(now, id, remote), true))
    }

    /// After the datagram for which `resolve_path` made slot `pi`: keep the path if a packet
    /// of it decrypted, and validate the peer's address there before sending it data.
    pub(super) fn settle_new_path(&mut self, now: Instant, pi: usize) {
        if self.paths[pi].space.largest_received_pn().is_none() {
            self.paths.remove(pi);
            return;
        }
        tracing::debug!(path = %self.paths[pi].id, remote = %self.paths[pi].remote, "peer opened a path");
        self.start_path_validation(now, pi);
    }

    /// Whether packets may go out on path slot `pi`: open, with a connection ID of the peer.
    pub(super) fn can_send_on(&self, pi: usize) -> bool {
        let path = &self.paths[pi];
        path.is_open() && self.remote_cids.active(path.id).is_some()
    }

    /// The slots of the paths that may carry new data now, best first (the scheduler's
    /// choice among open, validated paths). Without multipath: the one path.
    pub(super) fn data_paths(&mut self, now: Instant) -> SmallVec<[usize; 4]> {
        let mut out = SmallVec::new();
        let Some(mp) = self.multipath.as_ref() else {
            out.push(0);
            return out;
        };
        let mut views: SmallVec<[PathView; 4]> = SmallVec::new();
        for (pi, p) in self.paths.iter().enumerate() {
            if !p.is_open() || !p.is_validated() || self.remote_cids.active(p.id).is_none() {
                continue;
            }
            views.push(PathView {
                id: p.id,
                srtt: p.rtt.smoothed(),
                has_rtt_sample: p.rtt.has_sample(),
                cwnd: p.cc.window(),
                bytes_in_flight: self.bytes_in_flight(pi),
                window_limits: p.cc.limits_sending(),
                peer_backup: mp.peer_backup(p.id),
                local_backup: mp.local_backup(p.id),
                pto_count: p.recovery.pto_count,
                loss: p.losses.estimate(),
            });
        }
        let hint = self.extensions.iter().find_map(|e| e.next_packet_hint());
        let mp = self.multipath.as_mut().expect("checked");
        mp.order.clear();
        mp.hint = hint;
        let mut cx = SchedulerCx {
            now,
            rng: &mut self.rng,
            next_packet: hint,
        };
        mp.scheduler.rank(&mut cx, &views, &mut mp.order);
        for id in &mp.order {
            if let Some(pi) = self.paths.iter().position(|p| p.id == *id) {
                out.push(pi);
            }
        }
        out
    }

    /// A packet with new data left on path slot `pi`: the scheduler learns where it went.
    pub(super) fn on_data_packet_sent(&mut self, pi: usize) {
        let id = self.paths[pi].id;
        if let Some(mp) = self.multipath.as_mut() {
            mp.scheduler.on_sent(id, mp.hint.as_ref());
        }
    }

    /// Whether the scheduler sends every data packet on every path it ranks.
    pub(super) fn replicating(&self) -> bool {
        self.multipath
            .as_ref()
            .is_some_and(|mp| mp.scheduler.replicates())
    }

    /// A data packet on path slot `pi` carried the data frames of `copy`: every other path
    /// the (replicating) scheduler ranked now owes a copy. At most a congestion window's
    /// worth of copies wait per path (at least 16 packets, at most 4 MiB).
    pub(super) fn replicate(&mut self, pi: usize, copy: super::replica::Replica) {
        let Some(mp) = self.multipath.as_ref() else {
            return;
        };
        let from = self.paths[pi].id;
        let to: SmallVec<[usize; 4]> = (mp.order.iter())
            .filter(|&&id| id != from)
            .filter_map(|&id| self.slot_of(id).filter(|&pj| self.can_send_on(pj)))
            .collect();
        // The last path takes the copy itself, the others a clone.
        if let Some((&last, rest)) = to.split_last() {
            for &pj in rest {
                self.queue_copy(pj, copy.clone());
            }
            self.queue_copy(last, copy);
        }
    }

    /// Path slot `pj` owes `copy`; at most its window's worth wait.
    fn queue_copy(&mut self, pj: usize, copy: super::replica::Replica) {
        let path = &mut self.paths[pj];
        let max = usize::try_from(path.cc.window())
            .unwrap_or(usize::MAX)
            .clamp(16 * path.mtu, 4 << 20);
        self.stats.replicas_dropped += path.replicas.push(copy, max);
    }

    /// Whether the scheduler chooses a path before every datagram.
    pub(super) fn scheduler_per_packet(&self) -> bool {
        self.multipath
            .as_ref()
            .is_some_and(|mp| mp.scheduler.per_packet())
    }

    /// Marks path `id` as a backup (used only when no other path is) or available again,
    /// and tells the peer (PATH_STATUS_BACKUP / PATH_STATUS_AVAILABLE).
    pub fn set_path_backup(&mut self, id: PathId, backup: bool) -> Result<(), PathError> {
        let Some(mp) = self.multipath.as_mut() else {
            return Err(PathError::NotNegotiated);
        };
        if mp.is_abandoned(id) || id.0 > mp.local_max.min(mp.peer_max) {
            return Err(PathError::UnknownPath(id));
        }
        let s = mp.local_status.entry(id).or_insert(LocalStatus {
            seq: 0,
            available: true,
            pending: false,
        });
        s.seq += 1;
        s.available = !backup;
        s.pending = true;
        Ok(())
    }

    /// Abandons path `id` (PATH_ABANDON with `error_code`, see [`abandon_code`]): nothing
    /// more is sent on it, what was in flight there is sent again elsewhere.
    pub fn close_path(
        &mut self,
        now: Instant,
        id: PathId,
        error_code: u64,
    ) -> Result<(), PathError> {
        let Some(mp) = &self.multipath else {
            return Err(PathError::NotNegotiated);
        };
        let Some(pi) = self.slot_of(id).filter(|&pi| self.paths[pi].is_open()) else {
            return Err(PathError::UnknownPath(id));
        };
        if mp.is_abandoned(id) {
            return Err(PathError::UnknownPath(id));
        }
        if !self
            .paths
            .iter()
            .enumerate()
            .any(|(i, p)| i != pi && p.is_open())
        {
            return Err(PathError::LastPath(id));
        }
        self.abandon_path(now, id, error_code);
        Ok(())
    }

    /// Abandons path `id` (ours or the peer's decision): one PATH_ABANDON of ours, the peer's
    /// connection IDs of the path retired at once, its state kept three PTOs to acknowledge
    /// what is still in flight (draft §3.4). The path ID is spent, so the peer may use one
    /// more (MAX_PATH_ID).
    fn abandon_path(&mut self, now: Instant, id: PathId, error_code: u64) {
        let Some(mp) = self.multipath.as_mut() else {
            return;
        };
        if !mp.abandoned.insert(id) {
            return;
        }
        mp.abandon_pending.insert(id, error_code);
        mp.cids_blocked.remove(&id);
        if mp.local_max < u32::MAX {
            mp.local_max += 1;
            mp.max_path_id_pending = true;
        }
        self.remote_cids.remove_path(id);
        let linger = self.max_pto() * 3;
        if let Some(pi) = self.slot_of(id)
            && self.paths[pi].is_open()
        {
            self.paths[pi].life = Life::Abandoned {
                discard_at: now + linger,
            };
            // Its packets in flight count no more; what they carried goes again elsewhere.
            self.requeue_path_in_flight(pi);
            self.stats.replicas_dropped += self.paths[pi].replicas.clear();
            self.events
                .push_back(Event::PathAbandoned { id, error_code });
        }
        self.issue_cids();
        if !self.paths.iter().any(|p| p.is_open()) && !self.is_closed() {
            // The last path is gone (draft §3.4: close the connection).
            self.close_with_error(
                now,
                TransportError::new(error_code::NO_ERROR, "every path was abandoned"),
            );
        }
    }

    /// Path slot `pi` reached its second probe timeout in a row: if another path can carry
    /// data, what `pi` holds in flight is queued again for it (draft §5.7). Duplicates are
    /// harmless; a hole waiting for a loss that no acknowledgement will reveal is not.
    pub(super) fn rescue_failing_path(&mut self, pi: usize) {
        if self.multipath.is_none() || self.paths[pi].recovery.pto_count < 2 {
            return;
        }
        if self.has_healthy_alternative(pi) {
            self.requeue_path_in_flight(pi);
        }
    }

    /// Whether path slot `pi` looks broken (two probe timeouts in a row) while another
    /// open, validated path does not: then its probes carry no data, which goes on the
    /// healthy paths instead.
    pub(super) fn failing_with_alternative(&self, pi: usize) -> bool {
        self.multipath.is_some()
            && self.paths[pi].recovery.pto_count >= 2
            && self.has_healthy_alternative(pi)
    }

    fn has_healthy_alternative(&self, pi: usize) -> bool {
        self.paths
            .iter()
            .enumerate()
            .any(|(i, p)| i != pi && p.is_open() && p.is_validated() && p.recovery.pto_count < 2)
    }

    /// Queues again what the ack-eliciting packets in flight on path slot `pi` carried (the
    /// path was abandoned or looks broken: they will not be repaired there soon).
    fn requeue_path_in_flight(&mut self, pi: usize) {
        let frames: Vec<SentFrames> = self.paths[pi]
            .space
            .loss
            .sent()
            .iter()
            .filter(|(_, p)| p.ack_eliciting)
            .map(|(_, p)| p.info.frames.clone())
            .collect();
        for f in frames {
            self.requeue_frames(Pns::Data(pi), &f);
        }
    }

    /// Drops abandoned paths whose linger time is over; their packets still outstanding
    /// are lost (their content was queued again when the path was abandoned).
    pub(super) fn discard_abandoned_paths(&mut self, now: Instant) {
        let mut pi = 0;
        while pi < self.paths.len() {
            let due =
                matches!(self.paths[pi].life, Life::Abandoned { discard_at } if now >= discard_at);
            if !due {
                pi += 1;
                continue;
            }
            let path = self.paths.remove(pi);
            let lost: Vec<super::PacketId> = path
                .space
                .loss
                .sent()
                .iter()
                .map(|(pn, _)| path.packet(pn))
                .collect();
            if !lost.is_empty() {
                self.for_each_extension(now, |e, cx| e.on_packets_lost(cx, &lost));
            }
            for cid in self.local_cids.remove_path(path.id) {
                self.endpoint_events
                    .push_back(EndpointEvent::RetiredLocalCid(cid));
            }
        }
    }

    /// Path validation timers: a migrated path falls back to its old address; a new path
    /// that failed validation is abandoned (draft §3.1).
    pub(super) fn on_path_validation_timeouts(&mut self, now: Instant) {
        let mut failed = Vec::new();
        for p in &mut self.paths {
            if p.on_validation_timeout(now) == ValidationTimeout::Failed && p.is_open() {
                failed.push(p.id);
            }
        }
        if self.multipath.is_none() {
            return;
        }
        for id in failed {
            let others_open = self.paths.iter().any(|p| p.id != id && p.is_open());
            if others_open {
                tracing::debug!(path = %id, "path validation failed");
                self.abandon_path(now, id, abandon_code::PATH_UNSTABLE_OR_POOR);
            }
        }
    }

    /// A path's validation just succeeded: tell the application it carries data now.
    pub(super) fn on_path_validated(&mut self, pi: usize) {
        if self.multipath.is_some() {
            self.events
                .push_back(Event::PathAvailable(self.paths[pi].id));
        }
    }

    /// The multipath frames other than PATH_ACK (see `on_path_ack`).
    pub(super) fn on_multipath_frame(
        &mut self,
        now: Instant,
        frame: Frame<'_>,
    ) -> Result<(), TransportError> {
        let ty = frame.ty();
        let Some(mp) = self.multipath.as_mut() else {
            return Err(TransportError::protocol_violation(
                "multipath frame without multipath negotiated",
            )
            .with_frame(ty));
        };
        match frame {
            Frame::PathAbandon {
                path_id,
                error_code,
            } => {
                let id = mp.check(path_id, ty)?;
                tracing::debug!(path = %id, error_code, "peer abandoned a path");
                self.abandon_path(now, id, abandon_code::NO_ERROR);
            }
            Frame::PathStatus {
                path_id,
                seq,
                available,
            } => {
                let id = mp.check(path_id, ty)?;
                let newer = mp.peer_status.get(&id).is_none_or(|&(s, _)| seq > s);
                if newer && !mp.is_abandoned(id) {
                    mp.peer_status.insert(id, (seq, available));
                }
            }
            Frame::PathNewConnectionId {
                path_id,
                seq,
                retire_prior_to,
                cid,
                reset_token,
            } => {
                let id = mp.check(path_id, ty)?;
                if !mp.is_abandoned(id) {
                    mp.cids_blocked.remove(&id);
                    self.remote_cids
                        .on_new_cid(id, seq, retire_prior_to, cid, reset_token)
                        .map_err(|e| e.with_frame(ty))?;
                }
            }
            Frame::PathRetireConnectionId { path_id, seq } => {
                let id = mp.check(path_id, ty)?;
                let abandoned = mp.is_abandoned(id);
                let dcid = self.rx_dcid;
                if let Some(cid) = self
                    .local_cids
                    .retire(id, seq, &dcid)
                    .map_err(|e| e.with_frame(ty))?
                {
                    self.endpoint_events
                        .push_back(EndpointEvent::RetiredLocalCid(cid));
                    if !abandoned {
                        self.issue_cids();
                    }
                }
            }
            Frame::MaxPathId(max) => {
                if max < u64::from(mp.peer_initial_max) {
                    return Err(TransportError::protocol_violation(
                        "MAX_PATH_ID below initial_max_path_id",
                    )
                    .with_frame(ty));
                }
                let max = max as u32;
                if max > mp.peer_max {
                    mp.peer_max = max;
                    mp.paths_blocked = None;
                    self.issue_cids();
                }
            }
            Frame::PathsBlocked(max) => {
                // Informational: we raise the limit as paths are abandoned.
                if max > u64::from(mp.local_max) {
                    return Err(TransportError::protocol_violation(
                        "PATHS_BLOCKED above the maximum we allowed",
                    )
                    .with_frame(ty));
                }
            }
            Frame::PathCidsBlocked { path_id, next_seq } => {
                let id = mp.check(path_id, ty)?;
                if next_seq > self.local_cids.next_seq(id) {
                    return Err(TransportError::protocol_violation(
                        "PATH_CIDS_BLOCKED for an ID we never issued",
                    )
                    .with_frame(ty));
                }
                self.issue_cids();
            }
            _ => unreachable!("only multipath frames come here"),
        }
        Ok(())
    }

    /// PATH_ACK (and, with multipath, ACK: path 0): the acknowledged path's space, if the
    /// path is still known; otherwise the frame is ignored (draft §4).
    pub(super) fn on_path_ack(
        &mut self,
        now: Instant,
        path_id: u64,
        ack: &frame::Ack<'_>,
        ty: u64,
    ) -> Result<(), TransportError> {
        let id = match &self.multipath {
            Some(mp) => mp.check(path_id, ty)?,
            None => PathId::INITIAL,
        };
        match self.slot_of(id) {
            Some(pi) => self.on_ack_frame(now, Pns::Data(pi), ack),
            None => Ok(()),
        }
    }

    /// Writes the pending multipath control frames that fit before `end`.
    pub(super) fn write_multipath_frames(
        &mut self,
        buf: &mut Vec<u8>,
        end: usize,
        frames: &mut SentFrames,
    ) {
        use super::sent::SentFrame;
        let Some(mp) = self.multipath.as_mut() else {
            return;
        };
        let room = |buf: &Vec<u8>| end.saturating_sub(buf.len());
        while let Some((&id, &code)) = mp.abandon_pending.first_key_value() {
            let f = Frame::PathAbandon {
                path_id: u64::from(id.0),
                error_code: code,
            };
            if f.encoded_len() > room(buf) {
                return;
            }
            f.encode(buf);
            frames.push(SentFrame::PathAbandon {
                path: id,
                error_code: code,
            });
            mp.abandon_pending.pop_first();
        }
        if mp.max_path_id_pending {
            let f = Frame::MaxPathId(u64::from(mp.local_max));
            if f.encoded_len() > room(buf) {
                return;
            }
            f.encode(buf);
            frames.push(SentFrame::MaxPathId);
            mp.max_path_id_pending = false;
        }
        for (&id, s) in mp.local_status.iter_mut().filter(|(_, s)| s.pending) {
            let f = Frame::PathStatus {
                path_id: u64::from(id.0),
                seq: s.seq,
                available: s.available,
            };
            if f.encoded_len() > room(buf) {
                return;
            }
            f.encode(buf);
            frames.push(SentFrame::PathStatus {
                path: id,
                seq: s.seq,
            });
            s.pending = false;
        }
        if let Some(max) = mp.paths_blocked {
            let f = Frame::PathsBlocked(u64::from(max));
            if f.encoded_len() > room(buf) {
                return;
            }
            f.encode(buf);
            frames.push(SentFrame::PathsBlocked);
            mp.paths_blocked = None;
        }
        while let Some((&id, &next_seq)) = mp.cids_blocked.first_key_value() {
            let f = Frame::PathCidsBlocked {
                path_id: u64::from(id.0),
                next_seq,
            };
            if f.encoded_len() > room(buf) {
                return;
            }
            f.encode(buf);
            frames.push(SentFrame::PathCidsBlocked(id));
            mp.cids_blocked.pop_first();
        }
    }

    /// A packet with a multipath control frame was lost: send the frame again if it still
    /// says what it said.
    pub(super) fn on_multipath_frame_lost(&mut self, f: &super::sent::SentFrame) {
        use super::sent::SentFrame;
        let Some(mp) = self.multipath.as_mut() else {
            return;
        };
        match *f {
            SentFrame::PathAbandon { path, error_code } => {
                mp.abandon_pending.insert(path, error_code);
            }
            SentFrame::PathStatus { path, seq } => {
                if let Some(s) = mp.local_status.get_mut(&path)
                    && s.seq == seq
                {
                    s.pending = true;
                }
            }
            SentFrame::MaxPathId => mp.max_path_id_pending = true,
            // Informational: MAY be sent again; not worth it once acted upon or not.
            SentFrame::PathsBlocked | SentFrame::PathCidsBlocked(_) => {}
            _ => {}
        }
    }

    /// Per-path states for the application: id, addresses, open or abandoned, validated.
    pub fn paths_info(&self) -> Vec<PathInfo> {
        self.paths
            .iter()
            .enumerate()
            .map(|(pi, p)| PathInfo {
                id: p.id,
                local: p.local,
                remote: p.remote,
                state: if !p.is_open() {
                    PathState::Abandoned
                } else if p.is_validated() {
                    PathState::Validated
                } else {
                    PathState::Validating
                },
                backup: self
                    .multipath
                    .as_ref()
                    .is_some_and(|mp| mp.local_backup(p.id) || mp.peer_backup(p.id)),
                stats: self.path_stats_at(pi),
                bytes_sent: p.bytes_sent,
                bytes_received: p.bytes_received,
            })
            .collect()
    }
}

/// Where a path is, as [`Connection::paths_info`] tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathState {
    /// Its peer address is being validated: only probes go there.
    Validating,
    /// Validated and open: it may carry data.
    Validated,
    /// Abandoned by either side; kept a short while to acknowledge late packets.
    Abandoned,
}

impl std::fmt::Display for PathState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PathState::Validating => "validating",
            PathState::Validated => "validated",
            PathState::Abandoned => "abandoned",
        })
    }
}

/// A path of the connection as the application sees it.
#[derive(Debug, Clone, Copy)]
pub struct PathInfo {
    pub id: PathId,
    pub local: Option<SocketAddr>,
    pub remote: SocketAddr,
    pub state: PathState,
    /// Either side asked to use it only as a backup.
    pub backup: bool,
    pub stats: super::PathStats,
    /// UDP payload bytes sent and received on the path.
    pub bytes_sent: u64,
    pub bytes_received: u64,
}
