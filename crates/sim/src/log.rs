//! Event log: a running 64-bit hash of every stage outcome, plus an optional text log.
//!
//! The hash makes "same seed, same run" testable in one comparison without storing the events;
//! the text log (one line per event) is for debugging a single run.

use std::fmt;
use std::io::Write;

use crate::rng::mix64;

/// What happened to a packet (or a node) at a stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventKind {
    /// A node emitted a datagram onto a link direction.
    Send,
    Enqueue,
    DropQueue,
    DropIngressLoss,
    DropAirLoss,
    DropBlackhole,
    Corrupt,
    Deliver,
    /// A datagram without a route or without a node at its destination.
    DropNoRoute,
    Timeout,
    LinkChange,
    /// A WLAN station discarded an MPDU at its retry limit.
    DropRetryLimit,
    /// A WLAN station won the channel (len = MPDUs, hash field = PSDU bytes).
    WifiTxop,
    /// A WLAN station's exchange collided (len = MPDUs, hash field = PSDU bytes).
    WifiCollision,
    /// A link direction delivers a copy of a packet as well.
    Duplicate,
    /// A queue marked an ECN-capable packet Congestion Experienced ([`crate::EcnMarking`]).
    MarkCe,
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            EventKind::Send => "send",
            EventKind::Enqueue => "enqueue",
            EventKind::DropQueue => "drop-queue",
            EventKind::DropIngressLoss => "drop-ingress",
            EventKind::DropAirLoss => "drop-air",
            EventKind::DropBlackhole => "drop-blackhole",
            EventKind::Corrupt => "corrupt",
            EventKind::Deliver => "deliver",
            EventKind::DropNoRoute => "drop-noroute",
            EventKind::Timeout => "timeout",
            EventKind::LinkChange => "link-change",
            EventKind::DropRetryLimit => "drop-retry-limit",
            EventKind::WifiTxop => "wifi-txop",
            EventKind::WifiCollision => "wifi-collision",
            EventKind::Duplicate => "duplicate",
            EventKind::MarkCe => "mark-ce",
        };
        f.write_str(s)
    }
}

/// Hash of packet bytes (fast, not cryptographic): four independent 64-bit lanes over 32-byte
/// blocks so the multiplies overlap, then the tail, then a final mix.
pub fn bytes_hash(data: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let word = |c: &[u8]| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
    let mut lanes = [
        0x6a09_e667_f3bc_c908u64 ^ data.len() as u64,
        0xbb67_ae85_84ca_a73b,
        0x3c6e_f372_fe94_f82b,
        0xa54f_f53a_5f1d_36f1,
    ];
    let mut blocks = data.chunks_exact(32);
    for b in &mut blocks {
        for (i, lane) in lanes.iter_mut().enumerate() {
            *lane = (*lane ^ word(&b[i * 8..])).wrapping_mul(K).rotate_left(29);
        }
    }
    let mut h = mix64(
        lanes[0] ^ lanes[1].rotate_left(16) ^ lanes[2].rotate_left(32) ^ lanes[3].rotate_left(48),
    );
    let mut words = blocks.remainder().chunks_exact(8);
    for c in &mut words {
        h = (h ^ word(c)).wrapping_mul(K).rotate_left(29);
    }
    let mut tail = [0u8; 8];
    let rest = words.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    h = (h ^ u64::from_le_bytes(tail)).wrapping_mul(K);
    mix64(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_hash_sees_every_byte_and_the_length() {
        let base = vec![0u8; 1500];
        let h0 = bytes_hash(&base);
        for i in [0, 7, 31, 32, 1000, 1495, 1499] {
            let mut v = base.clone();
            v[i] ^= 1;
            assert_ne!(bytes_hash(&v), h0, "byte {i}");
        }
        assert_ne!(bytes_hash(&base[..1499]), h0);
        assert_ne!(bytes_hash(&[]), bytes_hash(&[0]));
    }
}

/// The running record of a simulation.
#[derive(Default)]
pub struct EventLog {
    hash: u64,
    count: u64,
    text: Option<Box<dyn Write + Send>>,
}

impl EventLog {
    /// Record one event. `link` is the link index or the node index (for timeouts).
    #[inline]
    pub fn record(&mut self, time_ns: u64, kind: EventKind, link: u32, len: usize, data_hash: u64) {
        let mut h = self.hash ^ time_ns;
        h = mix64(h ^ ((kind as u64) << 56) ^ (u64::from(link) << 24) ^ len as u64);
        self.hash = mix64(h ^ data_hash);
        self.count += 1;
        if let Some(w) = self.text.as_mut() {
            // Debug aid only: an I/O error here must not change the simulation.
            let _ = writeln!(
                w,
                "{}.{:09} {kind} #{link} len={len} h={data_hash:016x}",
                time_ns / 1_000_000_000,
                time_ns % 1_000_000_000
            );
        }
    }

    /// The hash over all events so far.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// Number of events recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Also write every event as a line of text.
    pub fn set_text(&mut self, w: Box<dyn Write + Send>) {
        self.text = Some(w);
    }

    /// Flush the text log, if any.
    pub fn flush(&mut self) -> std::io::Result<()> {
        match self.text.as_mut() {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }
}
