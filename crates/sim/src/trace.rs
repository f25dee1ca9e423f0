//! mahimahi delivery traces.
//!
//! A trace file holds one integer per line: a millisecond timestamp at which the link may
//! deliver one 1500-byte packet (several identical lines = several opportunities in the same
//! millisecond). The schedule repeats with a period equal to the last timestamp, as mahimahi
//! does. Blank lines and `#` comments are tolerated.

use std::fmt;
use std::path::Path;

/// Bytes one delivery opportunity may carry (mahimahi's MTU-sized slot).
pub const OPPORTUNITY_BYTES: u64 = 1500;

const NS_PER_MS: u64 = 1_000_000;

/// A parsed, non-empty, non-decreasing opportunity schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryTrace {
    ms: Vec<u64>,
}

/// A trace that could not be parsed: which line and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "trace: {}", self.message)
        } else {
            write!(f, "trace line {}: {}", self.line, self.message)
        }
    }
}

impl std::error::Error for TraceError {}

impl DeliveryTrace {
    /// Parse the text of a mahimahi trace.
    pub fn parse(text: &str) -> Result<Self, TraceError> {
        let mut ms = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |message: String| TraceError {
                line: i + 1,
                message,
            };
            let v: u64 = line.parse().map_err(|_| {
                err(format!(
                    "expected a non-negative integer millisecond timestamp, got {line:?}"
                ))
            })?;
            if let Some(&prev) = ms.last()
                && v < prev
            {
                return Err(err(format!(
                    "timestamps must not decrease ({v} after {prev})"
                )));
            }
            ms.push(v);
        }
        Self::from_ms(ms)
    }

    /// Read and parse a trace file; errors name the file.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read trace: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Build from millisecond timestamps (must be sorted, non-empty, last > 0).
    pub fn from_ms(ms: Vec<u64>) -> Result<Self, TraceError> {
        let err = |message: &str| TraceError {
            line: 0,
            message: message.to_string(),
        };
        match ms.last() {
            None => Err(err("no delivery opportunities")),
            Some(0) => Err(err("last timestamp must be > 0 (it is the loop period)")),
            Some(_) if ms.windows(2).any(|w| w[1] < w[0]) => {
                Err(err("timestamps must not decrease"))
            }
            Some(_) => Ok(DeliveryTrace { ms }),
        }
    }

    /// Loop period in nanoseconds.
    pub fn period_ns(&self) -> u64 {
        self.ms[self.ms.len() - 1] * NS_PER_MS
    }

    /// Mean capacity in bits per second for full 1500-byte packets.
    pub fn mean_rate_bps(&self) -> f64 {
        (self.ms.len() as u64 * OPPORTUNITY_BYTES * 8) as f64 * 1e9 / self.period_ns() as f64
    }

    pub fn len(&self) -> usize {
        self.ms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ms.is_empty()
    }
}

/// Position in a looping trace; only moves forward.
#[derive(Debug, Clone, Default)]
pub(crate) struct TraceCursor {
    idx: usize,
    base_ns: u64,
}

impl TraceCursor {
    /// Time of the opportunity under the cursor.
    pub(crate) fn time(&self, t: &DeliveryTrace) -> u64 {
        self.base_ns + t.ms[self.idx] * NS_PER_MS
    }

    pub(crate) fn advance(&mut self, t: &DeliveryTrace) {
        self.idx += 1;
        if self.idx == t.ms.len() {
            self.idx = 0;
            self.base_ns += t.period_ns();
        }
    }

    /// Move to the first opportunity at or after `now` and return its time.
    pub(crate) fn seek(&mut self, t: &DeliveryTrace, now: u64) -> u64 {
        let period = t.period_ns();
        if now > self.base_ns + 2 * period {
            // Skip whole idle cycles arithmetically instead of walking them.
            let cycles = (now - self.base_ns) / period - 1;
            self.base_ns += cycles * period;
            self.idx = 0;
        }
        while self.time(t) < now {
            self.advance(t);
        }
        self.time(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_loops() {
        let t = DeliveryTrace::parse("1\n1\n# c\n\n3\n").unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t.period_ns(), 3_000_000);
        let mut c = TraceCursor::default();
        let times: Vec<u64> = (0..5)
            .map(|_| {
                let x = c.time(&t);
                c.advance(&t);
                x / NS_PER_MS
            })
            .collect();
        assert_eq!(times, vec![1, 1, 3, 4, 4]);
        let mut c = TraceCursor::default();
        assert_eq!(c.seek(&t, 3_000_000_000 + 1), 3_001_000_000);
    }

    #[test]
    fn errors_name_the_line() {
        let e = DeliveryTrace::parse("1\nx2\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().contains("line 2"), "{e}");
        let e = DeliveryTrace::parse("5\n4\n").unwrap_err();
        assert!(e.message.contains("decrease"));
        assert!(DeliveryTrace::parse("").is_err());
        assert!(DeliveryTrace::parse("0\n0\n").is_err());
    }

    #[test]
    fn mean_rate_of_one_per_ms_is_12_mbps() {
        let t = DeliveryTrace::from_ms((1..=1000).collect()).unwrap();
        assert!((t.mean_rate_bps() - 12e6).abs() < 1.0);
    }
}
