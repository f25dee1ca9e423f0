//! PADDING, PING and HANDSHAKE_DONE: frames with no body (RFC 9000 §19.1, 19.2, 19.20).

use super::Frame;
use crate::coding::Reader;

/// Collapses the run of PADDING bytes (the first already consumed) into one item, so that a
/// padded packet costs one iteration instead of one per byte.
pub(super) fn decode_padding<'a>(r: &mut Reader<'a>) -> Frame<'a> {
    let mut len = 1;
    while r.peek_u8() == Some(0) {
        let _ = r.u8();
        len += 1;
    }
    Frame::Padding { len }
}

/// Appends `len` PADDING bytes.
pub fn encode_padding(buf: &mut Vec<u8>, len: usize) {
    buf.resize(buf.len() + len, 0);
}
