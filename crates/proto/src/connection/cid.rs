//! Connection IDs: those we issue to the peer (RFC 9000 §5.1.1) and those the peer issued
//! to us (§5.1.2), with retirement in both directions.

use std::collections::{BTreeMap, BTreeSet};

use rand::RngCore;

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

/// Connection IDs we issued.
#[derive(Debug)]
pub struct LocalCids {
    pub cid_len: usize,
    /// seq -> cid still usable by the peer.
    pub active: BTreeMap<u64, ConnectionId>,
    next_seq: u64,
    /// NEW_CONNECTION_ID frames to (re)send.
    pub pending_new: BTreeSet<u64>,
    /// How many the peer lets us give it.
    pub peer_limit: u64,
}

impl LocalCids {
    pub fn new(initial: ConnectionId) -> Self {
        let mut active = BTreeMap::new();
        active.insert(0, initial);
        LocalCids {
            cid_len: initial.len(),
            active,
            next_seq: 1,
            pending_new: BTreeSet::new(),
            peer_limit: 2,
        }
    }

    /// Issues new IDs up to the peer's limit (at most 8); returns the new ones for routing.
    pub fn top_up<R: RngCore + ?Sized>(&mut self, rng: &mut R) -> Vec<ConnectionId> {
        let mut issued = Vec::new();
        if self.cid_len == 0 {
            return issued;
        }
        while (self.active.len() as u64) < self.peer_limit.min(8) {
            let cid = ConnectionId::random(rng, self.cid_len);
            let seq = self.next_seq;
            self.next_seq += 1;
            self.active.insert(seq, cid);
            self.pending_new.insert(seq);
            issued.push(cid);
        }
        issued
    }

    /// The peer retired `seq`; returns the retired ID for unrouting.
    pub fn retire(
        &mut self,
        seq: u64,
        packet_dcid: &ConnectionId,
    ) -> Result<Option<ConnectionId>, TransportError> {
        if seq >= self.next_seq {
            return Err(TransportError::new(
                error_code::PROTOCOL_VIOLATION,
                "RETIRE_CONNECTION_ID for an unissued sequence number",
            ));
        }
        if self.active.get(&seq) == Some(packet_dcid) {
            return Err(TransportError::new(
                error_code::PROTOCOL_VIOLATION,
                "RETIRE_CONNECTION_ID of the ID carrying it",
            ));
        }
        self.pending_new.remove(&seq);
        Ok(self.active.remove(&seq))
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
        let issued = local.top_up(&mut rng);
        assert_eq!(issued.len(), 3);
        let carrier = issued[0];
        assert_eq!(
            local.retire(0, &carrier).unwrap(),
            Some(ConnectionId::new(&[1; 8]))
        );
        assert!(
            local.retire(1, &carrier).is_err(),
            "retiring the carrier's own ID is a violation"
        );
        assert!(
            local.retire(99, &carrier).is_err(),
            "unissued sequence numbers are a violation"
        );
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
