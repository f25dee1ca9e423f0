//! FEC's trace events, emitted through the connection's event sink
//! ([`ExtensionCx::emit`](qfec_proto::ExtensionCx::emit)) only when the connection has one.
//!
//! In qlog they form the private `fec` namespace ([`QLOG_SCHEMA`]): `fec:source_protected`,
//! `fec:repair_sent`, `fec:symbol_recovered` and `fec:scheme_changed`.

use std::any::Any;

use qfec_erasure::{Field, Scheme};
use qfec_proto::events::{ExtensionEvent, Value};

use crate::wire::SchemeId;

/// The event schema URI of the `fec` namespace (private: not an IETF URN).
pub const QLOG_SCHEMA: &str = "urn:x-qfec:qlog:events:fec";

/// What FEC did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FecEvent {
    /// A sent packet's STREAM/DATAGRAM frames became source symbol `sid`.
    SourceProtected {
        sid: u64,
        packet_number: u64,
        /// Bytes of the symbol (before padding).
        len: usize,
    },
    /// A REPAIR frame went into the packet being built.
    RepairSent { scheme: SchemeId, len: usize },
    /// The decoder recovered source symbol `sid`; its frames are processed as if received.
    SymbolRecovered { sid: u64 },
    /// The sender's code changed (the redundancy controller chose another, or none).
    SchemeChanged { scheme: Option<Scheme> },
}

impl FecEvent {
    fn scheme_name(s: Option<&Scheme>) -> &'static str {
        match s {
            None => "none",
            Some(Scheme::Xor { .. }) => "xor",
            Some(Scheme::ReedSolomon { .. }) => "rs",
            Some(Scheme::Rlc {
                field: Field::Gf2, ..
            }) => "rlc-gf2",
            Some(Scheme::Rlc { .. }) => "rlc",
        }
    }
}

fn scheme_id_name(id: SchemeId) -> &'static str {
    match id {
        SchemeId::Xor => "xor",
        SchemeId::ReedSolomon => "rs",
        SchemeId::RlcGf256 => "rlc",
        SchemeId::RlcGf2 => "rlc-gf2",
    }
}

impl ExtensionEvent for FecEvent {
    fn name(&self) -> &'static str {
        match self {
            FecEvent::SourceProtected { .. } => "fec:source_protected",
            FecEvent::RepairSent { .. } => "fec:repair_sent",
            FecEvent::SymbolRecovered { .. } => "fec:symbol_recovered",
            FecEvent::SchemeChanged { .. } => "fec:scheme_changed",
        }
    }

    fn fields(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
        match *self {
            FecEvent::SourceProtected {
                sid,
                packet_number,
                len,
            } => {
                f("sid", Value::U64(sid));
                f("packet_number", Value::U64(packet_number));
                f("length", Value::U64(len as u64));
            }
            FecEvent::RepairSent { scheme, len } => {
                f("scheme", Value::Str(scheme_id_name(scheme)));
                f("length", Value::U64(len as u64));
            }
            FecEvent::SymbolRecovered { sid } => f("sid", Value::U64(sid)),
            FecEvent::SchemeChanged { scheme } => {
                f("scheme", Value::Str(Self::scheme_name(scheme.as_ref())));
                match scheme {
                    Some(Scheme::Xor { k, depth }) => {
                        f("k", Value::U64(u64::from(k)));
                        f("depth", Value::U64(u64::from(depth)));
                    }
                    Some(Scheme::ReedSolomon { k, m }) => {
                        f("k", Value::U64(u64::from(k)));
                        f("m", Value::U64(u64::from(m)));
                    }
                    Some(Scheme::Rlc {
                        window,
                        interval,
                        repairs,
                        ..
                    }) => {
                        f("window", Value::U64(u64::from(window)));
                        f("interval", Value::U64(u64::from(interval)));
                        f("repairs", Value::U64(u64::from(repairs)));
                    }
                    None => {}
                }
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
