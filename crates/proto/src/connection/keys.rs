//! 1-RTT packet protection and key updates (RFC 9001 §6).

use rustls::quic::{HeaderProtectionKey, PacketKey};

use std::collections::BTreeMap;

use super::path::{PacketId, PathId};
use crate::crypto::{DirectionalKeys, NextSecrets, PacketKeyPair, SpaceKeys};
use crate::time::Instant;

pub struct OneRttKeys {
    pub local_header: Box<dyn HeaderProtectionKey>,
    pub remote_header: Box<dyn HeaderProtectionKey>,
    pub local: Box<dyn PacketKey>,
    pub remote: Box<dyn PacketKey>,
    /// The next generation, derived ahead so a peer-initiated update costs nothing on receipt.
    pub next: PacketKeyPair,
    secrets: NextSecrets,
    /// The previous generation's receive key, kept for reordered packets until a deadline.
    pub prev_remote: Option<(Box<dyn PacketKey>, Option<Instant>)>,
    pub key_phase: bool,
    /// First packet number we sent in the current phase, per path (each path numbers its
    /// packets; a path missing here sent all its packets in the current phase).
    phase_first_sent: BTreeMap<PathId, u64>,
    /// Lowest packet number received in the current phase, per path.
    phase_first_received: BTreeMap<PathId, u64>,
    /// A packet sent in the current phase was acknowledged: a new update may start.
    pub phase_acked: bool,
    /// Packets sent with the current local key (confidentiality limit).
    pub sent_in_phase: u64,
    /// Packets that failed authentication in the whole connection (integrity limit).
    pub auth_failures: u64,
}

impl OneRttKeys {
    pub fn new(keys: SpaceKeys, mut secrets: NextSecrets) -> Self {
        let SpaceKeys {
            local:
                DirectionalKeys {
                    header: lh,
                    packet: lp,
                },
            remote:
                DirectionalKeys {
                    header: rh,
                    packet: rp,
                },
        } = keys;
        let next = secrets.next_packet_keys();
        OneRttKeys {
            local_header: lh,
            remote_header: rh,
            local: lp,
            remote: rp,
            next,
            secrets,
            prev_remote: None,
            key_phase: false,
            phase_first_sent: BTreeMap::new(),
            phase_first_received: BTreeMap::new(),
            phase_acked: false,
            sent_in_phase: 0,
            auth_failures: 0,
        }
    }

    /// Switches to the next key generation (initiated by us or in response to the peer).
    /// `next_pns`: the next packet number of each path; `old_key_deadline`: when to drop the
    /// previous receive key (None: decided later).
    pub fn rotate(
        &mut self,
        next_pns: impl IntoIterator<Item = (PathId, u64)>,
        old_key_deadline: Option<Instant>,
    ) {
        let mut next = self.secrets.next_packet_keys();
        std::mem::swap(&mut self.next, &mut next);
        let old_remote = std::mem::replace(&mut self.remote, next.remote);
        self.local = next.local;
        self.prev_remote = Some((old_remote, old_key_deadline));
        self.key_phase = !self.key_phase;
        self.phase_first_sent = next_pns.into_iter().collect();
        self.phase_first_received.clear();
        self.phase_acked = false;
        self.sent_in_phase = 0;
    }

    /// Whether our `packet` was sent under the current keys.
    pub fn sent_in_phase(&self, packet: PacketId) -> bool {
        self.phase_first_sent
            .get(&packet.path)
            .is_none_or(|&first| packet.pn >= first)
    }

    /// The peer's packet `pn` on `path`, under a key phase other than the current one, is
    /// older than every packet received in the current phase there: it used the previous keys.
    pub fn before_phase(&self, path: PathId, pn: u64) -> bool {
        self.phase_first_received
            .get(&path)
            .is_none_or(|&first| pn < first)
    }

    /// The peer's packet `pn` on `path` decrypted under the current keys.
    pub fn on_received_in_phase(&mut self, path: PathId, pn: u64) {
        let first = self.phase_first_received.entry(path).or_insert(pn);
        *first = (*first).min(pn);
    }

    /// Drops the old receive key once its deadline passed.
    pub fn discard_old(&mut self, now: Instant) {
        if let Some((_, Some(deadline))) = &self.prev_remote
            && now >= *deadline
        {
            self.prev_remote = None;
        }
    }

    pub fn prev_discard_deadline(&self) -> Option<Instant> {
        self.prev_remote.as_ref().and_then(|(_, d)| *d)
    }

    /// Leave a margin below the AEAD confidentiality limit, then update.
    pub fn should_update(&self) -> bool {
        let limit = self.local.confidentiality_limit();
        self.phase_acked && self.sent_in_phase >= limit.saturating_sub(limit / 16)
    }
}
