//! The real-time loop: IP packets from the two TUN devices through a [`Simulator`] whose
//! nodes are ports (two per path: the path's left and right end), in virtual time that
//! follows the monotonic clock. A packet's path is its client-side address: the source of
//! what the right device sends, the destination of what the left device sends
//! ([`crate::right_addr`]); anything else takes path 0.
//!
//! Virtual time is nanoseconds since the loop started. Before anything else happens at wall
//! time t the simulator is run up to t, so the link stages see packets in the order and at
//! the times they were read; a delivery due at virtual time d is written once the loop has
//! caught up with d, and the difference between that write and d is the timing error.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use qfec_sim::{DatagramInfo, EcnCodepoint, Instant, LinkId, Node, NodeId, Outgoing, Simulator};

use crate::histogram::Histogram;
use crate::tun::Tun;
use crate::{EmuConfig, EmuError, EmuStats};

/// Most packets read from one device before the loop looks at deliveries again.
const READ_BURST: usize = 64;
/// Larger than any IP packet a TUN device without offloads hands us.
const MAX_PACKET: usize = 65_536;

/// One side of the emulated path inside the simulator: packets read from its TUN device
/// leave towards the other port with their IP header's ECN codepoint (so a marking queue
/// sees which are ECN-capable); packets the simulator delivers to it wait to be written,
/// marked CE in their header when a queue marked them.
struct Port {
    peer: SocketAddr,
    to_sim: VecDeque<Vec<u8>>,
    /// (virtual time due, packet), in delivery order.
    to_tun: VecDeque<(Instant, Vec<u8>)>,
}

impl Node for Port {
    fn handle_datagram(&mut self, now: Instant, _from: SocketAddr, data: &[u8]) {
        self.to_tun.push_back((now, data.to_vec()));
    }
    fn handle_datagram_info(&mut self, now: Instant, info: DatagramInfo, data: &[u8]) {
        let mut packet = data.to_vec();
        if info.ecn == Some(EcnCodepoint::Ce) {
            crate::ip::set_ce(&mut packet);
        }
        self.to_tun.push_back((now, packet));
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        self.poll_outgoing(now).map(|o| (o.to, o.data))
    }
    fn poll_outgoing(&mut self, _now: Instant) -> Option<Outgoing> {
        let data = self.to_sim.pop_front()?;
        Some(Outgoing {
            from: None,
            to: self.peer,
            ecn: crate::ip::ecn_of(&data),
            data,
        })
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _now: Instant) {}
}

/// The addresses path `k`'s ports have inside the simulator (routing labels only).
fn port_addrs(k: usize) -> [SocketAddr; 2] {
    let k = k.min(250) as u8;
    [
        SocketAddr::from(([10, 77, k, 1], 0)),
        SocketAddr::from(([10, 77, k, 2], 0)),
    ]
}

/// The path of an IPv4 packet read from device `side` (0 left, 1 right): the index of the
/// client-side address it carries among `rights`, else 0.
fn path_of(packet: &[u8], side: usize, rights: &[std::net::Ipv4Addr]) -> usize {
    if packet.len() < 20 || packet[0] >> 4 != 4 {
        return 0;
    }
    // The right side's address: the source of what it sends, the destination of what the
    // left side sends.
    let at = if side == 1 { 12 } else { 16 };
    let addr = std::net::Ipv4Addr::new(packet[at], packet[at + 1], packet[at + 2], packet[at + 3]);
    rights.iter().position(|a| *a == addr).unwrap_or(0)
}

pub(crate) struct Engine {
    sim: Simulator<Port>,
    /// Per path: its left (server side, index 0) and right (client side, index 1) port.
    ports: Vec<[NodeId; 2]>,
    tuns: [Tun; 2],
    /// Per path: its down and up link.
    links: Vec<(LinkId, LinkId)>,
    /// The client side's address of each path.
    rights: Vec<std::net::Ipv4Addr>,
    stop: OwnedFd,
    spin: Duration,
    max_in_flight: u64,
    overload: [u64; 2],
    lateness: Histogram,
    read: [u64; 2],
    write_errors: u64,
}

impl Engine {
    pub(crate) fn new(config: &EmuConfig, tuns: [Tun; 2], stop: OwnedFd) -> Engine {
        let mut sim = Simulator::new(config.seed);
        let port = |peer| Port {
            peer,
            to_sim: VecDeque::new(),
            to_tun: VecDeque::new(),
        };
        let (mut ports, mut links) = (Vec::new(), Vec::new());
        for (k, pair) in std::iter::once(&config.links)
            .chain(&config.extra_paths)
            .enumerate()
        {
            let [l, r] = port_addrs(k);
            let left = sim.add_node(l, port(r));
            let right = sim.add_node(r, port(l));
            // down carries left -> right (server -> client), up the reverse.
            links.push(pair.install(&mut sim, l, r));
            ports.push([left, right]);
        }
        let rights = (0..ports.len()).map(crate::right_addr).collect();
        Engine {
            sim,
            ports,
            tuns,
            links,
            rights,
            stop,
            spin: config.spin,
            max_in_flight: config.max_in_flight,
            overload: [0; 2],
            lateness: Histogram::default(),
            read: [0; 2],
            write_errors: 0,
        }
    }

    /// Move packets until the stop descriptor becomes readable.
    pub(crate) fn run(mut self) -> Result<EmuStats, EmuError> {
        // The kernel may otherwise stretch our sleeps by its default 50 us slack.
        // SAFETY: PR_SET_TIMERSLACK takes a value, no pointers; it affects this thread only.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        let origin = std::time::Instant::now();
        let vnow = || Instant::from_nanos(origin.elapsed().as_nanos() as u64);
        let mut buf = vec![0u8; MAX_PACKET];
        loop {
            self.sim.run_until(vnow());
            self.flush(&vnow);
            // Sleep until `spin` before the next event, then poll without sleeping (see
            // `EmuConfig::spin`).
            let timeout = self.sim.next_event_time().map(|t| {
                let d = t.as_nanos().saturating_sub(vnow().as_nanos());
                Duration::from_nanos(d.saturating_sub(self.spin.as_nanos() as u64))
            });
            if self.wait(timeout)? {
                break;
            }
            for side in 0..2 {
                for _ in 0..READ_BURST {
                    let n = match self.tuns[side].recv(&mut buf) {
                        Ok(Some(n)) => n,
                        Ok(None) => break,
                        Err(e) => return Err(EmuError::Io("reading a TUN device", e)),
                    };
                    self.read[side] += 1;
                    // Earlier events first, then this packet enters at the time it was read.
                    self.sim.run_until(vnow());
                    let path = path_of(&buf[..n], side, &self.rights);
                    if self.in_flight(path, side) >= self.max_in_flight {
                        self.overload[side] += 1;
                        continue;
                    }
                    let id = self.ports[path][side];
                    self.sim.node_mut(id).to_sim.push_back(buf[..n].to_vec());
                    self.sim.wake(id);
                    self.flush(&vnow);
                }
            }
        }
        let elapsed = Duration::from_nanos(vnow().as_nanos());
        let (down, up) = self.links[0];
        Ok(EmuStats {
            down: self.sim.link_stats(down).clone(),
            up: self.sim.link_stats(up).clone(),
            paths: (self.links[1..].iter())
                .map(|&(d, u)| {
                    (
                        self.sim.link_stats(d).clone(),
                        self.sim.link_stats(u).clone(),
                    )
                })
                .collect(),
            down_wifi: self.sim.wifi_stats(down).cloned(),
            up_wifi: self.sim.wifi_stats(up).cloned(),
            channel_busy: self
                .sim
                .wifi_channel_stats(down)
                .map(|c| Duration::from_nanos(c.busy_ns)),
            read_left: self.read[0],
            read_right: self.read[1],
            write_errors: self.write_errors,
            dropped_overload: self.overload,
            lateness: self.lateness,
            elapsed,
        })
    }

    /// Packets offered to `path`'s direction leaving `side` and not yet delivered or dropped.
    fn in_flight(&self, path: usize, side: usize) -> u64 {
        let (down, up) = self.links[path];
        let s = self.sim.link_stats(if side == 0 { down } else { up });
        s.offered_packets
            .saturating_sub(s.delivered_packets)
            .saturating_sub(s.dropped())
    }

    /// Write every delivered packet to its side's device, recording how late it is.
    fn flush(&mut self, vnow: &dyn Fn() -> Instant) {
        for (path, side) in (0..self.ports.len()).flat_map(|p| [(p, 0), (p, 1)]) {
            let id = self.ports[path][side];
            while let Some((due, pkt)) = self.sim.node_mut(id).to_tun.pop_front() {
                // A packet the kernel refuses (malformed, device down) is lost like on a
                // real link; counting it is all we can do.
                if self.tuns[side].send(&pkt).is_err() {
                    self.write_errors += 1;
                }
                let late = vnow().as_nanos().saturating_sub(due.as_nanos());
                self.lateness.record(Duration::from_nanos(late));
            }
        }
    }

    /// Sleep until a device is readable, `timeout` passes (None: no limit) or stop is
    /// asked; true when asked to stop.
    fn wait(&self, timeout: Option<Duration>) -> Result<bool, EmuError> {
        let ev = libc::POLLIN;
        let mut fds = [
            libc::pollfd {
                fd: self.tuns[0].as_raw_fd(),
                events: ev,
                revents: 0,
            },
            libc::pollfd {
                fd: self.tuns[1].as_raw_fd(),
                events: ev,
                revents: 0,
            },
            libc::pollfd {
                fd: self.stop.as_raw_fd(),
                events: ev,
                revents: 0,
            },
        ];
        let ts = timeout.map(|d| libc::timespec {
            tv_sec: d.as_secs() as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        });
        let tsp = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: three valid pollfds and an optional timespec that outlive the call; ppoll
        // gives nanosecond timeouts where poll has milliseconds.
        let n = unsafe { libc::ppoll(fds.as_mut_ptr(), 3, tsp, std::ptr::null()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(EmuError::Io("waiting for packets", e));
        }
        for f in &fds[..2] {
            if f.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                return Err(EmuError::Io(
                    "a TUN device",
                    io::Error::other("device failed or went away"),
                ));
            }
        }
        Ok(fds[2].revents != 0)
    }
}
