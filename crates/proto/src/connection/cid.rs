//! Connection IDs: those we issue to the peer (RFC 9000 §5.1.1) and those the peer issued
//! to us (§5.1.2), with retirement in both directions.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rand::RngCore;

use super::path::PathId;
use crate::types::{ConnectionId, TransportError, error_code};

/// Derives stateless reset tokens from connection IDs, so the endpoint can recreate them
/// without per-connection state (RFC 9000 §10.3.2).
#[derive(Clone)]
pub struct ResetKey(ring::hmac::Key);

impl ResetKey {
    pub fn new(secret: &[u8; 32]) -> Self {
        ResetKey(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret))
    }
    pub fn token(&self, cid: &ConnectionId) -> [u8; 16] {
        let tag = ring::hmac::sign(&self.0, cid);
        let mut t = [0u8; 16];
        t.copy_from_slice(&tag.as_ref()[..16]);
        t
    }
}

impl std::fmt::Debug for ResetKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResetKey(..)")
    }
}

/// Connection IDs we issued, per path ID (each path ID numbers its IDs from 0; without
/// multipath every ID belongs to path 0).
#[derive(Debug)]
pub struct LocalCids {
    pub cid_len: usize,
    /// (path, seq) -> cid still usable by the peer.
    active: BTreeMap<(PathId, u64), ConnectionId>,
    /// Which path each active ID belongs to.
    paths: HashMap<ConnectionId, PathId>,
    /// The next sequence number of each path ID that has IDs.
    next_seq: BTreeMap<PathId, u64>,
    /// NEW_CONNECTION_ID / PATH_NEW_CONNECTION_ID frames to (re)send.
    pub pending_new: BTreeSet<(PathId, u64)>,
    /// How many the peer lets us give it, per path.
    pub peer_limit: u64,
}

impl LocalCids {
    pub fn new(initial: ConnectionId) -> Self {
        let mut cids = LocalCids {
            cid_len: initial.len(),
            active: BTreeMap::new(),
            paths: HashMap::new(),
            next_seq: BTreeMap::new(),
            pending_new: BTreeSet::new(),
            peer_limit: 2,
        };
        cids.insert(PathId::INITIAL, initial);
        cids
    }

    fn insert(&mut self, path: PathId, cid: ConnectionId) -> u64 {
        let next = self.next_seq.entry(path).or_insert(0);
        let seq = *next;
        *next += 1;
        self.active.insert((path, seq), cid);
        self.paths.insert(cid, path);
        seq
    }

    /// The ID of our preferred_address transport parameter: sequence number 1 of path 0,
    /// already known to the peer (no NEW_CONNECTION_ID).
    pub fn add_preferred_address_cid(&mut self, cid: ConnectionId) {
        debug_assert_eq!(self.next_seq(PathId::INITIAL), 1);
        self.insert(PathId::INITIAL, cid);
    }

    /// Our oldest ID still active (the one long headers carry).
    pub fn first(&self) -> Option<ConnectionId> {
        self.active.values().next().copied()
    }

    /// The ID `seq` of `path`, while the peer may use it.
    pub fn get(&self, path: PathId, seq: u64) -> Option<ConnectionId> {
        self.active.get(&(path, seq)).copied()
    }

    /// The path an ID of ours belongs to.
    pub fn path_of(&self, cid: &ConnectionId) -> Option<PathId> {
        self.paths.get(cid).copied()
    }

    /// Issues new IDs for each of `paths` up to the peer's limit (at most 8 per path);
    /// returns the new ones for routing.
    pub fn top_up<R: RngCore + ?Sized>(
        &mut self,
        rng: &mut R,
        paths: impl IntoIterator<Item = PathId>,
    ) -> Vec<ConnectionId> {
        let mut issued = Vec::new();
        if self.cid_len == 0 {
            return issued;
        }
        for path in paths {
            // Bounded: short IDs could run out of fresh values.
            let mut attempts = 0;
            while (self.count(path) as u64) < self.peer_limit.min(8) && attempts < 64 {
                attempts += 1;
                let cid = ConnectionId::random(rng, self.cid_len);
                if self.paths.contains_key(&cid) {
                    continue;
                }
                let seq = self.insert(path, cid);
                self.pending_new.insert((path, seq));
                issued.push(cid);
            }
        }
        issued
    }

    /// Active IDs of `path`.
    fn count(&self, path: PathId) -> usize {
        self.active.range((path, 0)..=(path, u64::MAX)).count()
    }

    /// The sequence number the next ID of `path` gets.
    pub fn next_seq(&self, path: PathId) -> u64 {
        self.next_seq.get(&path).copied().unwrap_or(0)
    }

    /// The peer retired `seq` of `path`; returns the retired ID for unrouting.
    pub fn retire(
        &mut self,
        path: PathId,
        seq: u64,
        packet_dcid: &ConnectionId,
    ) -> Result<Option<ConnectionId>, TransportError> {
        if seq >= self.next_seq(path) {
            return Err(TransportError::new(
                error_code::PROTOCOL_VIOLATION,
                "RETIRE_CONNECTION_ID for an unissued sequence number",
            ));
        }
        if self.active.get(&(path, seq)) == Some(packet_dcid) {
            return Err(TransportError::new(
                error_code::PROTOCOL_VIOLATION,
                "RETIRE_CONNECTION_ID of the ID carrying it",
            ));
        }
        self.pending_new.remove(&(path, seq));
        let cid = self.active.remove(&(path, seq));
        if let Some(c) = &cid {
            self.paths.remove(c);
        }
        Ok(cid)
    }

    /// Forgets every ID of an abandoned path; returns them for unrouting.
    pub fn remove_path(&mut self, path: PathId) -> Vec<ConnectionId> {
        let seqs: Vec<u64> = self
            .active
            .range((path, 0)..=(path, u64::MAX))
            .map(|(&(_, s), _)| s)
            .collect();
        let mut gone = Vec::new();
        for seq in seqs {
            if let Some(c) = self.active.remove(&(path, seq)) {
                self.paths.remove(&c);
                gone.push(c);
            }
            self.pending_new.remove(&(path, seq));
        }
        gone
    }
}

/// Connection IDs the peer issued to us.
#[derive(Debug)]
pub struct RemoteCids {
    /// The one we put in packets now.
    pub active: (u64, ConnectionId, Option<[u8; 16]>),
    /// Spares: seq -> (cid, reset token).
    spare: BTreeMap<u64, (ConnectionId, [u8; 16])>,
    retire_prior_to: u64,
    /// RETIRE_CONNECTION_ID frames to send.
    pub pending_retire: BTreeSet<u64>,
    /// Our active_connection_id_limit.
    limit: u64,
}

impl RemoteCids {
    pub fn new(initial: ConnectionId, limit: u64) -> Self {
        RemoteCids {
            active: (0, initial, None),
            spare: BTreeMap::new(),
            retire_prior_to: 0,
            pending_retire: BTreeSet::new(),
            limit,
        }
    }

    pub fn set_initial(&mut self, cid: ConnectionId) {
        self.active.1 = cid;
    }

    pub fn set_initial_reset_token(&mut self, token: [u8; 16]) {
        self.active.2 = Some(token);
    }

    pub fn is_reset_token(&self, token: &[u8]) -> bool {
        self.active.2.as_ref().is_some_and(|t| t == token)
            || self.spare.values().any(|(_, t)| t == token)
    }

    pub fn on_new_cid(
        &mut self,
        seq: u64,
        retire_prior_to: u64,
        cid: ConnectionId,
        token: [u8; 16],
    ) -> Result<(), TransportError> {
        if self.active.1.is_empty() {
            return Err(TransportError::new(
                error_code::PROTOCOL_VIOLATION,
                "NEW_CONNECTION_ID while using zero-length connection IDs",
            ));
        }
        let known = if seq == self.active.0 {
            Some((self.active.1, self.active.2))
        } else {
            self.spare.get(&seq).map(|(c, t)| (*c, Some(*t)))
        };
        if let Some((c, t)) = known
            && (c != cid || t.is_some_and(|t| t != token))
        {
            return Err(TransportError::new(
                error_code::PROTOCOL_VIOLATION,
                "NEW_CONNECTION_ID reuses a sequence number",
            ));
        }
        if seq < self.retire_prior_to {
            // Already retired: retire it again, and keep nothing.
            self.pending_retire.insert(seq);
        } else if known.is_none() {
            self.spare.insert(seq, (cid, token));
        }
        if retire_prior_to > self.retire_prior_to {
            self.retire_prior_to = retire_prior_to;
            let old: Vec<u64> = self
                .spare
                .range(..retire_prior_to)
                .map(|(s, _)| *s)
                .collect();
            for s in old {
                self.spare.remove(&s);
                self.pending_retire.insert(s);
            }
            if self.active.0 < retire_prior_to {
                self.pending_retire.insert(self.active.0);
                let Some((&s, &(c, t))) = self.spare.iter().next() else {
                    return Err(TransportError::new(
                        error_code::PROTOCOL_VIOLATION,
                        "peer retired every connection ID we could use",
                    ));
                };
                self.spare.remove(&s);
                self.active = (s, c, Some(t));
            }
        }
        if self.pending_retire.len() as u64 > 2 * self.limit.max(2) {
            // The peer makes us retire faster than our acknowledgements can keep up.
            return Err(TransportError::new(
                error_code::CONNECTION_ID_LIMIT_ERROR,
                "too many connection IDs waiting to be retired",
            ));
        }
        if self.spare.len() as u64 + 1 > self.limit {
            return Err(TransportError::new(
                error_code::CONNECTION_ID_LIMIT_ERROR,
                "peer exceeded active_connection_id_limit",
            ));
        }
        Ok(())
    }

    /// Moves to the peer's next unused ID and retires the one in use (a new path must not
    /// be linkable to the old, RFC 9000 §9.5). False when the peer gave no spare.
    pub fn rotate(&mut self) -> bool {
        let Some((s, (c, t))) = self.spare.pop_first() else {
            return false;
        };
        self.pending_retire.insert(self.active.0);
        self.active = (s, c, Some(t));
        true
    }
}

/// The connection IDs the peer issued to us, per path ID.
#[derive(Debug)]
pub struct PeerCids {
    paths: BTreeMap<PathId, RemoteCids>,
    /// Our active_connection_id_limit (per path).
    limit: u64,
}

impl PeerCids {
    /// The peer's first ID, for path 0.
    pub fn new(initial: ConnectionId, limit: u64) -> Self {
        let mut paths = BTreeMap::new();
        paths.insert(PathId::INITIAL, RemoteCids::new(initial, limit));
        PeerCids { paths, limit }
    }

    /// The ID we put in packets on `path`.
    pub fn active(&self, path: PathId) -> Option<ConnectionId> {
        self.paths.get(&path).map(|r| r.active.1)
    }

    /// The server's first ID, learnt from its first packet or a Retry (handshake path).
    pub fn set_initial(&mut self, cid: ConnectionId) {
        if let Some(r) = self.paths.get_mut(&PathId::INITIAL) {
            r.set_initial(cid);
        }
    }

    /// The stateless_reset_token transport parameter: the token of the server's first ID.
    pub fn set_initial_reset_token(&mut self, token: [u8; 16]) {
        if let Some(r) = self.paths.get_mut(&PathId::INITIAL) {
            r.set_initial_reset_token(token);
        }
    }

    pub fn is_reset_token(&self, token: &[u8]) -> bool {
        self.paths.values().any(|r| r.is_reset_token(token))
    }

    /// A NEW_CONNECTION_ID (path 0) or PATH_NEW_CONNECTION_ID frame.
    pub fn on_new_cid(
        &mut self,
        path: PathId,
        seq: u64,
        retire_prior_to: u64,
        cid: ConnectionId,
        token: [u8; 16],
    ) -> Result<(), TransportError> {
        match self.paths.get_mut(&path) {
            Some(r) => r.on_new_cid(seq, retire_prior_to, cid, token),
            None => {
                let mut r = RemoteCids::new(cid, self.limit);
                r.active = (seq, cid, Some(token));
                if retire_prior_to > 0 {
                    // Retires nothing we hold but moves the floor for what comes later.
                    r.on_new_cid(seq, retire_prior_to.min(seq), cid, token)?;
                }
                self.paths.insert(path, r);
                Ok(())
            }
        }
    }

    /// Moves `path` to the peer's next unused ID, retiring the one in use ([`RemoteCids::rotate`]).
    pub fn rotate(&mut self, path: PathId) -> bool {
        self.paths.get_mut(&path).is_some_and(RemoteCids::rotate)
    }

    /// The first RETIRE_CONNECTION_ID / PATH_RETIRE_CONNECTION_ID waiting to be sent.
    pub fn first_pending_retire(&self) -> Option<(PathId, u64)> {
        self.paths
            .iter()
            .find_map(|(p, r)| r.pending_retire.first().map(|s| (*p, *s)))
    }

    pub fn has_pending_retire(&self) -> bool {
        self.paths.values().any(|r| !r.pending_retire.is_empty())
    }

    /// The retirement of `seq` of `path` went out (or must go again, `pending`).
    pub fn set_retire_pending(&mut self, path: PathId, seq: u64, pending: bool) {
        if let Some(r) = self.paths.get_mut(&path) {
            if pending {
                r.pending_retire.insert(seq);
            } else {
                r.pending_retire.remove(&seq);
            }
        }
    }

    /// The path was abandoned: its IDs count as retired at once (draft §3.4), with nothing
    /// to send.
    pub fn remove_path(&mut self, path: PathId) {
        self.paths.remove(&path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn peer_may_retire_the_initial_id_from_a_packet_using_a_newer_one() {
        // Regression: the check must use the DCID of the packet carrying the frame, not our
        // first ID (found against quinn, which switches IDs and retires sequence 0).
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let mut local = LocalCids::new(ConnectionId::new(&[1; 8]));
        local.peer_limit = 4;
        let issued = local.top_up(&mut rng, [PathId::INITIAL]);
        assert_eq!(issued.len(), 3);
        let carrier = issued[0];
        assert_eq!(
            local.retire(PathId::INITIAL, 0, &carrier).unwrap(),
            Some(ConnectionId::new(&[1; 8]))
        );
        assert!(
            local.retire(PathId::INITIAL, 1, &carrier).is_err(),
            "retiring the carrier's own ID is a violation"
        );
        assert!(
            local.retire(PathId::INITIAL, 99, &carrier).is_err(),
            "unissued sequence numbers are a violation"
        );
    }

    #[test]
    fn each_path_numbers_its_ids_and_routes_them_back() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
        let mut local = LocalCids::new(ConnectionId::new(&[1; 8]));
        local.peer_limit = 2;
        let issued = local.top_up(&mut rng, [PathId(0), PathId(1), PathId(2)]);
        assert_eq!(
            issued.len(),
            5,
            "one more for path 0, two each for paths 1 and 2"
        );
        assert_eq!(local.next_seq(PathId(0)), 2);
        assert_eq!(local.next_seq(PathId(1)), 2);
        let p1 = local.get(PathId(1), 0).unwrap();
        assert_eq!(local.path_of(&p1), Some(PathId(1)));
        assert_eq!(local.path_of(&ConnectionId::new(&[1; 8])), Some(PathId(0)));
        // Sequence numbers are per path: path 2 never issued 5.
        assert!(local.retire(PathId(2), 5, &p1).is_err());
        assert!(local.retire(PathId(2), 0, &p1).unwrap().is_some());
        let gone = local.remove_path(PathId(1));
        assert_eq!(gone.len(), 2);
        assert_eq!(local.path_of(&p1), None);
        assert!(local.pending_new.iter().all(|(p, _)| *p != PathId(1)));
    }

    #[test]
    fn peer_ids_per_path_retire_within_their_path() {
        let mut peer = PeerCids::new(ConnectionId::new(&[9; 8]), 4);
        peer.on_new_cid(PathId(1), 0, 0, ConnectionId::new(&[1; 8]), [1; 16])
            .unwrap();
        peer.on_new_cid(PathId(1), 1, 1, ConnectionId::new(&[2; 8]), [2; 16])
            .unwrap();
        assert_eq!(peer.active(PathId(1)), Some(ConnectionId::new(&[2; 8])));
        assert_eq!(peer.active(PathId(0)), Some(ConnectionId::new(&[9; 8])));
        assert_eq!(peer.first_pending_retire(), Some((PathId(1), 0)));
        assert!(peer.is_reset_token(&[2; 16]));
        peer.remove_path(PathId(1));
        assert_eq!(peer.active(PathId(1)), None);
        assert!(!peer.is_reset_token(&[2; 16]));
        assert!(!peer.has_pending_retire());
    }

    #[test]
    fn retire_prior_to_switches_the_active_id() {
        let mut remote = RemoteCids::new(ConnectionId::new(&[9; 8]), 4);
        remote
            .on_new_cid(1, 0, ConnectionId::new(&[2; 8]), [2; 16])
            .unwrap();
        remote
            .on_new_cid(2, 2, ConnectionId::new(&[3; 8]), [3; 16])
            .unwrap();
        assert_eq!(remote.active.1, ConnectionId::new(&[3; 8]));
        assert!(remote.pending_retire.contains(&0) && remote.pending_retire.contains(&1));
        assert!(remote.is_reset_token(&[3; 16]));
    }

    #[test]
    fn too_many_ids_is_a_limit_error() {
        let mut remote = RemoteCids::new(ConnectionId::new(&[9; 8]), 2);
        remote
            .on_new_cid(1, 0, ConnectionId::new(&[2; 8]), [2; 16])
            .unwrap();
        let e = remote
            .on_new_cid(2, 0, ConnectionId::new(&[3; 8]), [3; 16])
            .unwrap_err();
        assert_eq!(e.code, error_code::CONNECTION_ID_LIMIT_ERROR);
    }
}
