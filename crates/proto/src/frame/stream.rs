//! STREAM frames (RFC 9000 §19.8).

use super::{FrameError, ty};
use crate::coding::{Reader, VARINT_MAX, put_varint, varint_len};
use crate::types::StreamId;

/// Data of one stream at `offset`; `data` borrows the packet payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamFrame<'a> {
    pub id: StreamId,
    pub offset: u64,
    pub fin: bool,
    pub data: &'a [u8],
}

impl StreamFrame<'_> {
    /// Type as written by `Frame::encode` (always with a Length field).
    pub(super) fn ty(&self) -> u64 {
        stream_type(self.offset, self.fin, true)
    }

    pub(super) fn encoded_len(&self) -> usize {
        stream_header_len(self.id, self.offset, self.data.len(), true) + self.data.len()
    }

    pub(super) fn encode(&self, buf: &mut Vec<u8>) {
        encode_stream_header(buf, self.id, self.offset, self.data.len(), self.fin, true);
        buf.extend_from_slice(self.data);
    }
}

fn stream_type(offset: u64, fin: bool, with_length: bool) -> u64 {
    let mut t = ty::STREAM;
    if offset != 0 {
        t |= ty::STREAM_OFF_BIT;
    }
    if with_length {
        t |= ty::STREAM_LEN_BIT;
    }
    if fin {
        t |= ty::STREAM_FIN_BIT;
    }
    t
}

/// Writes a STREAM frame header; the caller appends `len` bytes of data. Without a length the
/// frame runs to the end of the packet, so it must be the last one.
pub fn encode_stream_header(
    buf: &mut Vec<u8>,
    id: StreamId,
    offset: u64,
    len: usize,
    fin: bool,
    with_length: bool,
) {
    put_varint(buf, stream_type(offset, fin, with_length));
    put_varint(buf, id.0);
    if offset != 0 {
        put_varint(buf, offset);
    }
    if with_length {
        put_varint(buf, len as u64);
    }
}

/// Size of the header [`encode_stream_header`] writes.
pub fn stream_header_len(id: StreamId, offset: u64, len: usize, with_length: bool) -> usize {
    1 + varint_len(id.0)
        + if offset != 0 { varint_len(offset) } else { 0 }
        + if with_length {
            varint_len(len as u64)
        } else {
            0
        }
}

pub(super) fn decode<'a>(t: u64, r: &mut Reader<'a>) -> Result<StreamFrame<'a>, FrameError> {
    let tr = FrameError::truncated(t);
    let id = StreamId(r.varint().map_err(&tr)?);
    let offset = if t & ty::STREAM_OFF_BIT != 0 {
        r.varint().map_err(&tr)?
    } else {
        0
    };
    let data = if t & ty::STREAM_LEN_BIT != 0 {
        r.varint_bytes().map_err(&tr)?
    } else {
        r.rest()
    };
    if offset + data.len() as u64 > VARINT_MAX {
        return Err(FrameError::encoding(t, "stream offset beyond 2^62-1"));
    }
    Ok(StreamFrame {
        id,
        offset,
        fin: t & ty::STREAM_FIN_BIT != 0,
        data,
    })
}
