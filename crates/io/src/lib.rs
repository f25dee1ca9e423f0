//! qfec-io: drives a sans-IO [`qfec_proto::Endpoint`] over a real UDP socket with tokio.
//!
//! The driver owns the socket and the endpoint; the application is the core's sans-IO
//! [`Application`], called after every batch of input, the same one the lab's simulator
//! drives. One task, no locks: the protocol core is cheap to call and the hot path stays short.

mod clock;
mod udp;

pub use clock::Clock;
use udp::UdpIo;

use std::io;
use std::net::SocketAddr;

pub use qfec_proto::Application;
use qfec_proto::{Endpoint, EndpointSecrets, Instant};

/// Endpoint secrets from the operating system's random source: what every endpoint on a
/// real network must use, so that no two processes share reset or token keys.
pub fn os_secrets() -> io::Result<EndpointSecrets> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 96];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| io::Error::other("the operating system's random source failed"))?;
    Ok(EndpointSecrets::from_bytes(bytes))
}

/// Largest batch of datagrams handed to the kernel at once (GSO segments).
const MAX_GSO_SEGMENTS: usize = 16;

/// Socket-level counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DriverStats {
    pub rx_datagrams: u64,
    pub tx_datagrams: u64,
    /// Send system calls (one per GSO batch).
    pub tx_calls: u64,
}

/// A UDP socket plus a QUIC endpoint, driven by tokio.
pub struct Driver {
    io: UdpIo,
    pub endpoint: Endpoint,
    clock: Clock,
    recv_buf: bytes::BytesMut,
    stats: DriverStats,
    send_buf: Vec<u8>,
    /// The socket talks to one peer: its refusal ends the run.
    connected: bool,
}

impl Driver {
    pub fn bind(addr: SocketAddr, endpoint: Endpoint) -> io::Result<Self> {
        Self::from_std(std::net::UdpSocket::bind(addr)?, endpoint)
    }

    /// Drives `endpoint` over a socket bound elsewhere: sockets keep the network namespace
    /// they were made in, so one thread can drive endpoints of several namespaces.
    pub fn from_std(socket: std::net::UdpSocket, endpoint: Endpoint) -> io::Result<Self> {
        Ok(Driver {
            io: UdpIo::from_std(socket)?,
            endpoint,
            clock: Clock::new(),
            recv_buf: bytes::BytesMut::new(),
            stats: DriverStats::default(),
            send_buf: Vec::with_capacity(65536),
            connected: false,
        })
    }

    /// Talks to `remote` only, so that an ICMP port unreachable from it is noticed: `run`
    /// then fails with [`io::ErrorKind::ConnectionRefused`] instead of waiting for timers.
    /// For clients of a single server.
    pub fn connect(&mut self, remote: SocketAddr) -> io::Result<()> {
        self.io.connect(remote)?;
        self.connected = true;
        Ok(())
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    pub fn stats(&self) -> DriverStats {
        self.stats
    }

    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Runs on `clock` instead of the driver's own, so that the times of several drivers
    /// (flows measured together) share one origin. Call before [`run`](Self::run).
    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    /// Runs until the application breaks out.
    pub async fn run<A: Application>(&mut self, app: &mut A) -> io::Result<()> {
        loop {
            let now = self.clock.now();
            // Input first: everything the socket holds now.
            let mut received = 0;
            while received < 256 {
                match self.io.try_recv_buf(&mut self.recv_buf) {
                    Ok(Some((mut batch, info, segment))) => {
                        received += 1;
                        let seg = segment.unwrap_or(batch.len()).max(1);
                        while !batch.is_empty() {
                            let datagram = batch.split_to(seg.min(batch.len()));
                            self.stats.rx_datagrams += 1;
                            self.endpoint.handle_buf(now, info, datagram);
                        }
                    }
                    Ok(None) => break,
                    Err(e) if is_transient(&e) => break,
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused && !self.connected => {
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            let now = self.clock.now();
            if self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
                self.endpoint.handle_timeout(now);
            }
            if app.poll(now, &mut self.endpoint).is_break() {
                self.flush(now).await?;
                return Ok(());
            }
            self.flush(now).await?;
            // Wait for input or the next timer.
            let timeout = [self.endpoint.poll_timeout(), app.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            if received > 0 {
                continue;
            }
            let sleep = timeout.map(|t| self.clock.to_std(t));
            tokio::select! {
                r = self.io.readable() => r?,
                _ = async {
                    match sleep {
                        Some(t) => tokio::time::sleep_until(t.into()).await,
                        None => std::future::pending::<()>().await,
                    }
                } => {}
            }
        }
    }

    /// Sends everything the endpoint has ready.
    async fn flush(&mut self, now: Instant) -> io::Result<()> {
        let segments = if self.io.gso_supported() {
            MAX_GSO_SEGMENTS
        } else {
            1
        };
        loop {
            self.send_buf.clear();
            let Some(t) = self
                .endpoint
                .poll_transmit(now, segments, &mut self.send_buf)
            else {
                return Ok(());
            };
            let data = &self.send_buf[..t.size];
            self.stats.tx_datagrams +=
                t.size.div_ceil(t.segment_size.unwrap_or(t.size).max(1)) as u64;
            self.stats.tx_calls += 1;
            loop {
                match self
                    .io
                    .send(t.destination, t.source, t.ecn, data, t.segment_size)
                    .await
                {
                    Ok(()) => break,
                    Err(e) if is_transient(&e) => continue,
                    // A peer that went away (ICMP unreachable) must not stop a server.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused && !self.connected => {
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}
