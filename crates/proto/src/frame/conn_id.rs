//! NEW_CONNECTION_ID and RETIRE_CONNECTION_ID (RFC 9000 §19.15-19.16).

use super::{Frame, FrameError, ty};
use crate::coding::Reader;
use crate::types::{ConnectionId, MAX_CID_SIZE};

pub(super) fn decode<'a>(t: u64, r: &mut Reader<'a>) -> Result<Frame<'a>, FrameError> {
    let tr = FrameError::truncated(t);
    let seq = r.varint().map_err(&tr)?;
    if t == ty::RETIRE_CONNECTION_ID {
        return Ok(Frame::RetireConnectionId { seq });
    }
    let retire_prior_to = r.varint().map_err(&tr)?;
    let len = usize::from(r.u8().map_err(&tr)?);
    if len == 0 || len > MAX_CID_SIZE {
        return Err(FrameError::encoding(
            t,
            "connection ID length not in 1..=20",
        ));
    }
    let cid = ConnectionId::new(r.bytes(len).map_err(&tr)?);
    let reset_token = r.array().map_err(&tr)?;
    if retire_prior_to > seq {
        return Err(FrameError::encoding(
            t,
            "retire_prior_to above sequence number",
        ));
    }
    Ok(Frame::NewConnectionId {
        seq,
        retire_prior_to,
        cid,
        reset_token,
    })
}
