//! Connection migration on one path (RFC 9000 §9): the client moving to a new local address
//! on purpose, and a server following a client that did so with a new connection ID.
//! A peer that only rebinds (a NAT) is followed in `receive` (`on_peer_address_change`).

use std::net::SocketAddr;

use super::path::PathId;
use super::{Connection, HANDSHAKE_PATH};
use crate::time::Instant;
use crate::types::ConnectionId;

/// Why the connection cannot migrate now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MigrateError {
    #[error("only the client migrates (RFC 9000 §9)")]
    NotClient,
    #[error("the handshake is not confirmed yet: migrate once the connection is established")]
    HandshakeNotConfirmed,
    #[error("the server asked for no migration (disable_active_migration)")]
    Disabled,
    #[error("multipath QUIC is on: open a path from the new address and abandon the old one")]
    Multipath,
    #[error(
        "the server gave no spare connection ID: a new address would be linkable to the old (RFC 9000 §9.5)"
    )]
    NoConnectionId,
    #[error("the connection is closing")]
    Closed,
}

impl Connection {
    /// Moves the connection to our new local address `local` (RFC 9000 §9.2): packets leave
    /// from it under the server's next connection ID (the one in use is retired), the path
    /// is validated with a PATH_CHALLENGE, and congestion control and the RTT estimate start
    /// afresh (§9.4). The caller sends from `local` from now on (e.g. a new socket, the old
    /// one closed), so there is no going back: if the challenge goes unanswered the path
    /// stays unvalidated, and the idle timeout ends a connection the new address cannot
    /// carry.
    pub fn migrate(&mut self, now: Instant, local: SocketAddr) -> Result<(), MigrateError> {
        if self.side.is_server() {
            return Err(MigrateError::NotClient);
        }
        if self.is_closed() {
            return Err(MigrateError::Closed);
        }
        if self.multipath.is_some() {
            return Err(MigrateError::Multipath);
        }
        if !self.handshake_confirmed() {
            return Err(MigrateError::HandshakeNotConfirmed);
        }
        if self
            .peer_params
            .as_ref()
            .is_some_and(|p| p.disable_active_migration)
        {
            return Err(MigrateError::Disabled);
        }
        if !self.remote_cids.rotate(PathId::INITIAL) {
            return Err(MigrateError::NoConnectionId);
        }
        let mut data = [0u8; 8];
        rand::RngCore::fill_bytes(&mut self.rng, &mut data);
        let deadline = now + self.validation_timeout();
        let path = &mut self.paths[HANDSHAKE_PATH];
        tracing::debug!(from = ?path.local, to = %local, "migrating");
        path.migrate_local(local, data, deadline);
        path.reset_congestion(&self.config, now);
        // A non-probing frame from the new address moves the peer there (§9.3), even if we
        // have nothing else to send (a client that only receives would otherwise stay silent
        // while the server sends to the old address).
        self.pending.ping = true;
        self.stats.migrations += 1;
        Ok(())
    }

    /// Client, once the handshake is confirmed: moves to the server's preferred_address of
    /// our path's address family, if it gave one (RFC 9000 §9.6.1), under the connection ID
    /// that came with it. The new server address is validated with a PATH_CHALLENGE, and
    /// congestion control and the RTT estimate start afresh (§9.4); if the challenge goes
    /// unanswered the path goes back to the server's first address (§9.3.2).
    pub(super) fn move_to_preferred_address(&mut self, now: Instant) {
        if self.side.is_server() || !self.config.use_preferred_address || self.multipath.is_some() {
            return;
        }
        let Some(params) = self.peer_params.as_ref() else {
            return;
        };
        let Some(pa) = &params.preferred_address else {
            return;
        };
        let remote = self.paths[HANDSHAKE_PATH].remote;
        let to = match remote {
            SocketAddr::V4(_) => pa.ipv4.map(SocketAddr::V4),
            SocketAddr::V6(_) => pa.ipv6.map(SocketAddr::V6),
        };
        let Some(to) = to.filter(|to| *to != remote) else {
            return;
        };
        // The preferred address's ID (sequence 1) is the lowest spare one.
        if !self.remote_cids.rotate(PathId::INITIAL) {
            return;
        }
        let mut data = [0u8; 8];
        rand::RngCore::fill_bytes(&mut self.rng, &mut data);
        let deadline = now + self.validation_timeout();
        tracing::debug!(from = %remote, %to, "moving to the server's preferred address");
        let path = &mut self.paths[HANDSHAKE_PATH];
        path.migrate(to, 0, data, deadline);
        path.opened_locally();
        path.reset_congestion(&self.config, now);
        self.pending.ping = true;
        self.stats.preferred_address_moves += 1;
    }

    /// Server: the client's newest packet on its current address used our ID `dcid`. When
    /// the client moves to another of our IDs (as it does migrating on purpose, RFC 9000
    /// §9.5, or to stay unlinkable), we answer under a new ID of its own, so that nothing
    /// links what we send before and after.
    pub(super) fn follow_peer_cid(&mut self, dcid: ConnectionId) {
        let moved = self
            .peer_dcid
            .replace(dcid)
            .is_some_and(|before| before != dcid);
        if moved && self.multipath.is_none() && self.remote_cids.rotate(PathId::INITIAL) {
            tracing::debug!("the client changed connection IDs: so do we");
        }
    }
}
