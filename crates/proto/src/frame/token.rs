//! NEW_TOKEN (RFC 9000 §19.7).

use super::{Frame, FrameError, ty};
use crate::coding::Reader;

pub(super) fn decode<'a>(r: &mut Reader<'a>) -> Result<Frame<'a>, FrameError> {
    let token = r
        .varint_bytes()
        .map_err(FrameError::truncated(ty::NEW_TOKEN))?;
    if token.is_empty() {
        return Err(FrameError::encoding(ty::NEW_TOKEN, "empty token"));
    }
    Ok(Frame::NewToken { token })
}
