//! HTTP Datagrams over HTTP/3 (RFC 9297 §2.1): a QUIC DATAGRAM carries the Quarter Stream ID
//! of the request it belongs to (its stream ID over four), then the payload. Written here
//! rather than taken from `h3-datagram` 0.0.2, whose `Datagram::encode` sends every datagram
//! with Quarter Stream ID 0 whatever its stream (hyperium/h3#345, fixed upstream after that
//! release); the session only needs the framing.

use bytes::{BufMut, Bytes, BytesMut};

/// The largest Quarter Stream ID (RFC 9297 §2.1: stream IDs are below 2^62).
const MAX_QUARTER_STREAM_ID: u64 = (1 << 60) - 1;

/// Why a received datagram is not an HTTP Datagram (an H3_DATAGRAM_ERROR, 0x33).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DatagramError {
    #[error("HTTP datagram without a complete Quarter Stream ID")]
    Truncated,
    #[error("HTTP datagram for stream {0}, not a client-initiated bidirectional stream")]
    NotARequestStream(u64),
}

/// HTTP/3's H3_DATAGRAM_ERROR, to close a connection that sent a malformed datagram.
pub const H3_DATAGRAM_ERROR: u64 = 0x33;

/// The QUIC DATAGRAM payload for `payload` on request stream `stream_id` (a client-initiated
/// bidirectional stream: a multiple of four).
pub fn encode(stream_id: u64, payload: &[u8]) -> Bytes {
    assert!(
        stream_id.is_multiple_of(4),
        "HTTP datagrams belong to client-initiated bidirectional streams"
    );
    let q = stream_id / 4;
    let mut b = BytesMut::with_capacity(8 + payload.len());
    match q {
        0..=0x3f => b.put_u8(q as u8),
        0x40..=0x3fff => b.put_u16(0x4000 | q as u16),
        0x4000..=0x3fff_ffff => b.put_u32(0x8000_0000 | q as u32),
        _ => b.put_u64(0xc000_0000_0000_0000 | q),
    }
    b.extend_from_slice(payload);
    b.freeze()
}

/// The request stream and payload of a received QUIC DATAGRAM payload.
pub fn decode(datagram: &Bytes) -> Result<(u64, Bytes), DatagramError> {
    let first = *datagram.first().ok_or(DatagramError::Truncated)?;
    let len = 1usize << (first >> 6);
    if datagram.len() < len {
        return Err(DatagramError::Truncated);
    }
    let mut q = u64::from(first & 0x3f);
    for &x in &datagram[1..len] {
        q = (q << 8) | u64::from(x);
    }
    if q > MAX_QUARTER_STREAM_ID {
        return Err(DatagramError::NotARequestStream(q.saturating_mul(4)));
    }
    Ok((q * 4, datagram.slice(len..)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quarter_stream_ids_round_trip_at_every_varint_width() {
        for q in [
            0u64,
            1,
            63,
            64,
            16_383,
            16_384,
            (1 << 30) - 1,
            1 << 30,
            MAX_QUARTER_STREAM_ID,
        ] {
            let d = encode(q * 4, b"payload");
            assert_eq!(
                decode(&d),
                Ok((q * 4, Bytes::from_static(b"payload"))),
                "{q}"
            );
        }
        // RFC 9000's example varints: 37 in one byte, 15,293 in two.
        assert_eq!(&encode(37 * 4, b"")[..], [0x25]);
        assert_eq!(&encode(15_293 * 4, b"x")[..], [0x7b, 0xbd, b'x']);
        assert_eq!(decode(&Bytes::new()), Err(DatagramError::Truncated));
        assert_eq!(
            decode(&Bytes::from_static(&[0x40])),
            Err(DatagramError::Truncated)
        );
    }
}
