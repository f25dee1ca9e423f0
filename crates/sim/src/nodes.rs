//! Small protocol-agnostic nodes for tests, examples and calibrating the simulator.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use crate::{Instant, Node};

/// Sends `count` datagrams of `size` bytes to `dst`, one every `interval`, from `start`.
/// Each payload starts with its sequence number (u64 big-endian).
#[derive(Debug, Clone)]
pub struct CbrSender {
    dst: SocketAddr,
    size: usize,
    interval: Duration,
    count: u64,
    sent: u64,
    next: Instant,
}

impl CbrSender {
    pub fn new(dst: SocketAddr, size: usize, interval: Duration, count: u64) -> Self {
        CbrSender {
            dst,
            size: size.max(8),
            interval,
            count,
            sent: 0,
            next: Instant::ZERO,
        }
    }

    /// Start sending at `start` instead of time zero.
    pub fn starting_at(mut self, start: Instant) -> Self {
        self.next = start;
        self
    }

    pub fn sent(&self) -> u64 {
        self.sent
    }
}

impl Node for CbrSender {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, _: &[u8]) {}

    fn poll_transmit(&mut self, now: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        if self.sent >= self.count || now < self.next {
            return None;
        }
        let mut data = vec![0u8; self.size];
        data[..8].copy_from_slice(&self.sent.to_be_bytes());
        self.sent += 1;
        self.next += self.interval;
        Some((self.dst, data))
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        (self.sent < self.count).then_some(self.next)
    }

    fn handle_timeout(&mut self, _: Instant) {}

    fn is_done(&self) -> bool {
        self.sent >= self.count
    }
}

/// One received datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    pub at: Instant,
    pub from: SocketAddr,
    pub len: usize,
    /// First eight bytes as a big-endian sequence number (0 if shorter).
    pub seq: u64,
}

/// Records every arrival. Done once `expect` datagrams arrived (never, if `expect` is None).
#[derive(Debug, Clone, Default)]
pub struct Sink {
    pub arrivals: Vec<Arrival>,
    pub expect: Option<usize>,
}

impl Sink {
    pub fn expecting(n: usize) -> Self {
        Sink {
            arrivals: Vec::new(),
            expect: Some(n),
        }
    }
}

impl Node for Sink {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        let seq = data
            .get(..8)
            .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
            .unwrap_or(0);
        self.arrivals.push(Arrival {
            at: now,
            from,
            len: data.len(),
            seq,
        });
    }
    fn poll_transmit(&mut self, _: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        None
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn is_done(&self) -> bool {
        self.expect.is_some_and(|n| self.arrivals.len() >= n)
    }
}

/// Sends a ping of `size` bytes, waits for the echo, records the RTT, repeats `count` times.
#[derive(Debug, Clone)]
pub struct Pinger {
    peer: SocketAddr,
    size: usize,
    count: usize,
    pending: Option<Instant>,
    want_send: bool,
    pub rtts: Vec<Duration>,
}

impl Pinger {
    pub fn new(peer: SocketAddr, size: usize, count: usize) -> Self {
        Pinger {
            peer,
            size,
            count,
            pending: None,
            want_send: count > 0,
            rtts: Vec::new(),
        }
    }
}

impl Node for Pinger {
    fn handle_datagram(&mut self, now: Instant, _: SocketAddr, _: &[u8]) {
        if let Some(sent) = self.pending.take() {
            self.rtts.push(now - sent);
            self.want_send = self.rtts.len() < self.count;
        }
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        if !self.want_send {
            return None;
        }
        self.want_send = false;
        self.pending = Some(now);
        Some((self.peer, vec![0x50; self.size]))
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn is_done(&self) -> bool {
        self.rtts.len() >= self.count
    }
}

/// Echoes every datagram back to its sender, padded or cut to `size` bytes (same size if None).
#[derive(Debug, Clone, Default)]
pub struct Echo {
    pub size: Option<usize>,
    out: VecDeque<(SocketAddr, Vec<u8>)>,
}

impl Echo {
    /// Echo replies of exactly `size` bytes (None keeps the request's size).
    pub fn new(size: Option<usize>) -> Self {
        Echo {
            size,
            out: VecDeque::new(),
        }
    }
}

impl Node for Echo {
    fn handle_datagram(&mut self, _: Instant, from: SocketAddr, data: &[u8]) {
        let mut v = data.to_vec();
        if let Some(n) = self.size {
            v.resize(n, 0);
        }
        self.out.push_back((from, v));
    }
    fn poll_transmit(&mut self, _: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        self.out.pop_front()
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn is_done(&self) -> bool {
        true
    }
}
