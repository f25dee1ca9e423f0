//! NEW_CONNECTION_ID and RETIRE_CONNECTION_ID (RFC 9000 §19.15-19.16).

use super::{Frame, FrameError, ty};
use crate::coding::{Reader, put_varint};
use crate::types::{ConnectionId, MAX_CID_SIZE};

/// The body NEW_CONNECTION_ID and PATH_NEW_CONNECTION_ID share: sequence number,
/// retire_prior_to, connection ID and stateless reset token.
pub(super) type NewCidBody = (u64, u64, ConnectionId, [u8; 16]);

/// Reads that body of a frame of type `t`.
pub(super) fn decode_new_cid_body(t: u64, r: &mut Reader<'_>) -> Result<NewCidBody, FrameError> {
    let tr = FrameError::truncated(t);
    let seq = r.varint().map_err(&tr)?;
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
    Ok((seq, retire_prior_to, cid, reset_token))
}

/// Writes that body.
pub(super) fn encode_new_cid_body(
    buf: &mut Vec<u8>,
    seq: u64,
    retire_prior_to: u64,
    cid: &ConnectionId,
    reset_token: &[u8; 16],
) {
    put_varint(buf, seq);
    put_varint(buf, retire_prior_to);
    buf.push(cid.len() as u8);
    buf.extend_from_slice(cid);
    buf.extend_from_slice(reset_token);
}

pub(super) fn decode<'a>(t: u64, r: &mut Reader<'a>) -> Result<Frame<'a>, FrameError> {
    if t == ty::RETIRE_CONNECTION_ID {
        let seq = r.varint().map_err(&FrameError::truncated(t))?;
        return Ok(Frame::RetireConnectionId { seq });
    }
    let (seq, retire_prior_to, cid, reset_token) = decode_new_cid_body(t, r)?;
    Ok(Frame::NewConnectionId {
        seq,
        retire_prior_to,
        cid,
        reset_token,
    })
}
