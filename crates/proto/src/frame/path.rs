//! PATH_CHALLENGE and PATH_RESPONSE (RFC 9000 §19.17-19.18).

use super::{Frame, FrameError, ty};
use crate::coding::Reader;

pub(super) fn decode<'a>(t: u64, r: &mut Reader<'a>) -> Result<Frame<'a>, FrameError> {
    let data = r.array().map_err(FrameError::truncated(t))?;
    Ok(if t == ty::PATH_CHALLENGE {
        Frame::PathChallenge(data)
    } else {
        Frame::PathResponse(data)
    })
}
