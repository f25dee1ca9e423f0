//! The frames of multipath QUIC (draft-ietf-quic-multipath-21 §4): PATH_ACK, PATH_ABANDON,
//! PATH_STATUS_BACKUP / PATH_STATUS_AVAILABLE, PATH_NEW_CONNECTION_ID,
//! PATH_RETIRE_CONNECTION_ID, MAX_PATH_ID, PATHS_BLOCKED and PATH_CIDS_BLOCKED.

use super::{Frame, FrameError, ack, conn_id, ty};
use crate::coding::{Reader, put_varint, varint_len};

/// The largest path ID: the nonce holds 32 bits of it (draft §2.4).
pub const MAX_PATH_ID: u64 = u32::MAX as u64;

pub(super) fn decode<'a>(t: u64, r: &mut Reader<'a>) -> Result<Frame<'a>, FrameError> {
    let tr = FrameError::truncated(t);
    // Every multipath frame but MAX_PATH_ID and PATHS_BLOCKED starts with a path ID; those
    // two carry a maximum path ID. Neither may exceed 2^32 - 1.
    let first = r.varint().map_err(&tr)?;
    if first > MAX_PATH_ID {
        return Err(FrameError::protocol(t, "path ID above 2^32 - 1"));
    }
    Ok(match t {
        ty::PATH_ACK | ty::PATH_ACK_ECN => {
            let ack_ty = if t == ty::PATH_ACK {
                ty::ACK
            } else {
                ty::ACK_ECN
            };
            let ack = ack::decode_as(ack_ty, t, r)?;
            Frame::PathAck {
                path_id: first,
                ack,
            }
        }
        ty::PATH_ABANDON => Frame::PathAbandon {
            path_id: first,
            error_code: r.varint().map_err(&tr)?,
        },
        ty::PATH_STATUS_BACKUP | ty::PATH_STATUS_AVAILABLE => Frame::PathStatus {
            path_id: first,
            seq: r.varint().map_err(&tr)?,
            available: t == ty::PATH_STATUS_AVAILABLE,
        },
        ty::PATH_NEW_CONNECTION_ID => {
            let (seq, retire_prior_to, cid, reset_token) = conn_id::decode_new_cid_body(t, r)?;
            Frame::PathNewConnectionId {
                path_id: first,
                seq,
                retire_prior_to,
                cid,
                reset_token,
            }
        }
        ty::PATH_RETIRE_CONNECTION_ID => Frame::PathRetireConnectionId {
            path_id: first,
            seq: r.varint().map_err(&tr)?,
        },
        ty::MAX_PATH_ID => Frame::MaxPathId(first),
        ty::PATHS_BLOCKED => Frame::PathsBlocked(first),
        ty::PATH_CIDS_BLOCKED => Frame::PathCidsBlocked {
            path_id: first,
            next_seq: r.varint().map_err(&tr)?,
        },
        _ => unreachable!("dispatched on multipath types only"),
    })
}

/// Writes a PATH_ACK of path `path_id` for the packets in `ranges` (its `max_ranges` highest
/// ranges), like [`super::encode_ack`] writes an ACK.
pub fn encode_path_ack(
    buf: &mut Vec<u8>,
    path_id: u32,
    ranges: &crate::range_set::RangeSet,
    delay: u64,
    ecn: Option<&super::EcnCounts>,
    max_ranges: usize,
) {
    let Some(top) = ranges.last_range() else {
        return;
    };
    let t = if ecn.is_some() {
        ty::PATH_ACK_ECN
    } else {
        ty::PATH_ACK
    };
    put_varint(buf, t);
    put_varint(buf, u64::from(path_id));
    put_varint(buf, top.end - 1);
    put_varint(buf, delay);
    ack::encode_ack_range_block(buf, ranges, max_ranges);
    if let Some(e) = ecn {
        ack::put_ecn(buf, e);
    }
}

/// Exact size of what [`encode_path_ack`] writes with the same arguments.
pub fn path_ack_encoded_len(
    path_id: u32,
    ranges: &crate::range_set::RangeSet,
    delay: u64,
    ecn: Option<&super::EcnCounts>,
    max_ranges: usize,
) -> usize {
    match ranges.last_range() {
        None => 0,
        Some(_) => {
            super::ack_encoded_len(ranges, delay, ecn, max_ranges) + varint_len(u64::from(path_id))
        }
    }
}

/// Writes a multipath frame; `None` for other frames.
pub(super) fn encode(f: &Frame<'_>, buf: &mut Vec<u8>) -> Option<()> {
    match f {
        Frame::PathAck { path_id, ack } => {
            put_varint(buf, f.ty());
            put_varint(buf, *path_id);
            ack.encode_body(buf);
        }
        Frame::PathNewConnectionId {
            path_id,
            seq,
            retire_prior_to,
            cid,
            reset_token,
        } => {
            put_varint(buf, ty::PATH_NEW_CONNECTION_ID);
            put_varint(buf, *path_id);
            conn_id::encode_new_cid_body(buf, *seq, *retire_prior_to, cid, reset_token);
        }
        _ => {
            let (v, n) = fields(f)?;
            put_varint(buf, f.ty());
            for &x in &v[..n] {
                put_varint(buf, x);
            }
        }
    }
    Some(())
}

/// Exact length of what [`encode`] writes; `None` for other frames.
pub(super) fn encoded_len(f: &Frame<'_>) -> Option<usize> {
    Some(match f {
        Frame::PathAck { path_id, ack } => {
            varint_len(f.ty()) + varint_len(*path_id) + ack.body_len()
        }
        Frame::PathNewConnectionId {
            path_id,
            seq,
            retire_prior_to,
            cid,
            ..
        } => {
            varint_len(ty::PATH_NEW_CONNECTION_ID)
                + varint_len(*path_id)
                + varint_len(*seq)
                + varint_len(*retire_prior_to)
                + 1
                + cid.len()
                + 16
        }
        _ => {
            let (v, n) = fields(f)?;
            varint_len(f.ty()) + v[..n].iter().map(|&x| varint_len(x)).sum::<usize>()
        }
    })
}

/// The varint fields of the fixed-layout multipath frames, in wire order.
fn fields(f: &Frame<'_>) -> Option<([u64; 2], usize)> {
    Some(match *f {
        Frame::PathAbandon {
            path_id,
            error_code,
        } => ([path_id, error_code], 2),
        Frame::PathStatus { path_id, seq, .. } => ([path_id, seq], 2),
        Frame::PathRetireConnectionId { path_id, seq } => ([path_id, seq], 2),
        Frame::MaxPathId(max) | Frame::PathsBlocked(max) => ([max, 0], 1),
        Frame::PathCidsBlocked { path_id, next_seq } => ([path_id, next_seq], 2),
        _ => return None,
    })
}
