//! Versions and Version Negotiation packets (RFC 9000 §6, §17.2.1).

use rand::RngCore;

/// QUIC version 1 (RFC 9000).
pub const VERSION_1: u32 = 0x0000_0001;

/// QUIC version 2 (RFC 9369): version 1 with other long-header type bits, Initial salt,
/// Retry key and key-derivation labels.
pub const VERSION_2: u32 = 0x6b33_43cf;

/// The versions a server accepts, in its order of preference for Version Negotiation.
pub const SUPPORTED_VERSIONS: [u32; 2] = [VERSION_1, VERSION_2];

pub fn supported_version(v: u32) -> bool {
    SUPPORTED_VERSIONS.contains(&v)
}

/// Versions of the form 0x?a?a?a?a, reserved to exercise version negotiation (§15).
pub fn is_reserved_version(v: u32) -> bool {
    v & 0x0f0f_0f0f == 0x0a0a_0a0a
}

/// A random reserved version, for greasing Version Negotiation packets.
pub fn reserved_version<R: RngCore + ?Sized>(rng: &mut R) -> u32 {
    (rng.next_u32() & 0xf0f0_f0f0) | 0x0a0a_0a0a
}

/// Writes a Version Negotiation packet. `dcid`/`scid` are the packet's own fields, i.e. the
/// client's SCID and DCID swapped (§17.2.1); both may be up to 255 bytes.
pub fn write_version_negotiation(
    buf: &mut Vec<u8>,
    dcid: &[u8],
    scid: &[u8],
    supported: &[u32],
    random_first_byte: u8,
) {
    debug_assert!(dcid.len() <= 255 && scid.len() <= 255);
    buf.push(0x80 | random_first_byte);
    buf.extend_from_slice(&0u32.to_be_bytes());
    buf.push(dcid.len() as u8);
    buf.extend_from_slice(dcid);
    buf.push(scid.len() as u8);
    buf.extend_from_slice(scid);
    for v in supported {
        buf.extend_from_slice(&v.to_be_bytes());
    }
}

/// The versions of a raw Supported Versions list (trailing partial entry ignored).
pub fn versions(raw: &[u8]) -> impl Iterator<Item = u32> + '_ {
    raw.chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
}
