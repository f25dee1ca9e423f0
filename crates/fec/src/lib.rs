//! # qfec-fec: forward erasure correction inside QUIC
//!
//! An extension of `qfec-proto` (through its extension seam; the core knows nothing of FEC)
//! over the `qfec-erasure` codes (which know nothing of QUIC), after
//! draft-michel-quic-fec-01 with the SID frame (the draft's alternative 2). The wire format,
//! field by field, is in `crates/fec/WIRE.md`.
//!
//! - **Negotiation**: `enable_fec`, `decoder_fec_scheme` (the schemes an endpoint decodes) and
//!   `initial_coding_window`. Each direction is negotiated on its own: we send repair symbols
//!   only if the peer enabled FEC, decodes our scheme and has a coding window; a peer that
//!   sends none of these parameters gets plain QUIC.
//! - **Sender** (module `sender`): 1-RTT packets with STREAM or DATAGRAM frames
//!   carry a SID frame before them; those frames, zero-padded, are the source symbol. The
//!   [`RedundancyController`] picks the code and when to protect; REPAIR frames obey
//!   congestion control and pacing and are never retransmitted. When the application runs
//!   out of data the open block or window is protected at once, so a tail loss does not wait
//!   for a probe timeout. A SYMBOL_ACK from the peer releases the recovered packets from
//!   retransmission (also after loss detection fired, while the retransmission is queued)
//!   and reaches congestion control as a loss (`signal`), a delivery (`mask`), or either
//!   as the path shows a standing queue or not (`differentiate`).
//! - **Receiver** (module `receiver`): source and repair symbols feed the erasure
//!   decoder; a recovered packet's frames are processed as if received, once; recovered SIDs
//!   go back in SYMBOL_ACK frames ahead of the ACK frame; memory is bounded by local limits.
//!
//! ```
//! use qfec_fec::{FecConfig, Redundancy};
//! use qfec_proto::{RecoveredLossMode, TransportConfig};
//!
//! let mut transport = TransportConfig::default();
//! let mut fec = FecConfig::new("rlc".parse::<Redundancy>().ok());
//! fec.mode = RecoveredLossMode::Signal;
//! fec.install(&mut transport);
//! assert_eq!(transport.extensions.len(), 1);
//! ```

pub mod events;
mod extension;
mod receiver;
pub mod redundancy;
mod sender;
pub mod wire;

use std::sync::Arc;

use qfec_proto::{RecoveredLossMode, TransportConfig};

pub use events::FecEvent;
pub use extension::FecExtension;
pub use redundancy::{
    Feedback, FixedRedundancy, ParseRedundancyError, Redundancy, RedundancyController,
    RedundancyCx, fit_to_window, parse_fec,
};
pub use wire::SchemeId;

/// Default coding window: source symbols a receiver stores for decoding. Papers 002/003's
/// codes need 30 (Reed-Solomon 20 + 10).
pub const DEFAULT_CODING_WINDOW: u64 = 64;

/// FEC settings of an endpoint's connections.
#[derive(Debug, Clone, PartialEq)]
pub struct FecConfig {
    /// What we send: `None` sends no repair (we may still decode).
    pub send: Option<Redundancy>,
    /// How a loss the peer recovered reaches our congestion control.
    pub mode: RecoveredLossMode,
    /// Schemes we decode (`decoder_fec_scheme`); empty: we decode nothing.
    pub decode: Vec<SchemeId>,
    /// Source symbols we store for decoding (`initial_coding_window`).
    pub coding_window: u64,
}

impl FecConfig {
    /// Sends with `send`, decodes every scheme, in `send`'s default mode
    /// ([`Redundancy::default_mode`]; `signal` without `send`).
    pub fn new(send: Option<Redundancy>) -> FecConfig {
        FecConfig {
            send,
            mode: send.map_or(RecoveredLossMode::Signal, |r| r.default_mode()),
            decode: SchemeId::ALL.to_vec(),
            coding_window: DEFAULT_CODING_WINDOW,
        }
    }

    /// Adds FEC to `transport`'s connections; in `differentiate` mode also turns on the
    /// transport's loss differentiation (a loss without a standing queue reduces the window
    /// by 1/5 only: [`TransportConfig::loss_differentiation`]).
    pub fn install(self, transport: &mut TransportConfig) {
        // A sender that differentiates recovered losses does so for unrecovered ones too.
        if self.send.is_some() && self.mode == RecoveredLossMode::Differentiate {
            transport.loss_differentiation = true;
        }
        transport.extensions.push(Arc::new(extension::FecFactory {
            config: Arc::new(self),
        }));
    }
}

/// What FEC did on one connection (both directions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FecStats {
    /// The scheme we encode with, once encoding started.
    pub sending: Option<SchemeId>,
    /// The symbol size of the code we encode with (it follows the path's datagram size).
    pub symbol_size: Option<usize>,
    /// The scheme the peer's repair symbols use, once one arrived.
    pub receiving: Option<SchemeId>,
    pub source_symbols_sent: u64,
    pub repair_symbols_sent: u64,
    /// Bytes FEC added on the wire: packets carrying REPAIR frames, SID, SYMBOL_ACK and
    /// FEC_WINDOW frames.
    pub fec_bytes_sent: u64,
    /// Our source symbols the peer reported recovered.
    pub peer_recovered: u64,
    pub source_symbols_received: u64,
    pub repair_symbols_received: u64,
    /// Source symbols we recovered.
    pub symbols_recovered: u64,
    /// Originals that arrived after we had recovered them (their frames were skipped).
    pub late_sources: u64,
    /// Repair symbols that arrived too late to matter.
    pub repairs_ignored: u64,
    /// Source symbols that arrived again with the same frames (a copy sent on another path):
    /// their frames were skipped.
    pub duplicate_sources: u64,
    /// Repair symbols that arrived again (a copy sent on another path): ignored.
    pub duplicate_repairs: u64,
    /// Repair symbols dropped unsent because they no longer fit a packet.
    pub repairs_dropped: u64,
    /// Repair symbols dropped unsent because every DATAGRAM they protect was past its
    /// deadline (it could no longer reach the peer's application in time).
    pub repairs_expired: u64,
}
