//! Parsing and writing of long and short headers.

use super::LongType;
use super::number::write_pn;
use super::retry::RETRY_TAG_LEN;
use crate::coding::{Reader, Truncated, patch_varint_fixed};
use crate::types::{ConnectionId, MAX_CID_SIZE};

/// Why a datagram (or the rest of it) cannot be processed; the packet is dropped silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("header truncated")]
    Truncated,
    #[error("fixed bit is zero")]
    FixedBitZero,
    #[error("connection ID longer than 20 bytes")]
    CidTooLong,
    #[error("Length field exceeds the datagram")]
    LengthExceedsDatagram,
    #[error("malformed Version Negotiation packet")]
    BadVersionNegotiation,
}

impl From<Truncated> for HeaderError {
    fn from(_: Truncated) -> Self {
        HeaderError::Truncated
    }
}

/// The header fields readable before header protection is removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParsedHeader<'a> {
    VersionNegotiation {
        dcid: ConnectionId,
        scid: ConnectionId,
        /// Raw list, a non-empty multiple of 4 bytes; see [`super::versions`].
        versions: &'a [u8],
    },
    Retry {
        version: u32,
        dcid: ConnectionId,
        scid: ConnectionId,
        token: &'a [u8],
        integrity_tag: [u8; 16],
    },
    Long {
        /// Initial, ZeroRtt or Handshake.
        ty: LongType,
        version: u32,
        dcid: ConnectionId,
        scid: ConnectionId,
        /// Initial only; empty otherwise.
        token: &'a [u8],
        pn_offset: usize,
        /// Bytes of this packet in the datagram, header included (pn_offset + Length).
        packet_len: usize,
    },
    Short {
        dcid: ConnectionId,
        pn_offset: usize,
        /// The rest of the datagram.
        packet_len: usize,
    },
    /// A long header of a version we do not speak: answer with Version Negotiation.
    UnsupportedVersion {
        version: u32,
        /// Up to 255 bytes each, per RFC 8999.
        dcid: &'a [u8],
        scid: &'a [u8],
    },
}

impl ParsedHeader<'_> {
    /// Bytes of the datagram this packet occupies (the caller advances by this for coalesced
    /// packets).
    pub fn packet_len(&self, datagram_len: usize) -> usize {
        match self {
            ParsedHeader::Long { packet_len, .. } | ParsedHeader::Short { packet_len, .. } => {
                *packet_len
            }
            _ => datagram_len,
        }
    }

    /// The destination connection ID, for routing.
    pub fn dcid(&self) -> &[u8] {
        match self {
            ParsedHeader::VersionNegotiation { dcid, .. }
            | ParsedHeader::Retry { dcid, .. }
            | ParsedHeader::Long { dcid, .. }
            | ParsedHeader::Short { dcid, .. } => dcid,
            ParsedHeader::UnsupportedVersion { dcid, .. } => dcid,
        }
    }
}

fn cid(r: &mut Reader<'_>) -> Result<ConnectionId, HeaderError> {
    let len = usize::from(r.u8()?);
    if len > MAX_CID_SIZE {
        return Err(HeaderError::CidTooLong);
    }
    Ok(ConnectionId::new(r.bytes(len)?))
}

/// Parses the header of the packet at the start of `datagram`. `local_cid_len` is the length
/// of the connection IDs we issue, needed to delimit short headers.
pub fn parse_header(
    datagram: &[u8],
    local_cid_len: usize,
) -> Result<ParsedHeader<'_>, HeaderError> {
    let mut r = Reader::new(datagram);
    let first = r.u8()?;
    if first & 0x80 == 0 {
        if first & 0x40 == 0 {
            return Err(HeaderError::FixedBitZero);
        }
        let dcid = r.bytes(local_cid_len)?;
        let dcid = ConnectionId::try_new(dcid).ok_or(HeaderError::CidTooLong)?;
        return Ok(ParsedHeader::Short {
            dcid,
            pn_offset: r.position(),
            packet_len: datagram.len(),
        });
    }
    let version = r.u32()?;
    if version != 0 && !super::supported_version(version) {
        let dcid_len = usize::from(r.u8()?);
        let dcid = r.bytes(dcid_len)?;
        let scid_len = usize::from(r.u8()?);
        let scid = r.bytes(scid_len)?;
        return Ok(ParsedHeader::UnsupportedVersion {
            version,
            dcid,
            scid,
        });
    }
    let dcid = cid(&mut r)?;
    let scid = cid(&mut r)?;
    if version == 0 {
        let versions = r.rest();
        if versions.is_empty() || !versions.len().is_multiple_of(4) {
            return Err(HeaderError::BadVersionNegotiation);
        }
        return Ok(ParsedHeader::VersionNegotiation {
            dcid,
            scid,
            versions,
        });
    }
    if first & 0x40 == 0 {
        return Err(HeaderError::FixedBitZero);
    }
    let ty = LongType::from_bits(first >> 4, version);
    if ty == LongType::Retry {
        let rest = r.rest();
        let token_len = rest
            .len()
            .checked_sub(RETRY_TAG_LEN)
            .ok_or(HeaderError::Truncated)?;
        let (token, tag) = rest.split_at(token_len);
        let mut integrity_tag = [0u8; RETRY_TAG_LEN];
        integrity_tag.copy_from_slice(tag);
        return Ok(ParsedHeader::Retry {
            version,
            dcid,
            scid,
            token,
            integrity_tag,
        });
    }
    let token = if ty == LongType::Initial {
        r.varint_bytes()?
    } else {
        &[]
    };
    let length = r.varint()?;
    let pn_offset = r.position();
    if length > r.remaining() as u64 {
        return Err(HeaderError::LengthExceedsDatagram);
    }
    let packet_len = pn_offset + length as usize;
    Ok(ParsedHeader::Long {
        ty,
        version,
        dcid,
        scid,
        token,
        pn_offset,
        packet_len,
    })
}

/// Where [`write_long_header`] put the fields patched after the payload is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongHeaderOffsets {
    pub length_offset: usize,
    pub pn_offset: usize,
}

/// Writes a long header (Initial, 0-RTT or Handshake) with a 2-byte placeholder Length and
/// the packet number in `pn_len` bytes. `token` is written for Initial packets only.
#[allow(clippy::too_many_arguments)] // mirrors the header's fields one to one
pub fn write_long_header(
    buf: &mut Vec<u8>,
    ty: LongType,
    version: u32,
    dcid: &ConnectionId,
    scid: &ConnectionId,
    token: &[u8],
    pn: u64,
    pn_len: usize,
) -> LongHeaderOffsets {
    debug_assert!(ty != LongType::Retry, "use write_retry");
    debug_assert!((1..=4).contains(&pn_len));
    buf.push(0xc0 | (ty.bits(version) << 4) | (pn_len as u8 - 1));
    buf.extend_from_slice(&version.to_be_bytes());
    buf.push(dcid.len() as u8);
    buf.extend_from_slice(dcid);
    buf.push(scid.len() as u8);
    buf.extend_from_slice(scid);
    if ty == LongType::Initial {
        crate::coding::put_varint(buf, token.len() as u64);
        buf.extend_from_slice(token);
    }
    let length_offset = buf.len();
    buf.extend_from_slice(&[0x40, 0]);
    let pn_offset = buf.len();
    write_pn(buf, pn, pn_len);
    LongHeaderOffsets {
        length_offset,
        pn_offset,
    }
}

/// Fills in the Length field: packet number + payload + AEAD tag, at most 16383 bytes.
pub fn set_long_length(buf: &mut [u8], offsets: &LongHeaderOffsets, payload_plus_pn_len: usize) {
    debug_assert!(
        payload_plus_pn_len < 1 << 14,
        "long packet too large for a 2-byte Length"
    );
    patch_varint_fixed(
        &mut buf[offsets.length_offset..],
        payload_plus_pn_len as u64,
        2,
    );
}

/// Writes a short (1-RTT) header; returns the packet number's offset.
pub fn write_short_header(
    buf: &mut Vec<u8>,
    dcid: &ConnectionId,
    spin: bool,
    key_phase: bool,
    pn: u64,
    pn_len: usize,
) -> usize {
    debug_assert!((1..=4).contains(&pn_len));
    buf.push(0x40 | (u8::from(spin) << 5) | (u8::from(key_phase) << 2) | (pn_len as u8 - 1));
    buf.extend_from_slice(dcid);
    let pn_offset = buf.len();
    write_pn(buf, pn, pn_len);
    pn_offset
}

/// Packet number length from an unprotected first byte.
pub fn pn_len_from_first_byte(first: u8) -> usize {
    usize::from(first & 0x03) + 1
}

/// Key Phase bit of an unprotected short-header first byte.
pub fn key_phase_bit(first: u8) -> bool {
    first & 0x04 != 0
}

/// Reserved bits of an unprotected first byte must be zero, else PROTOCOL_VIOLATION (§17.2).
pub fn reserved_bits_ok(first: u8) -> bool {
    let mask = if first & 0x80 != 0 { 0x0c } else { 0x18 };
    first & mask == 0
}
