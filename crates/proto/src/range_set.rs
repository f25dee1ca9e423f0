//! A set of `u64` stored as disjoint, merged half-open ranges.
//!
//! Backed by a sorted `Vec`: packet numbers and stream offsets mostly arrive in order, so the
//! common case is extending or appending the top range, which is O(1); out-of-order inserts
//! binary-search and shift a handful of ranges.

use std::ops::Range;

/// Disjoint, non-adjacent, ascending half-open ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    ranges: Vec<Range<u64>>,
}

/// Ascending iterator over the ranges of a [`RangeSet`]; `.rev()` gives them from the top.
pub type Iter<'a> = std::iter::Cloned<std::slice::Iter<'a, Range<u64>>>;

impl RangeSet {
    pub fn new() -> Self {
        RangeSet { ranges: Vec::new() }
    }

    /// Adds `range`; true if at least one value was not already present.
    pub fn insert(&mut self, range: Range<u64>) -> bool {
        if range.start >= range.end {
            return false;
        }
        // Fast paths: append above the top range or extend it.
        match self.ranges.last_mut() {
            None => {
                self.ranges.push(range);
                return true;
            }
            Some(last) if last.end < range.start => {
                self.ranges.push(range);
                return true;
            }
            Some(last) if last.start <= range.start => {
                if range.end <= last.end {
                    return false;
                }
                last.end = range.end;
                return true;
            }
            _ => {}
        }
        // Ranges in lo..hi overlap or touch `range`.
        let lo = self.ranges.partition_point(|r| r.end < range.start);
        let hi = self.ranges.partition_point(|r| r.start <= range.end);
        if lo == hi {
            self.ranges.insert(lo, range);
            return true;
        }
        let first = &self.ranges[lo];
        if hi - lo == 1 && first.start <= range.start && range.end <= first.end {
            return false;
        }
        let merged = first.start.min(range.start)..self.ranges[hi - 1].end.max(range.end);
        self.ranges[lo] = merged;
        self.ranges.drain(lo + 1..hi);
        true
    }

    pub fn insert_one(&mut self, v: u64) -> bool {
        match v.checked_add(1) {
            Some(end) => self.insert(v..end),
            // u64::MAX cannot be represented in a half-open range; never a valid PN/offset.
            None => false,
        }
    }

    pub fn contains(&self, v: u64) -> bool {
        let i = self.ranges.partition_point(|r| r.end <= v);
        self.ranges.get(i).is_some_and(|r| r.start <= v)
    }

    /// Removes every value in `range`.
    pub fn remove(&mut self, range: Range<u64>) {
        if range.start >= range.end {
            return;
        }
        let lo = self.ranges.partition_point(|r| r.end <= range.start);
        let hi = self.ranges.partition_point(|r| r.start < range.end);
        if lo >= hi {
            return;
        }
        let left = self.ranges[lo].start..range.start;
        let right = range.end..self.ranges[hi - 1].end;
        let pieces = [left, right].into_iter().filter(|r| r.start < r.end);
        self.ranges.splice(lo..hi, pieces);
    }

    /// Removes every value of `other`.
    pub fn subtract(&mut self, other: &RangeSet) {
        for r in other.iter() {
            self.remove(r);
        }
    }

    pub fn min(&self) -> Option<u64> {
        self.ranges.first().map(|r| r.start)
    }

    /// Largest value in the set.
    pub fn max(&self) -> Option<u64> {
        self.ranges.last().map(|r| r.end - 1)
    }

    /// Number of ranges (not of values).
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn iter(&self) -> Iter<'_> {
        self.ranges.iter().cloned()
    }

    pub fn first_range(&self) -> Option<Range<u64>> {
        self.ranges.first().cloned()
    }

    pub fn last_range(&self) -> Option<Range<u64>> {
        self.ranges.last().cloned()
    }

    pub fn pop_min(&mut self) -> Option<Range<u64>> {
        if self.ranges.is_empty() {
            None
        } else {
            Some(self.ranges.remove(0))
        }
    }

    /// Number of values in the set.
    pub fn elts_count(&self) -> u64 {
        self.ranges.iter().map(|r| r.end - r.start).sum()
    }

    pub fn clear(&mut self) {
        self.ranges.clear();
    }
}

impl<'a> IntoIterator for &'a RangeSet {
    type Item = Range<u64>;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<Range<u64>> for RangeSet {
    fn from_iter<I: IntoIterator<Item = Range<u64>>>(iter: I) -> Self {
        let mut s = RangeSet::new();
        for r in iter {
            s.insert(r);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn check_invariants(s: &RangeSet) {
        for r in s.iter() {
            assert!(r.start < r.end);
        }
        for w in s.ranges.windows(2) {
            assert!(w[0].end < w[1].start, "ranges not merged: {:?}", s.ranges);
        }
    }

    fn model_of(s: &RangeSet) -> BTreeSet<u64> {
        s.iter().flatten().collect()
    }

    #[test]
    fn basics() {
        let mut s = RangeSet::new();
        assert!(s.insert(5..10));
        assert!(!s.insert(6..8));
        assert!(s.insert(10..12));
        assert_eq!(s.len(), 1);
        assert!(s.insert(0..2));
        assert!(s.insert_one(3));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0..2, 3..4, 5..12]);
        assert!(s.insert(2..3));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0..4, 5..12]);
        s.remove(1..7);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0..1, 7..12]);
        assert_eq!((s.min(), s.max()), (Some(0), Some(11)));
        assert_eq!(s.iter().next_back(), Some(7..12));
        assert_eq!(s.pop_min(), Some(0..1));
        assert_eq!(s.elts_count(), 5);
        assert!(!s.insert_one(u64::MAX));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, u64),
        Remove(u64, u64),
        PopMin,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u64..200, 0u64..12).prop_map(|(a, l)| Op::Insert(a, a + l)),
            2 => (0u64..200, 0u64..30).prop_map(|(a, l)| Op::Remove(a, a + l)),
            1 => Just(Op::PopMin),
        ]
    }

    proptest! {
        #[test]
        fn matches_btreeset(ops in proptest::collection::vec(op(), 0..80), probe in 0u64..220) {
            let mut s = RangeSet::new();
            let mut m = BTreeSet::new();
            for op in ops {
                match op {
                    Op::Insert(a, b) => {
                        let new = (a..b).any(|v| !m.contains(&v));
                        m.extend(a..b);
                        prop_assert_eq!(s.insert(a..b), new);
                    }
                    Op::Remove(a, b) => {
                        for v in a..b { m.remove(&v); }
                        s.remove(a..b);
                    }
                    Op::PopMin => {
                        if let Some(r) = s.pop_min() {
                            for v in r { prop_assert!(m.remove(&v)); }
                        }
                        prop_assert!(m.first().is_none_or(|&f| s.min() == Some(f)));
                    }
                }
                check_invariants(&s);
                prop_assert_eq!(&model_of(&s), &m);
            }
            prop_assert_eq!(s.contains(probe), m.contains(&probe));
            prop_assert_eq!(s.min(), m.first().copied());
            prop_assert_eq!(s.max(), m.last().copied());
            prop_assert_eq!(s.elts_count(), m.len() as u64);
        }

        #[test]
        fn subtract_matches(a in proptest::collection::vec((0u64..100, 0u64..10), 0..20),
                            b in proptest::collection::vec((0u64..100, 0u64..10), 0..20)) {
            let mut sa: RangeSet = a.iter().map(|&(x, l)| x..x + l).collect();
            let sb: RangeSet = b.iter().map(|&(x, l)| x..x + l).collect();
            let expect: BTreeSet<u64> = model_of(&sa).difference(&model_of(&sb)).copied().collect();
            sa.subtract(&sb);
            check_invariants(&sa);
            prop_assert_eq!(model_of(&sa), expect);
        }
    }
}
