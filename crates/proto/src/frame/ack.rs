//! ACK frames (RFC 9000 §19.3).
//!
//! The additional ranges stay as raw bytes: the decoder validates them once (no underflow,
//! count bounded by the bytes present) and [`AckRangeIter`] walks them without allocating.

use std::ops::RangeInclusive;

use super::{FrameError, ty};
use crate::coding::{Reader, put_varint, varint_len};
use crate::range_set::RangeSet;
pub use crate::types::EcnCounts;

/// A decoded ACK frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack<'a> {
    /// Raw encoded ACK Delay; scale with the peer's ack_delay_exponent ([`Ack::delay_micros`]).
    pub delay: u64,
    pub ecn: Option<EcnCounts>,
    /// Largest Acknowledged and the ranges.
    pub ranges: AckRanges<'a>,
}

impl<'a> Ack<'a> {
    /// An ACK with only its first range (for tests and simple senders).
    pub fn single(largest: u64, delay: u64, first_range: u64, ecn: Option<EcnCounts>) -> Self {
        debug_assert!(first_range <= largest);
        Ack {
            delay,
            ecn,
            ranges: AckRanges {
                largest,
                first_range,
                additional: &[],
                additional_count: 0,
            },
        }
    }

    /// Largest acknowledged packet number.
    pub fn largest(&self) -> u64 {
        self.ranges.largest
    }

    /// Acknowledged ranges, highest first, as inclusive packet-number ranges.
    pub fn ranges(&self) -> AckRangeIter<'a> {
        self.ranges.iter()
    }

    /// Total number of ranges, the first one included.
    pub fn range_count(&self) -> u64 {
        self.ranges.count()
    }

    /// Smallest acknowledged packet number.
    pub fn smallest(&self) -> u64 {
        self.ranges().last().map_or(self.largest(), |r| *r.start())
    }

    /// ACK Delay in microseconds, given the sender's ack_delay_exponent (saturating).
    pub fn delay_micros(&self, exponent: u64) -> u64 {
        if exponent >= 64 {
            return if self.delay == 0 { 0 } else { u64::MAX };
        }
        self.delay.saturating_mul(1 << exponent)
    }

    pub(super) fn encoded_len(&self) -> usize {
        varint_len(self.ty()) + self.body_len()
    }

    /// Length of everything after the frame type (PATH_ACK puts a path ID before it).
    pub(super) fn body_len(&self) -> usize {
        let r = &self.ranges;
        let mut n = varint_len(r.largest)
            + varint_len(self.delay)
            + varint_len(r.additional_count)
            + varint_len(r.first_range)
            + r.additional.len();
        if let Some(e) = &self.ecn {
            n += ecn_len(e);
        }
        n
    }

    pub(super) fn encode(&self, buf: &mut Vec<u8>) {
        put_varint(buf, self.ty());
        self.encode_body(buf);
    }

    /// Everything after the frame type.
    pub(super) fn encode_body(&self, buf: &mut Vec<u8>) {
        let r = &self.ranges;
        put_varint(buf, r.largest);
        put_varint(buf, self.delay);
        put_varint(buf, r.additional_count);
        put_varint(buf, r.first_range);
        buf.extend_from_slice(r.additional);
        if let Some(e) = &self.ecn {
            put_ecn(buf, e);
        }
    }

    fn ty(&self) -> u64 {
        if self.ecn.is_some() {
            ty::ACK_ECN
        } else {
            ty::ACK
        }
    }
}

/// Iterator over the ranges of an [`Ack`], highest first.
#[derive(Debug, Clone)]
pub struct AckRangeIter<'a> {
    r: Reader<'a>,
    next: Option<RangeInclusive<u64>>,
}

impl Iterator for AckRangeIter<'_> {
    type Item = RangeInclusive<u64>;

    fn next(&mut self) -> Option<Self::Item> {
        let cur = self.next.take()?;
        // Validated at decode; on anything odd just stop rather than panic.
        if !self.r.is_empty()
            && let (Ok(gap), Ok(len)) = (self.r.varint(), self.r.varint())
            && let Some(largest) = cur.start().checked_sub(gap).and_then(|v| v.checked_sub(2))
            && let Some(smallest) = largest.checked_sub(len)
        {
            self.next = Some(smallest..=largest);
        }
        Some(cur)
    }
}

pub(super) fn decode<'a>(t: u64, r: &mut Reader<'a>) -> Result<Ack<'a>, FrameError> {
    decode_as(t, t, r)
}

/// Decodes the body of an ACK-shaped frame of type `t` whose layout is that of `ack_ty`
/// (ACK or ACK_ECN): PATH_ACK's body after its path ID.
pub(super) fn decode_as<'a>(
    ack_ty: u64,
    t: u64,
    r: &mut Reader<'a>,
) -> Result<Ack<'a>, FrameError> {
    let tr = FrameError::truncated(t);
    let largest = r.varint().map_err(&tr)?;
    let delay = r.varint().map_err(&tr)?;
    let ranges = decode_ack_range_block(t, r, largest)?;
    let ecn = if ack_ty == ty::ACK_ECN {
        Some(EcnCounts {
            ect0: r.varint().map_err(&tr)?,
            ect1: r.varint().map_err(&tr)?,
            ce: r.varint().map_err(&tr)?,
        })
    } else {
        None
    };
    Ok(Ack { delay, ecn, ranges })
}

/// The ranges of an ACK-shaped frame (ACK, or an extension's acknowledgement of other
/// numbers such as FEC symbol ids), validated: they descend and never go below zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckRanges<'a> {
    pub largest: u64,
    pub first_range: u64,
    additional: &'a [u8],
    additional_count: u64,
}

impl<'a> AckRanges<'a> {
    /// Acknowledged ranges, highest first.
    pub fn iter(&self) -> AckRangeIter<'a> {
        AckRangeIter {
            r: Reader::new(self.additional),
            next: Some(self.largest - self.first_range.min(self.largest)..=self.largest),
        }
    }

    /// Total number of ranges, the first one included.
    pub fn count(&self) -> u64 {
        self.additional_count + 1
    }
}

/// Decodes the range block that follows the Largest Acknowledged field (and, in ACK, the
/// delay): ACK Range Count, First ACK Range, then (Gap, ACK Range Length) pairs (RFC 9000
/// §19.3.1). `t` is the frame type for errors.
pub fn decode_ack_range_block<'a>(
    t: u64,
    r: &mut Reader<'a>,
    largest: u64,
) -> Result<AckRanges<'a>, FrameError> {
    let tr = FrameError::truncated(t);
    let additional_count = r.varint().map_err(&tr)?;
    let first_range = r.varint().map_err(&tr)?;
    let mut smallest = largest
        .checked_sub(first_range)
        .ok_or(FrameError::encoding(t, "ACK range below zero"))?;
    // Each additional range takes at least two bytes: bound the count before looping.
    if additional_count > (r.remaining() / 2) as u64 {
        return Err(FrameError::encoding(t, "ACK range count exceeds frame"));
    }
    let start = r.position();
    let mut body = r.clone();
    for _ in 0..additional_count {
        let gap = body.varint().map_err(&tr)?;
        let len = body.varint().map_err(&tr)?;
        smallest = smallest
            .checked_sub(gap)
            .and_then(|v| v.checked_sub(2))
            .and_then(|v| v.checked_sub(len))
            .ok_or(FrameError::encoding(t, "ACK range below zero"))?;
    }
    let additional = r.bytes(body.position() - start).map_err(&tr)?;
    Ok(AckRanges {
        largest,
        first_range,
        additional,
        additional_count,
    })
}

fn ecn_len(e: &EcnCounts) -> usize {
    varint_len(e.ect0) + varint_len(e.ect1) + varint_len(e.ce)
}

pub(super) fn put_ecn(buf: &mut Vec<u8>, e: &EcnCounts) {
    put_varint(buf, e.ect0);
    put_varint(buf, e.ect1);
    put_varint(buf, e.ce);
}

/// (gap, length) fields for the ranges after the first, walking down from the top.
fn additional_fields(
    ranges: &RangeSet,
    max_ranges: usize,
) -> impl Iterator<Item = (u64, u64)> + '_ {
    let mut it = ranges.iter().rev().take(max_ranges.max(1));
    let mut prev_start = it.next().map_or(0, |r| r.start);
    it.map(move |r| {
        let gap = prev_start - r.end - 1;
        prev_start = r.start;
        (gap, r.end - 1 - r.start)
    })
}

/// Writes an ACK (or ACK_ECN) frame for the top `max_ranges` ranges of `ranges`; older ranges
/// are left out. Writes nothing when `ranges` is empty.
pub fn encode_ack(
    buf: &mut Vec<u8>,
    ranges: &RangeSet,
    delay: u64,
    ecn: Option<&EcnCounts>,
    max_ranges: usize,
) {
    let Some(top) = ranges.last_range() else {
        return;
    };
    put_varint(buf, if ecn.is_some() { ty::ACK_ECN } else { ty::ACK });
    put_varint(buf, top.end - 1);
    put_varint(buf, delay);
    encode_ack_range_block(buf, ranges, max_ranges);
    if let Some(e) = ecn {
        put_ecn(buf, e);
    }
}

/// Exact size of what [`encode_ack`] writes with the same arguments.
pub fn ack_encoded_len(
    ranges: &RangeSet,
    delay: u64,
    ecn: Option<&EcnCounts>,
    max_ranges: usize,
) -> usize {
    let Some(top) = ranges.last_range() else {
        return 0;
    };
    1 + varint_len(top.end - 1)
        + varint_len(delay)
        + ack_range_block_len(ranges, max_ranges)
        + ecn.map_or(0, ecn_len)
}

/// Writes the range block (count, first range, gaps and lengths) of the top `max_ranges`
/// ranges of a non-empty `ranges`; the caller wrote the largest acknowledged before it.
pub fn encode_ack_range_block(buf: &mut Vec<u8>, ranges: &RangeSet, max_ranges: usize) {
    let Some(top) = ranges.last_range() else {
        return;
    };
    let count = ranges.len().min(max_ranges.max(1));
    put_varint(buf, count as u64 - 1);
    put_varint(buf, top.end - 1 - top.start);
    for (gap, len) in additional_fields(ranges, max_ranges) {
        put_varint(buf, gap);
        put_varint(buf, len);
    }
}

/// Exact size of what [`encode_ack_range_block`] writes.
pub fn ack_range_block_len(ranges: &RangeSet, max_ranges: usize) -> usize {
    let Some(top) = ranges.last_range() else {
        return 0;
    };
    let count = ranges.len().min(max_ranges.max(1));
    varint_len(count as u64 - 1)
        + varint_len(top.end - 1 - top.start)
        + additional_fields(ranges, max_ranges)
            .map(|(g, l)| varint_len(g) + varint_len(l))
            .sum::<usize>()
}
