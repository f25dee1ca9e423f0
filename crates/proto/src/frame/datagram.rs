//! DATAGRAM frames (RFC 9221 §4).

use super::{Frame, FrameError, ty};
use crate::coding::{Reader, put_varint, varint_len};

/// Writes a DATAGRAM frame header; the caller appends `len` bytes. Without a length the frame
/// runs to the end of the packet.
pub fn encode_datagram_header(buf: &mut Vec<u8>, len: usize, with_length: bool) {
    if with_length {
        put_varint(buf, ty::DATAGRAM_LEN);
        put_varint(buf, len as u64);
    } else {
        put_varint(buf, ty::DATAGRAM);
    }
}

pub fn datagram_header_len(len: usize, with_length: bool) -> usize {
    if with_length {
        1 + varint_len(len as u64)
    } else {
        1
    }
}

pub(super) fn decode<'a>(t: u64, r: &mut Reader<'a>) -> Result<Frame<'a>, FrameError> {
    let data = if t == ty::DATAGRAM_LEN {
        r.varint_bytes().map_err(FrameError::truncated(t))?
    } else {
        r.rest()
    };
    Ok(Frame::Datagram { data })
}
