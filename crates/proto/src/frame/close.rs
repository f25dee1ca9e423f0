//! CONNECTION_CLOSE (RFC 9000 §19.19).

use super::{FrameError, ty};
use crate::coding::{Reader, put_varint, varint_len};

/// Transport (0x1c) or application (0x1d) close.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionClose<'a> {
    pub is_application: bool,
    pub error_code: u64,
    /// Frame type that caused the error; 0 when unknown, and always 0 for application closes.
    pub frame_type: u64,
    /// Peer-supplied UTF-8 (not validated: it is diagnostic only).
    pub reason: &'a [u8],
}

impl ConnectionClose<'_> {
    pub(super) fn ty(&self) -> u64 {
        if self.is_application {
            ty::CONNECTION_CLOSE_APP
        } else {
            ty::CONNECTION_CLOSE
        }
    }

    pub(super) fn encoded_len(&self) -> usize {
        1 + varint_len(self.error_code)
            + if self.is_application {
                0
            } else {
                varint_len(self.frame_type)
            }
            + varint_len(self.reason.len() as u64)
            + self.reason.len()
    }

    pub(super) fn encode(&self, buf: &mut Vec<u8>) {
        put_varint(buf, self.ty());
        put_varint(buf, self.error_code);
        if !self.is_application {
            put_varint(buf, self.frame_type);
        }
        put_varint(buf, self.reason.len() as u64);
        buf.extend_from_slice(self.reason);
    }
}

pub(super) fn decode<'a>(t: u64, r: &mut Reader<'a>) -> Result<ConnectionClose<'a>, FrameError> {
    let tr = FrameError::truncated(t);
    let error_code = r.varint().map_err(&tr)?;
    let is_application = t == ty::CONNECTION_CLOSE_APP;
    let frame_type = if is_application {
        0
    } else {
        r.varint().map_err(&tr)?
    };
    let reason = r.varint_bytes().map_err(&tr)?;
    Ok(ConnectionClose {
        is_application,
        error_code,
        frame_type,
        reason,
    })
}
