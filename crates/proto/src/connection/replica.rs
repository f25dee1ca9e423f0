//! Copies of data packets waiting to go out on another path, for a scheduler that sends
//! every packet on every path ([`crate::multipath::PathScheduler::replicates`]).
//!
//! A copy is the data frames of a packet sent on one path (STREAM, DATAGRAM and an
//! extension's, e.g. a FEC source symbol or repair), as plaintext, with the loss-recovery
//! records of its STREAM frames: the path that sends it seals it in a packet of its own
//! number space, and a loss of that packet queues its stream ranges again like any other
//! (what the other copy already delivered is not sent again). Copies a path cannot send
//! in time are dropped: the oldest when more than its window's worth wait, any whose
//! DATAGRAMs' deadlines have passed, and any of STREAM data only that the peer
//! acknowledged through the packet it copies (or another).

use std::collections::VecDeque;

use super::sent::SentFrames;
use crate::Instant;

/// A packet's data frames, to be sent again on another path.
#[derive(Debug, Clone)]
pub(super) struct Replica {
    /// The frames as encoded in the first packet.
    pub bytes: Vec<u8>,
    /// Loss-recovery records of its STREAM frames.
    pub frames: SentFrames,
    /// When it carries only DATAGRAMs with deadlines: the latest of them.
    pub deadline: Option<Instant>,
    /// Its frames are STREAM frames only (no DATAGRAM, no extension frame): once the peer
    /// acknowledged them all through another packet, the copy is dropped unsent.
    pub only_streams: bool,
}

/// The copies one path owes, oldest first. What it drops (too many waiting, too late,
/// delivered already, larger than this path's packets) its callers count.
#[derive(Debug, Default)]
pub(super) struct ReplicaQueue {
    queue: VecDeque<Replica>,
    bytes: usize,
}

impl ReplicaQueue {
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Queues `r`; copies beyond `max_bytes` waiting are dropped, oldest first (the path is
    /// slower than the one that sent them: they would only arrive later and later). Returns
    /// how many were dropped.
    pub fn push(&mut self, r: Replica, max_bytes: usize) -> u64 {
        self.bytes += r.bytes.len();
        self.queue.push_back(r);
        let mut dropped = 0;
        while self.bytes > max_bytes.max(1)
            && let Some(old) = self.queue.pop_front()
        {
            self.bytes -= old.bytes.len();
            dropped += 1;
        }
        dropped
    }

    /// The oldest copy still useful whose frames fit in `room` bytes; copies whose deadline
    /// comes before `arrival` (when a packet sent now would arrive), too large for this
    /// path's packets (`max_room`), or whose STREAM frames `delivered` says the peer has,
    /// are dropped and counted in `dropped`.
    pub fn pop(
        &mut self,
        arrival: Instant,
        room: usize,
        max_room: usize,
        delivered: impl Fn(&SentFrames) -> bool,
        dropped: &mut u64,
    ) -> Option<Replica> {
        while let Some(front) = self.queue.front() {
            let late = front.deadline.is_some_and(|d| arrival > d);
            let useless = front.only_streams && delivered(&front.frames);
            if !late && !useless && front.bytes.len() <= max_room {
                if front.bytes.len() > room {
                    return None;
                }
                let r = self.queue.pop_front().expect("non-empty");
                self.bytes -= r.bytes.len();
                return Some(r);
            }
            let r = self.queue.pop_front().expect("non-empty");
            self.bytes -= r.bytes.len();
            *dropped += 1;
        }
        None
    }

    /// Forgets every copy (the path closed); returns how many there were.
    pub fn clear(&mut self) -> u64 {
        let n = self.queue.len() as u64;
        self.queue.clear();
        self.bytes = 0;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(len: usize, deadline: Option<u64>) -> Replica {
        Replica {
            bytes: vec![0; len],
            frames: SentFrames::new(),
            deadline: deadline.map(|ms| Instant::from_nanos(ms * 1_000_000)),
            only_streams: false,
        }
    }

    fn none_delivered(_: &SentFrames) -> bool {
        false
    }

    #[test]
    fn oldest_first_within_the_byte_budget() {
        let mut q = ReplicaQueue::default();
        assert_eq!(q.push(replica(100, None), 250), 0);
        assert_eq!(q.push(replica(110, None), 250), 0);
        assert_eq!(q.push(replica(120, None), 250), 1, "the oldest went");
        let (now, mut dropped) = (Instant::ZERO, 0);
        assert!(
            q.pop(now, 100, 1200, none_delivered, &mut dropped)
                .is_none(),
            "the next does not fit yet"
        );
        for len in [110, 120] {
            let r = q.pop(now, 1200, 1200, none_delivered, &mut dropped);
            assert_eq!(r.map(|r| r.bytes.len()), Some(len));
        }
        assert!(q.is_empty());
        assert_eq!(dropped, 0);
    }

    #[test]
    fn late_and_oversized_copies_are_dropped() {
        let mut q = ReplicaQueue::default();
        q.push(replica(100, Some(10)), 10_000);
        q.push(replica(1300, None), 10_000);
        q.push(replica(90, Some(30)), 10_000);
        let mut dropped = 0;
        // A packet sent now arrives at 20 ms: the first copy's deadline has passed.
        let arrival = Instant::from_nanos(20_000_000);
        let r = q.pop(arrival, 1200, 1200, none_delivered, &mut dropped);
        assert_eq!(r.map(|r| r.bytes.len()), Some(90));
        assert_eq!(dropped, 2);
        q.push(replica(90, None), 10_000);
        assert_eq!(q.clear(), 1);
        assert!(q.is_empty());
    }

    #[test]
    fn a_copy_of_delivered_stream_data_is_dropped() {
        use super::super::sent::SentFrame;
        use crate::types::StreamId;
        let frame = |offset| SentFrame::Stream {
            id: StreamId(3),
            offset,
            len: 100,
            fin: false,
        };
        let mut q = ReplicaQueue::default();
        for (offset, only_streams) in [(0, true), (100, false), (200, true)] {
            q.push(
                Replica {
                    frames: std::iter::once(frame(offset)).collect(),
                    only_streams,
                    ..replica(120, None)
                },
                10_000,
            );
        }
        // The peer has everything: only the copy that carries more than STREAM frames goes.
        let mut dropped = 0;
        let r = q.pop(Instant::ZERO, 1200, 1200, |_| true, &mut dropped);
        assert_eq!(r.map(|r| r.frames[0]), Some(frame(100)));
        assert!(
            q.pop(Instant::ZERO, 1200, 1200, |_| true, &mut dropped)
                .is_none()
        );
        assert_eq!(dropped, 2);
    }
}
