//! ACK_FREQUENCY (0xaf) of draft-ietf-quic-ack-frequency; IMMEDIATE_ACK has no body.
//!
//! Semantic checks (Requested Max Ack Delay below min_ack_delay or >= 2^14 ms is
//! PROTOCOL_VIOLATION) need connection state and are left to the connection.

use super::{Frame, FrameError, ty};
use crate::coding::Reader;

pub(super) fn decode<'a>(r: &mut Reader<'a>) -> Result<Frame<'a>, FrameError> {
    let tr = FrameError::truncated(ty::ACK_FREQUENCY);
    Ok(Frame::AckFrequency {
        seq: r.varint().map_err(&tr)?,
        ack_eliciting_threshold: r.varint().map_err(&tr)?,
        request_max_ack_delay: r.varint().map_err(&tr)?,
        reordering_threshold: r.varint().map_err(&tr)?,
    })
}
