//! Serialisation of [`Frame`]: the inverse of the decoder, used for control frames and tests.
//! Hot paths (STREAM, CRYPTO, ACK) use the header writers of their modules instead.

use super::{Frame, ty};
use crate::coding::{put_varint, varint_len};

/// Varint fields of the fixed-layout frames, in wire order, and an optional raw tail.
fn fields<'f>(f: &'f Frame<'_>) -> ([u64; 4], usize, &'f [u8]) {
    let mut v = [0u64; 4];
    let (n, tail): (usize, &[u8]) = match f {
        Frame::ResetStream {
            id,
            error_code,
            final_size,
        } => {
            v = [id.0, *error_code, *final_size, 0];
            (3, &[])
        }
        Frame::StopSending { id, error_code } => {
            v = [id.0, *error_code, 0, 0];
            (2, &[])
        }
        Frame::MaxData(a)
        | Frame::DataBlocked { limit: a }
        | Frame::RetireConnectionId { seq: a } => {
            v[0] = *a;
            (1, &[])
        }
        Frame::MaxStreams { count: a, .. } | Frame::StreamsBlocked { limit: a, .. } => {
            v[0] = *a;
            (1, &[])
        }
        Frame::MaxStreamData { id, max: b } | Frame::StreamDataBlocked { id, limit: b } => {
            v = [id.0, *b, 0, 0];
            (2, &[])
        }
        Frame::PathChallenge(d) | Frame::PathResponse(d) => (0, d),
        Frame::AckFrequency {
            seq,
            ack_eliciting_threshold,
            request_max_ack_delay,
            reordering_threshold,
        } => {
            v = [
                *seq,
                *ack_eliciting_threshold,
                *request_max_ack_delay,
                *reordering_threshold,
            ];
            (4, &[])
        }
        Frame::Extension { body, .. } => (0, body),
        _ => (0, &[]),
    };
    (v, n, tail)
}

impl Frame<'_> {
    pub fn encode(&self, buf: &mut Vec<u8>) {
        if super::multipath::encode(self, buf).is_some() {
            return;
        }
        match self {
            Frame::Padding { len } => buf.resize(buf.len() + len, 0),
            Frame::Ack(a) => a.encode(buf),
            Frame::Stream(s) => s.encode(buf),
            Frame::ConnectionClose(c) => c.encode(buf),
            Frame::Crypto { offset, data } => {
                super::encode_crypto_header(buf, *offset, data.len());
                buf.extend_from_slice(data);
            }
            Frame::NewToken { token } => {
                put_varint(buf, ty::NEW_TOKEN);
                put_varint(buf, token.len() as u64);
                buf.extend_from_slice(token);
            }
            Frame::Datagram { data } => {
                super::encode_datagram_header(buf, data.len(), true);
                buf.extend_from_slice(data);
            }
            Frame::NewConnectionId {
                seq,
                retire_prior_to,
                cid,
                reset_token,
            } => {
                put_varint(buf, ty::NEW_CONNECTION_ID);
                super::conn_id::encode_new_cid_body(buf, *seq, *retire_prior_to, cid, reset_token);
            }
            _ => {
                put_varint(buf, self.ty());
                let (v, n, tail) = fields(self);
                for &x in &v[..n] {
                    put_varint(buf, x);
                }
                buf.extend_from_slice(tail);
            }
        }
    }

    /// Exact number of bytes [`Frame::encode`] writes.
    pub fn encoded_len(&self) -> usize {
        if let Some(n) = super::multipath::encoded_len(self) {
            return n;
        }
        match self {
            Frame::Padding { len } => *len,
            Frame::Ack(a) => a.encoded_len(),
            Frame::Stream(s) => s.encoded_len(),
            Frame::ConnectionClose(c) => c.encoded_len(),
            Frame::Crypto { offset, data } => {
                super::crypto_header_len(*offset, data.len()) + data.len()
            }
            Frame::NewToken { token } => 1 + varint_len(token.len() as u64) + token.len(),
            Frame::Datagram { data } => super::datagram_header_len(data.len(), true) + data.len(),
            Frame::NewConnectionId {
                seq,
                retire_prior_to,
                cid,
                ..
            } => 1 + varint_len(*seq) + varint_len(*retire_prior_to) + 1 + cid.len() + 16,
            _ => {
                let (v, n, tail) = fields(self);
                varint_len(self.ty())
                    + v[..n].iter().map(|&x| varint_len(x)).sum::<usize>()
                    + tail.len()
            }
        }
    }
}
