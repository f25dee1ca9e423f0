//! What the server sends: a pseudo-random pattern whose period is prime, so that bytes
//! delivered at a wrong offset, on a wrong stream or twice are caught by the client, which
//! checks every byte it reads.

use bytes::Bytes;

/// Period of the pattern (the largest prime below 2^16).
pub const PERIOD: usize = 65_521;

/// The pattern, stored twice so that any window of up to `PERIOD` bytes is one slice.
#[derive(Clone)]
pub struct Content {
    bytes: Bytes,
}

impl Default for Content {
    fn default() -> Self {
        Self::new()
    }
}

impl Content {
    pub fn new() -> Self {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut v: Vec<u8> = (0..PERIOD)
            .map(|_| {
                // xorshift64*
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
            })
            .collect();
        v.extend_from_within(..);
        Content {
            bytes: Bytes::from(v),
        }
    }

    fn start(key: u64, offset: u64) -> usize {
        ((offset + key.wrapping_mul(7919)) % PERIOD as u64) as usize
    }

    /// Bytes `offset..offset + len` of the stream (or datagram) `key`; `len` <= `PERIOD`.
    pub fn slice(&self, key: u64, offset: u64, len: usize) -> Bytes {
        let s = Self::start(key, offset);
        self.bytes.slice(s..s + len.min(PERIOD))
    }

    /// Whether `data` is what the stream `key` carries at `offset`.
    pub fn matches(&self, key: u64, offset: u64, data: &[u8]) -> bool {
        let mut off = offset;
        data.chunks(PERIOD).all(|c| {
            let s = Self::start(key, off);
            off += c.len() as u64;
            &self.bytes[s..s + c.len()] == c
        })
    }
}

/// A web page's objects as HTTP/3 content: object `i` is at `/{i}`, `sizes[i]` bytes of the
/// pattern keyed by `i`.
pub struct PageContent {
    pub sizes: Vec<u64>,
    pub content: Content,
}

struct PatternBody {
    key: u64,
    offset: u64,
    len: u64,
    content: Content,
}

impl qfec_http::content::Body for PatternBody {
    fn len(&self) -> u64 {
        self.len
    }

    fn read(&mut self, max: usize) -> std::io::Result<Bytes> {
        let n = (self.len - self.offset).min(max.min(PERIOD) as u64) as usize;
        let b = self.content.slice(self.key, self.offset, n);
        self.offset += n as u64;
        Ok(b)
    }
}

impl qfec_http::content::Content for PageContent {
    fn open(&self, path: &str) -> Option<Box<dyn qfec_http::content::Body>> {
        let i: usize = path.strip_prefix('/')?.parse().ok()?;
        Some(Box::new(PatternBody {
            key: i as u64,
            offset: 0,
            len: *self.sizes.get(i)?,
            content: self.content.clone(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifted_or_foreign_bytes_do_not_match() {
        let c = Content::new();
        let a = c.slice(4, 1000, 1400);
        assert!(c.matches(4, 1000, &a));
        assert!(!c.matches(4, 1001, &a));
        assert!(!c.matches(8, 1000, &a));
        let long: Vec<u8> = (0..3)
            .flat_map(|i| c.slice(0, i * PERIOD as u64, PERIOD).to_vec())
            .collect();
        assert!(c.matches(0, 0, &long));
    }
}
