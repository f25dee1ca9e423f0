//! Retry packets with their integrity tag (RFC 9000 §17.2.5, RFC 9001 §5.8) and stateless
//! resets (RFC 9000 §10.3).

use rand::RngCore;
use ring::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, UnboundKey};

use super::LongType;
use super::version::VERSION_2;
use crate::types::ConnectionId;

pub const RETRY_TAG_LEN: usize = 16;
pub const RESET_TOKEN_LEN: usize = 16;

/// Fixed QUIC v1 Retry key and nonce (RFC 9001 §5.8).
const RETRY_KEY: [u8; 16] = [
    0xbe, 0x0c, 0x69, 0x0b, 0x9f, 0x66, 0x57, 0x5a, 0x1d, 0x76, 0x6b, 0x54, 0xe3, 0x68, 0xc8, 0x4e,
];
const RETRY_NONCE: [u8; 12] = [
    0x46, 0x15, 0x99, 0xd3, 0x5d, 0x63, 0x2b, 0xf2, 0x23, 0x98, 0x25, 0xbb,
];

/// QUIC v2's (RFC 9369 §3.3.3).
const RETRY_KEY_V2: [u8; 16] = [
    0x8f, 0xb4, 0xb0, 0x1b, 0x56, 0xac, 0x48, 0xe2, 0x60, 0xfb, 0xcb, 0xce, 0xad, 0x7c, 0xcc, 0x92,
];
const RETRY_NONCE_V2: [u8; 12] = [
    0xd8, 0x69, 0x69, 0xbc, 0x2d, 0x7c, 0x6d, 0x99, 0x90, 0xef, 0xb0, 0x4a,
];

/// The Retry key and nonce of `version`.
fn retry_key(version: u32) -> (LessSafeKey, Nonce) {
    let (key, nonce) = if version == VERSION_2 {
        (&RETRY_KEY_V2, RETRY_NONCE_V2)
    } else {
        (&RETRY_KEY, RETRY_NONCE)
    };
    let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, key).expect("valid AES-128 key"));
    (key, Nonce::assume_unique_for_key(nonce))
}

/// The version field of a Retry packet (bytes 1-4).
fn version_of(packet: &[u8]) -> u32 {
    packet
        .get(1..5)
        .map_or(0, |v| u32::from_be_bytes([v[0], v[1], v[2], v[3]]))
}

/// The Retry pseudo-packet: ODCID length and value prepended to the Retry minus its tag.
fn pseudo_packet(original_dcid: &ConnectionId, retry_without_tag: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(1 + original_dcid.len() + retry_without_tag.len());
    p.push(original_dcid.len() as u8);
    p.extend_from_slice(original_dcid);
    p.extend_from_slice(retry_without_tag);
    p
}

/// The Retry Integrity Tag for a Retry packet (everything but the tag).
pub fn retry_integrity_tag(
    original_dcid: &ConnectionId,
    retry_packet_without_tag: &[u8],
) -> [u8; 16] {
    let aad = pseudo_packet(original_dcid, retry_packet_without_tag);
    let (key, nonce) = retry_key(version_of(retry_packet_without_tag));
    let tag = key
        .seal_in_place_separate_tag(nonce, Aad::from(&aad[..]), &mut [])
        .expect("sealing an empty plaintext cannot fail");
    let mut out = [0u8; 16];
    out.copy_from_slice(tag.as_ref());
    out
}

/// Writes a complete Retry packet of `version`, tag included.
#[allow(clippy::too_many_arguments)] // mirrors the packet's fields one to one
pub fn write_retry(
    buf: &mut Vec<u8>,
    version: u32,
    original_dcid: &ConnectionId,
    dcid: &ConnectionId,
    scid: &ConnectionId,
    token: &[u8],
    random_first_byte: u8,
) {
    let start = buf.len();
    buf.push(0xc0 | (LongType::Retry.bits(version) << 4) | (random_first_byte & 0x0f));
    buf.extend_from_slice(&version.to_be_bytes());
    buf.push(dcid.len() as u8);
    buf.extend_from_slice(dcid);
    buf.push(scid.len() as u8);
    buf.extend_from_slice(scid);
    buf.extend_from_slice(token);
    let tag = retry_integrity_tag(original_dcid, &buf[start..]);
    buf.extend_from_slice(&tag);
}

/// Checks the integrity tag of a whole Retry packet (constant-time tag comparison).
pub fn verify_retry(original_dcid: &ConnectionId, packet: &[u8]) -> bool {
    let Some(body_len) = packet.len().checked_sub(RETRY_TAG_LEN) else {
        return false;
    };
    let (body, received) = packet.split_at(body_len);
    let aad = pseudo_packet(original_dcid, body);
    let mut tag = [0u8; RETRY_TAG_LEN];
    tag.copy_from_slice(received);
    let (key, nonce) = retry_key(version_of(packet));
    key.open_in_place(nonce, Aad::from(&aad[..]), &mut tag)
        .is_ok()
}

/// Writes a stateless reset of `len` bytes (at least 21): it looks like a short-header packet
/// of random content ending with `reset_token`.
pub fn write_stateless_reset<R: RngCore + ?Sized>(
    buf: &mut Vec<u8>,
    reset_token: &[u8; RESET_TOKEN_LEN],
    len: usize,
    rng: &mut R,
) {
    let len = len.max(21);
    let start = buf.len();
    buf.resize(start + len - RESET_TOKEN_LEN, 0);
    rng.fill_bytes(&mut buf[start..]);
    buf[start] = 0x40 | (buf[start] & 0x3f);
    buf.extend_from_slice(reset_token);
}

/// The candidate stateless reset token of a received datagram: its last 16 bytes, if the
/// datagram could be a stateless reset at all (short header form, at least 21 bytes).
pub fn stateless_reset_token(datagram: &[u8]) -> Option<&[u8; RESET_TOKEN_LEN]> {
    if datagram.len() < 21 || datagram[0] & 0x80 != 0 {
        return None;
    }
    datagram[datagram.len() - RESET_TOKEN_LEN..].try_into().ok()
}
