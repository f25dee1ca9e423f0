//! Packet number encoding and recovery (RFC 9000 §17.1, Appendix A.2-A.3).

use crate::coding::VARINT_MAX;

/// Bytes needed to send `pn` so that the receiver, which has seen up to `largest_acked`, can
/// recover it: the truncated space must cover twice the unacknowledged range.
pub fn pn_len_for(pn: u64, largest_acked: Option<u64>) -> usize {
    let unacked = match largest_acked {
        Some(l) => pn.saturating_sub(l),
        None => pn.saturating_add(1),
    };
    (1..4)
        .find(|&n| unacked <= 1u64 << (8 * n - 1))
        .unwrap_or(4)
}

/// Recovers a full packet number from its `pn_len`-byte truncation (RFC 9000 Appendix A.3).
pub fn decode_pn(truncated: u64, pn_len: usize, largest_pn: Option<u64>) -> u64 {
    let bits = 8 * pn_len.clamp(1, 4) as u32;
    let win = 1u64 << bits;
    let hwin = win / 2;
    let mask = win - 1;
    let expected = largest_pn.map_or(0, |l| l + 1);
    let candidate = (expected & !mask) | (truncated & mask);
    if expected.checked_sub(hwin).is_some_and(|lo| candidate <= lo)
        && candidate < (VARINT_MAX + 1) - win
    {
        candidate + win
    } else if candidate > expected + hwin && candidate >= win {
        candidate - win
    } else {
        candidate
    }
}

/// Appends the low `pn_len` bytes of `pn`, big-endian.
pub fn write_pn(buf: &mut Vec<u8>, pn: u64, pn_len: usize) {
    debug_assert!((1..=4).contains(&pn_len));
    buf.extend_from_slice(&pn.to_be_bytes()[8 - pn_len..]);
}

/// Reads a `pn_len`-byte truncated packet number from the start of `buf` (after unmasking).
pub fn read_pn(buf: &[u8], pn_len: usize) -> Option<u64> {
    let bytes = buf.get(..pn_len.clamp(1, 4))?;
    Some(bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
}
