//! Packet headers (RFC 9000 §17, RFC 8999 invariants), packet numbers, Version Negotiation,
//! Retry (with the RFC 9001 §5.8 integrity tag) and stateless resets.
//!
//! Everything here works on the bytes visible before header protection is removed; the
//! crypto layer unmasks the first byte and the packet number using the offsets returned.

mod header;
mod number;
mod retry;
mod version;

#[cfg(test)]
mod tests;

pub use crate::frame::PacketKind;
pub use header::{
    HeaderError, LongHeaderOffsets, ParsedHeader, key_phase_bit, parse_header,
    pn_len_from_first_byte, reserved_bits_ok, set_long_length, write_long_header,
    write_short_header,
};
pub use number::{decode_pn, pn_len_for, read_pn, write_pn};
pub use retry::{
    RESET_TOKEN_LEN, RETRY_TAG_LEN, retry_integrity_tag, stateless_reset_token, verify_retry,
    write_retry, write_stateless_reset,
};
pub use version::{
    SUPPORTED_VERSIONS, VERSION_1, VERSION_2, is_reserved_version, reserved_version,
    supported_version, versions, write_version_negotiation,
};

/// Long-header packet types (RFC 9000 §17.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LongType {
    Initial,
    ZeroRtt,
    Handshake,
    Retry,
}

impl LongType {
    /// The two type bits of the first byte (already shifted down) in `version`: version 2
    /// numbers the types one further (RFC 9369 §3.2).
    pub fn bits(self, version: u32) -> u8 {
        let v1 = match self {
            LongType::Initial => 0,
            LongType::ZeroRtt => 1,
            LongType::Handshake => 2,
            LongType::Retry => 3,
        };
        if version == VERSION_2 {
            (v1 + 1) & 3
        } else {
            v1
        }
    }

    pub fn from_bits(bits: u8, version: u32) -> Self {
        let v1 = if version == VERSION_2 {
            bits.wrapping_sub(1) & 3
        } else {
            bits & 3
        };
        match v1 {
            0 => LongType::Initial,
            1 => LongType::ZeroRtt,
            2 => LongType::Handshake,
            _ => LongType::Retry,
        }
    }

    /// The frame-carrying packet kind; `None` for Retry.
    pub fn packet_kind(self) -> Option<PacketKind> {
        match self {
            LongType::Initial => Some(PacketKind::Initial),
            LongType::ZeroRtt => Some(PacketKind::ZeroRtt),
            LongType::Handshake => Some(PacketKind::Handshake),
            LongType::Retry => None,
        }
    }
}
