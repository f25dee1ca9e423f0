//! Bytes written to a stream and not yet acknowledged, as shared chunks: a write of `Bytes`
//! is kept without copying, and packets copy straight from the chunks.

use std::collections::VecDeque;

use bytes::Bytes;

#[derive(Debug, Default)]
pub struct SendBuffer {
    /// (stream offset of the chunk's first byte, chunk), contiguous and in order.
    chunks: VecDeque<(u64, Bytes)>,
    /// Stream offset of the first byte still held.
    start: u64,
    /// Stream offset after the last byte written.
    end: u64,
}

impl SendBuffer {
    pub fn start(&self) -> u64 {
        self.start
    }

    pub fn end(&self) -> u64 {
        self.end
    }

    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    pub fn push(&mut self, data: Bytes) {
        if data.is_empty() {
            return;
        }
        let len = data.len() as u64;
        self.chunks.push_back((self.end, data));
        self.end += len;
    }

    /// Forgets everything below `offset` (acknowledged, or given up by a reset).
    pub fn free_to(&mut self, offset: u64) {
        let offset = offset.min(self.end);
        while let Some((s, b)) = self.chunks.front_mut() {
            let chunk_end = *s + b.len() as u64;
            if chunk_end <= offset {
                self.chunks.pop_front();
            } else {
                if *s < offset {
                    *b = b.slice((offset - *s) as usize..);
                    *s = offset;
                }
                break;
            }
        }
        self.start = self.start.max(offset);
    }

    /// Drops all data and continues numbering at `offset` (a reset stream).
    pub fn clear_at(&mut self, offset: u64) {
        self.chunks.clear();
        self.start = offset;
        self.end = offset;
    }

    /// Appends bytes `offset..offset + len` (which must be held) to `out`.
    pub fn copy_range(&self, offset: u64, len: usize, out: &mut Vec<u8>) {
        debug_assert!(offset >= self.start && offset + len as u64 <= self.end);
        let mut i = self
            .chunks
            .partition_point(|(s, b)| s + b.len() as u64 <= offset);
        let (mut at, mut left) = (offset, len);
        while left > 0 {
            let Some((s, b)) = self.chunks.get(i) else {
                break;
            };
            let from = (at - s) as usize;
            let n = (b.len() - from).min(left);
            out.extend_from_slice(&b[from..from + n]);
            at += n as u64;
            left -= n;
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_across_chunks_and_frees_prefixes() {
        let mut b = SendBuffer::default();
        b.push(Bytes::from_static(b"hello "));
        b.push(Bytes::from_static(b"big "));
        b.push(Bytes::from_static(b"world"));
        let mut out = Vec::new();
        b.copy_range(3, 10, &mut out);
        assert_eq!(out, b"lo big wor");
        b.free_to(8);
        assert_eq!((b.start(), b.end(), b.len()), (8, 15, 7));
        out.clear();
        b.copy_range(8, 7, &mut out);
        assert_eq!(out, b"g world");
        b.clear_at(15);
        assert!(b.is_empty());
        b.push(Bytes::from_static(b"!"));
        out.clear();
        b.copy_range(15, 1, &mut out);
        assert_eq!(out, b"!");
    }
}
