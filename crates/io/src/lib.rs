//! qfec-io: drives a sans-IO [`qfec_proto::Endpoint`] over a real UDP socket with tokio.
//!
//! The driver owns the socket and the endpoint; the application is the core's sans-IO
//! [`Application`], called after every batch of input, the same one the lab's simulator
//! drives. One task, no locks: the protocol core is cheap to call and the hot path stays short.

mod clock;
pub mod mtu;
mod udp;

pub use clock::Clock;
use udp::UdpIo;

use std::io;
use std::net::SocketAddr;

pub use qfec_proto::Application;
use qfec_proto::{ConnectionHandle, Endpoint, EndpointSecrets, Instant, MigrateError};

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
    /// Datagrams larger than the interface carries (EMSGSIZE: PMTU probes above it),
    /// dropped as the network would.
    pub tx_oversize: u64,
}

/// A move of the driver's connections to a new socket ([`Driver::migrate_at`]).
#[derive(Debug)]
pub struct Migration {
    /// When it happened.
    pub at: Instant,
    /// The local address left and the one taken.
    pub from: SocketAddr,
    pub to: SocketAddr,
    /// Per connection: whether it migrated (new connection ID, path validation) or only
    /// follows the new socket as after a NAT rebinding, and why.
    pub connections: Vec<(ConnectionHandle, Result<(), MigrateError>)>,
}

/// A UDP socket plus a QUIC endpoint, driven by tokio.
pub struct Driver {
    io: UdpIo,
    pub endpoint: Endpoint,
    clock: Clock,
    recv_buf: bytes::BytesMut,
    stats: DriverStats,
    send_buf: Vec<u8>,
    /// The one peer the socket talks to: its refusal ends the run.
    connected: Option<SocketAddr>,
    /// A socket to move to, and when.
    pending_migration: Option<(Instant, std::net::UdpSocket)>,
    migrations: Vec<Migration>,
    /// A second socket of a server's (its preferred address, RFC 9000 §9.6): datagrams
    /// come in on it too, and leave from it when a path's local address is its.
    second: Option<(UdpIo, SocketAddr)>,
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
            connected: None,
            pending_migration: None,
            migrations: Vec::new(),
            second: None,
        })
    }

    /// Receives on `socket` as well (a server's preferred address, the address of its
    /// `ServerConfig::preferred_address`): its datagrams go to the same endpoint, and
    /// replies to them leave from it.
    pub fn add_socket(&mut self, socket: std::net::UdpSocket) -> io::Result<()> {
        let io = UdpIo::from_std(socket)?;
        let addr = io.local_addr()?;
        self.second = Some((io, addr));
        Ok(())
    }

    /// Talks to `remote` only, so that an ICMP port unreachable from it is noticed: `run`
    /// then fails with [`io::ErrorKind::ConnectionRefused`] instead of waiting for timers.
    /// For clients of a single server.
    pub fn connect(&mut self, remote: SocketAddr) -> io::Result<()> {
        self.io.connect(remote)?;
        self.connected = Some(remote);
        Ok(())
    }

    /// At `at`, or once every connection's handshake is confirmed if that is later, moves
    /// every connection to `socket` (a client's active migration, RFC 9000 §9.2):
    /// datagrams leave from it from then on, the old socket is closed, and each
    /// connection, told its new local address, validates the path under a new connection
    /// ID ([`qfec_proto::Connection::migrate`]). What happened is in
    /// [`migrations`](Self::migrations).
    pub fn migrate_at(&mut self, at: Instant, socket: std::net::UdpSocket) {
        self.pending_migration = Some((at, socket));
    }

    /// The migrations done so far.
    pub fn migrations(&self) -> &[Migration] {
        &self.migrations
    }

    fn migrate_now(&mut self, now: Instant, socket: std::net::UdpSocket) -> io::Result<()> {
        let io = UdpIo::from_std(socket)?;
        if let Some(remote) = self.connected {
            io.connect(remote)?;
        }
        let from = self.io.local_addr()?;
        let to = io.local_addr()?;
        self.io = io;
        let mut connections = Vec::new();
        for h in self.endpoint.handles() {
            let Some(conn) = self.endpoint.connection_mut(h) else {
                continue;
            };
            let result = conn.migrate(now, to);
            if result.is_err() {
                // Packets leave from the new socket all the same.
                conn.set_local_address(to);
            }
            connections.push((h, result));
        }
        self.migrations.push(Migration {
            at: now,
            from,
            to,
            connections,
        });
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
            // Input first: everything the sockets hold now.
            let mut received = self.receive(now, false)?;
            if self.second.is_some() {
                received += self.receive(now, true)?;
            }
            let now = self.clock.now();
            // Not before the handshake is confirmed (RFC 9000 §9).
            if self
                .pending_migration
                .as_ref()
                .is_some_and(|(at, _)| *at <= now)
                && self.endpoint.handles().into_iter().all(|h| {
                    self.endpoint
                        .connection(h)
                        .is_none_or(|c| c.handshake_confirmed() || c.is_closed())
                })
                && let Some((_, socket)) = self.pending_migration.take()
            {
                self.migrate_now(now, socket)?;
            }
            if self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
                self.endpoint.handle_timeout(now);
            }
            if app.poll(now, &mut self.endpoint).is_break() {
                self.flush(now).await?;
                return Ok(());
            }
            self.flush(now).await?;
            // Wait for input or the next timer.
            let timeout = [
                self.endpoint.poll_timeout(),
                app.poll_timeout(),
                self.pending_migration
                    .as_ref()
                    .map(|(at, _)| *at)
                    .filter(|at| *at > now),
            ]
            .into_iter()
            .flatten()
            .min();
            if received > 0 {
                continue;
            }
            let sleep = timeout.map(|t| self.clock.to_std(t));
            tokio::select! {
                r = self.io.readable() => r?,
                r = async {
                    match &self.second {
                        Some((io, _)) => io.readable().await,
                        None => std::future::pending().await,
                    }
                } => r?,
                _ = async {
                    match sleep {
                        Some(t) => tokio::time::sleep_until(t.into()).await,
                        None => std::future::pending::<()>().await,
                    }
                } => {}
            }
        }
    }

    /// Hands what a socket (the second one with `second`) holds now to the endpoint, at most
    /// 256 batches; returns how many.
    fn receive(&mut self, now: Instant, second: bool) -> io::Result<usize> {
        let mut received = 0;
        while received < 256 {
            let io = match (&self.second, second) {
                (Some((io, _)), true) => io,
                _ => &self.io,
            };
            match io.try_recv_buf(&mut self.recv_buf) {
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
                Err(e)
                    if e.kind() == io::ErrorKind::ConnectionRefused && self.connected.is_none() =>
                {
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(received)
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
            if let Some(c) = self.connected
                && c != t.destination
            {
                // The connection moved to another server address (its preferred one, or
                // back): the socket follows, so that the kernel lets its answers in.
                self.io.connect(t.destination)?;
                self.connected = Some(t.destination);
            }
            // From the second socket when the path's local address is its.
            let io = match (&mut self.second, t.source) {
                (Some((io, bound)), Some(src)) if same_socket(*bound, src) => io,
                _ => &mut self.io,
            };
            loop {
                match io
                    .send(t.destination, t.source, t.ecn, data, t.segment_size)
                    .await
                {
                    Ok(()) => break,
                    Err(e) if is_transient(&e) => continue,
                    // Larger than the interface carries (a PMTU probe above it): lost,
                    // as the network would lose it.
                    Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
                        self.stats.tx_oversize += 1;
                        break;
                    }
                    // A peer that went away (ICMP unreachable) must not stop a server.
                    Err(e)
                        if e.kind() == io::ErrorKind::ConnectionRefused
                            && self.connected.is_none() =>
                    {
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }
}

/// Whether a datagram from `source` leaves from a socket bound to `bound` (its port, and
/// its IP unless it is a wildcard).
fn same_socket(bound: SocketAddr, source: SocketAddr) -> bool {
    bound.port() == source.port() && (bound.ip().is_unspecified() || bound.ip() == source.ip())
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}
