//! CRYPTO frames (RFC 9000 §19.6).

use super::{Frame, FrameError, ty};
use crate::coding::{Reader, VARINT_MAX, put_varint, varint_len};

/// Writes a CRYPTO frame header; the caller appends `len` bytes of handshake data.
pub fn encode_crypto_header(buf: &mut Vec<u8>, offset: u64, len: usize) {
    put_varint(buf, ty::CRYPTO);
    put_varint(buf, offset);
    put_varint(buf, len as u64);
}

pub fn crypto_header_len(offset: u64, len: usize) -> usize {
    1 + varint_len(offset) + varint_len(len as u64)
}

pub(super) fn decode<'a>(r: &mut Reader<'a>) -> Result<Frame<'a>, FrameError> {
    let tr = FrameError::truncated(ty::CRYPTO);
    let offset = r.varint().map_err(&tr)?;
    let data = r.varint_bytes().map_err(&tr)?;
    if offset + data.len() as u64 > VARINT_MAX {
        return Err(FrameError::encoding(
            ty::CRYPTO,
            "crypto offset beyond 2^62-1",
        ));
    }
    Ok(Frame::Crypto { offset, data })
}
