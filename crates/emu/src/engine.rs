//! The real-time loop: IP packets from the two TUN devices through a [`Simulator`] whose two
//! nodes are ports, in virtual time that follows the monotonic clock.
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

use qfec_sim::{Instant, LinkId, Node, NodeId, Simulator};

use crate::histogram::Histogram;
use crate::tun::Tun;
use crate::{EmuConfig, EmuError, EmuStats};

/// Most packets read from one device before the loop looks at deliveries again.
const READ_BURST: usize = 64;
/// Larger than any IP packet a TUN device without offloads hands us.
const MAX_PACKET: usize = 65_536;

/// One side of the emulated path inside the simulator: packets read from its TUN device
/// leave towards the other port; packets the simulator delivers to it wait to be written.
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
    fn poll_transmit(&mut self, _now: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        self.to_sim.pop_front().map(|p| (self.peer, p))
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _now: Instant) {}
}

/// The addresses the ports have inside the simulator (routing labels only).
fn port_addrs() -> [SocketAddr; 2] {
    [
        SocketAddr::from(([10, 77, 0, 1], 0)),
        SocketAddr::from(([10, 77, 0, 2], 0)),
    ]
}

pub(crate) struct Engine {
    sim: Simulator<Port>,
    /// Left (server side, index 0) and right (client side, index 1).
    ports: [NodeId; 2],
    tuns: [Tun; 2],
    down: LinkId,
    up: LinkId,
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
        let (links, seed) = (&config.links, config.seed);
        let [l, r] = port_addrs();
        let mut sim = Simulator::new(seed);
        let port = |peer| Port {
            peer,
            to_sim: VecDeque::new(),
            to_tun: VecDeque::new(),
        };
        let left = sim.add_node(l, port(r));
        let right = sim.add_node(r, port(l));
        // down carries left -> right (server -> client), up the reverse.
        let (down, up) = links.install(&mut sim, l, r);
        Engine {
            sim,
            ports: [left, right],
            tuns,
            down,
            up,
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
                    if self.in_flight(side) >= self.max_in_flight {
                        self.overload[side] += 1;
                        continue;
                    }
                    let id = self.ports[side];
                    self.sim.node_mut(id).to_sim.push_back(buf[..n].to_vec());
                    self.sim.wake(id);
                    self.flush(&vnow);
                }
            }
        }
        let elapsed = Duration::from_nanos(vnow().as_nanos());
        Ok(EmuStats {
            down: self.sim.link_stats(self.down).clone(),
            up: self.sim.link_stats(self.up).clone(),
            down_wifi: self.sim.wifi_stats(self.down).cloned(),
            up_wifi: self.sim.wifi_stats(self.up).cloned(),
            channel_busy: self
                .sim
                .wifi_channel_stats(self.down)
                .map(|c| Duration::from_nanos(c.busy_ns)),
            read_left: self.read[0],
            read_right: self.read[1],
            write_errors: self.write_errors,
            dropped_overload: self.overload,
            lateness: self.lateness,
            elapsed,
        })
    }

    /// Packets offered to the direction leaving `side` and not yet delivered or dropped.
    fn in_flight(&self, side: usize) -> u64 {
        let s = self
            .sim
            .link_stats(if side == 0 { self.down } else { self.up });
        s.offered_packets
            .saturating_sub(s.delivered_packets)
            .saturating_sub(s.dropped())
    }

    /// Write every delivered packet to its side's device, recording how late it is.
    fn flush(&mut self, vnow: &dyn Fn() -> Instant) {
        for side in 0..2 {
            let id = self.ports[side];
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
