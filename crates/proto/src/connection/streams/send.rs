//! The sending half of a stream: buffered data kept until acknowledged, lost ranges queued
//! for retransmission, FIN and RESET_STREAM state (RFC 9000 §3.1).

use bytes::Bytes;

use super::send_buffer::SendBuffer;
use crate::range_set::RangeSet;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendState {
    /// Accepting writes (Ready/Send in RFC 9000 terms).
    Open,
    /// The application finished; data may still be in flight (Data Sent).
    Finished,
    /// Every byte and the FIN were acknowledged (Data Recvd).
    AllAcked,
    /// We reset the stream (Reset Sent); `acked` once the peer acknowledged RESET_STREAM.
    Reset { code: u64, acked: bool },
}

#[derive(Debug)]
pub struct SendStream {
    /// Unacknowledged bytes.
    buf: SendBuffer,
    /// Offset of the first byte never sent.
    pub next_offset: u64,
    /// Ranges sent, declared lost, and waiting to be sent again.
    retransmit: RangeSet,
    /// Ranges acknowledged above `buf_offset`.
    acked: RangeSet,
    pub state: SendState,
    fin_sent: bool,
    fin_pending_retransmit: bool,
    fin_acked: bool,
    /// The peer's MAX_STREAM_DATA.
    pub max_data: u64,
    /// The limit at which we last sent STREAM_DATA_BLOCKED, to send it once per limit.
    pub blocked_at: Option<u64>,
    /// The peer asked us to stop (STOP_SENDING) with this code.
    pub stop_requested: Option<u64>,
    /// Whether the stream is in the connection's send queue.
    pub queued: bool,
    /// A write found the buffer full: report `Writable` when acks free room.
    pub write_blocked: bool,
}

impl SendStream {
    pub fn new(max_data: u64) -> Self {
        SendStream {
            buf: SendBuffer::default(),
            next_offset: 0,
            retransmit: RangeSet::new(),
            acked: RangeSet::new(),
            state: SendState::Open,
            fin_sent: false,
            fin_pending_retransmit: false,
            fin_acked: false,
            max_data,
            blocked_at: None,
            stop_requested: None,
            queued: false,
            write_blocked: false,
        }
    }

    pub fn diagnostics(&self) -> String {
        format!(
            "{:?} buf {}..{} next {} retransmit {:?} fin sent/lost/acked {}/{}/{} queued {} max {}",
            self.state,
            self.buf.start(),
            self.write_offset(),
            self.next_offset,
            self.retransmit.iter().collect::<Vec<_>>(),
            self.fin_sent,
            self.fin_pending_retransmit,
            self.fin_acked,
            self.queued,
            self.max_data
        )
    }

    /// Total bytes the application wrote.
    pub fn write_offset(&self) -> u64 {
        self.buf.end()
    }

    pub fn buffered(&self) -> u64 {
        self.buf.len()
    }

    pub fn write(&mut self, data: Bytes) {
        self.buf.push(data);
    }

    pub fn finish(&mut self) {
        if self.state == SendState::Open {
            self.state = SendState::Finished;
        }
    }

    pub fn is_reset(&self) -> bool {
        matches!(self.state, SendState::Reset { .. })
    }

    /// Drops buffered data and enters Reset Sent; returns the final size (bytes ever sent).
    pub fn reset(&mut self, code: u64) -> u64 {
        let final_size = self.next_offset;
        self.buf.clear_at(final_size);
        self.retransmit = RangeSet::new();
        self.acked = RangeSet::new();
        self.fin_pending_retransmit = false;
        self.state = SendState::Reset { code, acked: false };
        final_size
    }

    /// Something to send: lost data, new data within the peer's limit, or a FIN.
    pub fn has_pending(&self) -> bool {
        if self.is_reset() {
            return false;
        }
        !self.retransmit.is_empty()
            || self.fin_pending_retransmit
            || (self.next_offset < self.write_offset() && self.next_offset < self.max_data)
            || (self.state == SendState::Finished
                && !self.fin_sent
                && self.next_offset == self.write_offset())
    }

    /// Whether `next_chunk` would produce something given `conn_credit` bytes of
    /// connection-level credit for new data.
    pub fn sendable(&self, conn_credit: u64) -> bool {
        if self.is_reset() {
            return false;
        }
        !self.retransmit.is_empty()
            || self.fin_pending_retransmit
            || (conn_credit > 0
                && self.next_offset < self.write_offset()
                && self.next_offset < self.max_data)
            || (self.state == SendState::Finished
                && !self.fin_sent
                && self.next_offset == self.write_offset())
    }

    /// Bytes waiting to be sent: queued retransmissions, and new data up to the stream's
    /// flow-control limit and `conn_credit`.
    pub fn unsent_bytes(&self, conn_credit: u64) -> u64 {
        if self.is_reset() {
            return 0;
        }
        let again: u64 = self.retransmit.iter().map(|r| r.end - r.start).sum();
        let new = self
            .write_offset()
            .min(self.max_data)
            .saturating_sub(self.next_offset)
            .min(conn_credit);
        again + new
    }

    /// New data blocked only by the stream's flow-control limit.
    pub fn is_blocked(&self) -> bool {
        self.next_offset < self.write_offset() && self.next_offset >= self.max_data
    }

    /// Picks the next range to send: retransmissions first, then new data up to `max_len`
    /// and `conn_credit` bytes of connection credit. Returns (offset, len, fin, is_new).
    pub fn next_chunk(&mut self, max_len: usize, conn_credit: u64) -> Option<(u64, usize, bool)> {
        if self.is_reset() {
            return None;
        }
        if let Some(r) = self.retransmit.first_range() {
            let len = ((r.end - r.start) as usize).min(max_len);
            if len == 0 && max_len == 0 {
                return None;
            }
            self.retransmit.remove(r.start..r.start + len as u64);
            let end = r.start + len as u64;
            let fin = self.fin_sent && end == self.write_offset() && self.state != SendState::Open;
            if fin {
                self.fin_pending_retransmit = false;
            }
            return Some((r.start, len, fin));
        }
        let limit = self.write_offset().min(self.max_data);
        let available = limit.saturating_sub(self.next_offset).min(conn_credit);
        let len = (available as usize).min(max_len);
        let end = self.next_offset + len as u64;
        let fin = self.state == SendState::Finished && end == self.write_offset();
        if len == 0 && !(fin && (!self.fin_sent || self.fin_pending_retransmit)) {
            return None;
        }
        let offset = self.next_offset;
        self.next_offset = end;
        if fin {
            self.fin_sent = true;
            self.fin_pending_retransmit = false;
        }
        Some((offset, len, fin))
    }

    /// Copies `len` bytes at stream offset `offset` into `out`.
    pub fn copy_range(&self, offset: u64, len: usize, out: &mut Vec<u8>) {
        self.buf.copy_range(offset, len, out);
    }

    /// Bytes at `offset..offset+len` were acknowledged. Returns true once everything
    /// (data and FIN) is acknowledged.
    pub fn on_ack(&mut self, offset: u64, len: usize, fin: bool) -> bool {
        if self.is_reset() {
            return false;
        }
        let end = offset + len as u64;
        if end > self.buf.start() {
            self.acked.insert(offset.max(self.buf.start())..end);
        }
        // Data queued again after a (spurious) loss needs no resending once acknowledged;
        // its bytes may be freed below.
        self.retransmit.remove(offset..end);
        // Free the acknowledged prefix.
        while let Some(r) = self.acked.first_range() {
            if r.start > self.buf.start() {
                break;
            }
            self.buf.free_to(r.end);
            self.acked.pop_min();
        }
        if fin {
            self.fin_pending_retransmit = false;
            self.fin_acked = true;
        }
        if self.state == SendState::Finished && self.fin_acked && self.buf.is_empty() {
            self.state = SendState::AllAcked;
            return true;
        }
        false
    }

    /// Whether the peer acknowledged all of `offset..offset+len` (and the end, with `fin`);
    /// a reset stream's data counts as delivered: nothing of it is sent again.
    pub fn is_acked(&self, offset: u64, len: usize, fin: bool) -> bool {
        if self.is_reset() {
            return true;
        }
        let (start, end) = (offset.max(self.buf.start()), offset + len as u64);
        let data = start >= end || self.acked.iter().any(|r| r.start <= start && end <= r.end);
        data && (!fin || self.fin_acked)
    }

    /// Bytes at `offset..offset+len` were lost: queue what is still unacknowledged.
    pub fn on_lost(&mut self, offset: u64, len: usize, fin: bool) {
        if self.is_reset() {
            return;
        }
        let end = offset + len as u64;
        let start = offset.max(self.buf.start());
        if start < end {
            let mut lost = RangeSet::new();
            lost.insert(start..end);
            lost.subtract(&self.acked);
            for r in lost.iter() {
                self.retransmit.insert(r);
            }
        }
        if fin && !self.fin_acked {
            self.fin_pending_retransmit = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a range declared lost, then acknowledged (a spurious loss) and freed, was
    /// still queued for retransmission and `copy_range` underflowed (found by the lab at
    /// 7.5 % loss on the satellite preset).
    #[test]
    fn acked_data_leaves_the_retransmission_queue() {
        let mut s = SendStream::new(1 << 20);
        s.write(Bytes::from_static(&[1u8; 3000]));
        let (o1, l1, _) = s.next_chunk(1000, u64::MAX).unwrap();
        let (o2, l2, _) = s.next_chunk(1000, u64::MAX).unwrap();
        s.on_lost(o1, l1, false);
        s.on_ack(o1, l1, false);
        s.on_ack(o2, l2, false);
        let (o, l, _) = s.next_chunk(1000, u64::MAX).unwrap();
        assert_eq!((o, l), (2000, 1000), "only new data remains to send");
        let mut out = Vec::new();
        s.copy_range(o, l, &mut out);
        assert_eq!(out.len(), 1000);
    }

    #[test]
    fn unsent_bytes_count_retransmissions_and_new_data_within_credit() {
        let mut s = SendStream::new(2500);
        s.write(Bytes::from_static(&[1u8; 3000]));
        // New data up to the stream's limit (2500) and the connection's credit.
        assert_eq!(s.unsent_bytes(u64::MAX), 2500);
        assert_eq!(s.unsent_bytes(700), 700);
        let (o, l, _) = s.next_chunk(1000, u64::MAX).unwrap();
        assert_eq!(s.unsent_bytes(u64::MAX), 1500);
        s.on_lost(o, l, false);
        assert_eq!(s.unsent_bytes(u64::MAX), 2500);
        assert_eq!(s.unsent_bytes(0), 1000);
        s.reset(0);
        assert_eq!(s.unsent_bytes(u64::MAX), 0);
    }

    #[test]
    fn lost_fin_is_sent_again_alone() {
        let mut s = SendStream::new(1 << 20);
        s.write(Bytes::from_static(b"abc"));
        s.finish();
        assert_eq!(s.next_chunk(100, u64::MAX), Some((0, 3, true)));
        s.on_ack(0, 3, false);
        s.on_lost(3, 0, true);
        assert_eq!(s.next_chunk(100, u64::MAX), Some((3, 0, true)));
        assert!(s.on_ack(3, 0, true), "everything acknowledged");
    }
}
