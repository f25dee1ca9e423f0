//! The receiving half of a stream: reassembly of out-of-order data, final size checks and
//! flow-control credit (RFC 9000 §3.2, §4).

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;

use crate::range_set::RangeSet;
use crate::time::Instant;
use crate::types::{TransportError, error_code};

#[derive(Debug)]
pub struct RecvStream {
    /// Data that arrived in order, ready to read: the common case needs no map.
    in_order: VecDeque<Bytes>,
    in_order_bytes: u64,
    /// Received, unread chunks by offset (out of order); they may overlap what was read.
    chunks: BTreeMap<u64, Bytes>,
    /// Offsets received so far (to drop duplicates before buffering them).
    received: RangeSet,
    /// Next offset the application reads.
    pub read_offset: u64,
    /// Highest offset seen, counted against flow control.
    pub highest: u64,
    pub final_size: Option<u64>,
    /// The limit we advertised (MAX_STREAM_DATA).
    pub max_data: u64,
    /// Receive window: how far ahead of `read_offset` we let the peer send.
    pub window: u64,
    /// The peer reset the stream with this code; unread data is discarded.
    pub reset: Option<u64>,
    /// We asked the peer to stop sending (STOP_SENDING).
    pub stop_sent: Option<u64>,
    /// The application saw the end (FIN read or reset reported).
    pub finished_reading: bool,
    /// When we last raised `max_data`, for window auto-tuning.
    pub last_credit_update: Option<Instant>,
}

impl RecvStream {
    pub fn new(window: u64) -> Self {
        RecvStream {
            in_order: VecDeque::new(),
            in_order_bytes: 0,
            chunks: BTreeMap::new(),
            received: RangeSet::new(),
            read_offset: 0,
            highest: 0,
            final_size: None,
            max_data: window,
            window,
            reset: None,
            stop_sent: None,
            finished_reading: false,
            last_credit_update: None,
        }
    }

    /// Takes a STREAM frame's data. Returns how much the highest offset grew (connection
    /// flow-control accounting).
    pub fn ingest(&mut self, offset: u64, data: Bytes, fin: bool) -> Result<u64, TransportError> {
        let end = offset + data.len() as u64;
        if end > self.max_data {
            return Err(TransportError::new(
                error_code::FLOW_CONTROL_ERROR,
                "stream data beyond MAX_STREAM_DATA",
            ));
        }
        if let Some(fs) = self.final_size
            && (end > fs || (fin && end != fs))
        {
            return Err(TransportError::new(
                error_code::FINAL_SIZE_ERROR,
                "final size changed",
            ));
        }
        if fin {
            if end < self.highest {
                return Err(TransportError::new(
                    error_code::FINAL_SIZE_ERROR,
                    "final size below data already received",
                ));
            }
            self.final_size = Some(end);
        }
        let grown = end.saturating_sub(self.highest);
        self.highest = self.highest.max(end);
        if self.reset.is_some() || self.stop_sent.is_some() || end <= self.read_offset {
            return Ok(grown);
        }
        // Skip what the application already read, and whole duplicates.
        let (mut offset, mut data) = (offset, data);
        if offset < self.read_offset {
            let skip = (self.read_offset - offset) as usize;
            data = data.slice(skip..);
            offset = self.read_offset;
        }
        // Keep only bytes never received: overlapping retransmissions cannot make the
        // buffer outgrow the flow-control window.
        let mut fresh = RangeSet::new();
        if !data.is_empty() {
            fresh.insert(offset..end);
            fresh.subtract(&self.received);
            self.received.insert(offset..end);
        }
        for r in fresh.iter() {
            let piece = data.slice((r.start - offset) as usize..(r.end - offset) as usize);
            if self.chunks.is_empty() && r.start == self.read_offset + self.in_order_bytes {
                self.in_order_bytes += piece.len() as u64;
                self.in_order.push_back(piece);
            } else {
                self.insert_chunk(r.start, piece);
            }
        }
        Ok(grown)
    }

    /// RESET_STREAM from the peer. Returns the flow-control growth.
    pub fn on_reset(&mut self, code: u64, final_size: u64) -> Result<u64, TransportError> {
        if let Some(fs) = self.final_size
            && fs != final_size
        {
            return Err(TransportError::new(
                error_code::FINAL_SIZE_ERROR,
                "final size changed",
            ));
        }
        if final_size < self.highest {
            return Err(TransportError::new(
                error_code::FINAL_SIZE_ERROR,
                "reset final size below data received",
            ));
        }
        if final_size > self.max_data {
            return Err(TransportError::new(
                error_code::FLOW_CONTROL_ERROR,
                "reset beyond limit",
            ));
        }
        let grown = final_size - self.highest;
        self.highest = final_size;
        self.final_size = Some(final_size);
        if self.reset.is_none() {
            self.reset = Some(code);
            self.chunks.clear();
            self.in_order.clear();
            self.in_order_bytes = 0;
        }
        Ok(grown)
    }

    /// Next in-order chunk of at most `max` bytes; `None` when nothing is readable now.
    pub fn read_chunk(&mut self, max: usize) -> Option<Bytes> {
        if let Some(front) = self.in_order.front_mut() {
            let chunk = if front.len() > max {
                front.split_to(max)
            } else {
                self.in_order.pop_front().expect("non-empty")
            };
            self.read_offset += chunk.len() as u64;
            self.in_order_bytes -= chunk.len() as u64;
            return Some(chunk);
        }
        loop {
            let (&off, _) = self.chunks.first_key_value()?;
            if off > self.read_offset {
                return None;
            }
            let mut chunk = self.chunks.pop_first().map(|(_, c)| c)?;
            let end = off + chunk.len() as u64;
            if end <= self.read_offset {
                continue;
            }
            let skip = (self.read_offset - off) as usize;
            chunk = chunk.slice(skip..);
            if chunk.len() > max {
                let rest = chunk.split_off(max);
                self.insert_chunk(self.read_offset + max as u64, rest);
            }
            self.read_offset += chunk.len() as u64;
            return Some(chunk);
        }
    }

    /// Two chunks at one offset: keep the longer (it covers the shorter).
    fn insert_chunk(&mut self, offset: u64, data: Bytes) {
        match self.chunks.get(&offset) {
            Some(existing) if existing.len() >= data.len() => {}
            _ => {
                self.chunks.insert(offset, data);
            }
        }
    }

    /// Every byte up to the final size was read.
    pub fn is_fin_readable(&self) -> bool {
        self.final_size == Some(self.read_offset)
    }

    pub fn has_readable(&self) -> bool {
        self.in_order_bytes > 0
            || self
                .chunks
                .first_key_value()
                .is_some_and(|(&o, _)| o <= self.read_offset)
            || self.is_fin_readable()
            || self.reset.is_some()
    }

    /// A MAX_STREAM_DATA worth sending: the peer has used half the window we last gave.
    pub fn wants_credit_update(&self) -> bool {
        self.final_size.is_none()
            && self.reset.is_none()
            && self.stop_sent.is_none()
            && self.read_offset + self.window - self.max_data >= self.window / 2
    }

    /// Extends the advertised limit; returns it.
    pub fn issue_credit(&mut self) -> u64 {
        self.max_data = self.max_data.max(self.read_offset + self.window);
        self.max_data
    }

    /// Buffered bytes not read (for memory accounting and tests).
    pub fn buffered(&self) -> u64 {
        self.in_order_bytes + self.chunks.values().map(|c| c.len() as u64).sum::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Regression: frames overlapping by all but one new byte were stored whole, so the
    /// buffer could grow to frame size x window while one early byte was withheld.
    #[test]
    fn overlapping_frames_are_stored_once() {
        let mut r = RecvStream::new(1 << 20);
        let data: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        for i in 1..2000usize {
            r.ingest(i as u64, Bytes::copy_from_slice(&data[i..i + 1000]), false)
                .unwrap();
        }
        assert_eq!(r.buffered(), 2998, "each byte is held once");
        r.ingest(0, Bytes::copy_from_slice(&data[..1]), false)
            .unwrap();
        let mut out = Vec::new();
        while let Some(c) = r.read_chunk(usize::MAX) {
            out.extend_from_slice(&c);
        }
        assert_eq!(out, &data[..2999]);
    }

    proptest! {
        /// Any arrival order, with duplicates and overlaps, reads back the exact bytes.
        #[test]
        fn reassembly_is_exact(
            cuts in proptest::collection::vec(1usize..3000, 1..40),
            order in proptest::collection::vec(any::<u16>(), 1..80),
            max_read in 1usize..5000,
        ) {
            let data: Vec<u8> = (0..cuts.iter().sum::<usize>()).map(|i| (i * 7 % 251) as u8).collect();
            let mut pieces = Vec::new();
            let mut off = 0;
            for c in &cuts {
                pieces.push((off, off + c));
                off += c;
            }
            // Some overlapping duplicates.
            for w in pieces.clone().windows(2) {
                pieces.push((w[0].0 + (w[0].1 - w[0].0) / 2, w[1].1));
            }
            let mut r = RecvStream::new(1 << 30);
            let mut out = Vec::new();
            let n = pieces.len();
            for (i, k) in order.iter().enumerate() {
                let (a, b) = pieces[(*k as usize + i) % n];
                let fin = b == data.len();
                r.ingest(a as u64, Bytes::copy_from_slice(&data[a..b]), fin).unwrap();
                while let Some(c) = r.read_chunk(max_read) {
                    out.extend_from_slice(&c);
                }
            }
            for &(a, b) in &pieces {
                r.ingest(a as u64, Bytes::copy_from_slice(&data[a..b]), b == data.len()).unwrap();
                while let Some(c) = r.read_chunk(max_read) {
                    out.extend_from_slice(&c);
                }
            }
            prop_assert_eq!(&out, &data);
            prop_assert!(r.is_fin_readable());
            prop_assert_eq!(r.buffered(), 0);
        }
    }
}
