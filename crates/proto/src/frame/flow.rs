//! Flow-control frames: MAX_DATA, MAX_STREAM_DATA, MAX_STREAMS and the *_BLOCKED family
//! (RFC 9000 §19.9-19.14).

use super::{Frame, FrameError, MAX_STREAM_COUNT, ty};
use crate::coding::Reader;
use crate::types::{Dir, StreamId};

pub(super) fn decode<'a>(t: u64, r: &mut Reader<'a>) -> Result<Frame<'a>, FrameError> {
    let tr = FrameError::truncated(t);
    let a = r.varint().map_err(&tr)?;
    let dir = |bidi| if t == bidi { Dir::Bi } else { Dir::Uni };
    let count = |c: u64| {
        if c > MAX_STREAM_COUNT {
            Err(FrameError::encoding(t, "stream count above 2^60"))
        } else {
            Ok(c)
        }
    };
    Ok(match t {
        ty::MAX_DATA => Frame::MaxData(a),
        ty::MAX_STREAM_DATA => Frame::MaxStreamData {
            id: StreamId(a),
            max: r.varint().map_err(&tr)?,
        },
        ty::MAX_STREAMS_BIDI | ty::MAX_STREAMS_UNI => Frame::MaxStreams {
            dir: dir(ty::MAX_STREAMS_BIDI),
            count: count(a)?,
        },
        ty::DATA_BLOCKED => Frame::DataBlocked { limit: a },
        ty::STREAM_DATA_BLOCKED => Frame::StreamDataBlocked {
            id: StreamId(a),
            limit: r.varint().map_err(&tr)?,
        },
        _ => Frame::StreamsBlocked {
            dir: dir(ty::STREAMS_BLOCKED_BIDI),
            limit: count(a)?,
        },
    })
}
