//! RESET_STREAM and STOP_SENDING (RFC 9000 §19.4-19.5).

use super::{Frame, FrameError, ty};
use crate::coding::Reader;
use crate::types::StreamId;

pub(super) fn decode<'a>(t: u64, r: &mut Reader<'a>) -> Result<Frame<'a>, FrameError> {
    let tr = FrameError::truncated(t);
    let id = StreamId(r.varint().map_err(&tr)?);
    let error_code = r.varint().map_err(&tr)?;
    if t == ty::STOP_SENDING {
        return Ok(Frame::StopSending { id, error_code });
    }
    let final_size = r.varint().map_err(&tr)?;
    Ok(Frame::ResetStream {
        id,
        error_code,
        final_size,
    })
}
