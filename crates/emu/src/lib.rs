//! qfec-emu: a real-time link emulator between two network namespaces (Mahimahi's approach,
//! with qfec-sim's link stages).
//!
//! [`Emulator::start`] creates two network namespaces, a TUN device in each (`qfec0`, with
//! [`LEFT_ADDR`] on the left or server side and [`RIGHT_ADDR`] on the right or client side,
//! both /24) and one thread that moves every IP packet between the devices through a
//! [`qfec_sim::Simulator`] built from a [`LinkPair`]: `down` carries left -> right, `up`
//! right -> left, through the very stages the simulator uses (loss models, drop-tail queue,
//! rate or trace serializer or 802.11n medium, delay, jitter, schedules), in virtual time
//! that follows the monotonic clock. Sizes are IP packet sizes. A queue with ECN marking
//! marks the packets whose IP header says ECN-capable, setting CE in that header. With
//! [`EmuConfig::extra_paths`] the right device has one more address per path
//! ([`right_addr`]) and each path its own two links: packets are routed by the client side's
//! address (the source of what the right side sends, the destination of what the left side
//! sends). Programs run in the
//! namespaces through [`NetNs::command`] or, for a thread, [`NetNs::enter_current_thread`].
//!
//! [`Emulator::stop`] returns [`EmuStats`]: the link counters and the timing error, how much
//! later than its virtual due time each packet was written to its device.
//!
//! Needs root (namespaces, `/dev/net/tun`) and iproute2.

mod engine;
mod histogram;
mod ip;
mod lab_run;
mod netns;
mod tun;

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

pub use histogram::Histogram;
pub use lab_run::{BASE_PORT, EmuRun, run_spec};
pub use netns::{Listening, NetNs};
pub use qfec_lab::presets::LinkPair;
pub use qfec_sim::LinkStats;
pub use qfec_sim::wifi::WifiStats;

/// The left (server side) device's address in its namespace.
pub const LEFT_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// The right (client side) device's address in its namespace.
pub const RIGHT_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
/// The client side's address of path `k` (0: [`RIGHT_ADDR`]; more paths, from
/// [`EmuConfig::extra_paths`], get 10.77.0.10 + k on the same device).
pub fn right_addr(k: usize) -> Ipv4Addr {
    if k == 0 {
        RIGHT_ADDR
    } else {
        Ipv4Addr::new(10, 77, 0, 10 + k.min(200) as u8)
    }
}

/// The name of the TUN device inside each namespace.
pub const DEVICE: &str = "qfec0";

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// The machine lacks something the emulator needs (TUN, iproute2, privileges).
    #[error("emulation unavailable: {0}")]
    Unavailable(String),
    /// Creating or configuring the namespaces or devices failed.
    #[error("emulator setup: {0}")]
    Setup(String),
    /// What the emulator was doing, and the error (shown in the message, so not also a
    /// `source`, which would print it twice in a chain).
    #[error("{0}: {1}")]
    Io(&'static str, io::Error),
    #[error("the emulator thread panicked")]
    Panicked,
}

/// What the emulator applies.
#[derive(Debug, Clone)]
pub struct EmuConfig {
    /// `down`: left (server) -> right (client); `up`: the reverse.
    pub links: LinkPair,
    /// More paths between the two sides, each its own two links: path k (from 1) carries
    /// what goes to or comes from the client side's address [`right_addr`]`(k)`.
    pub extra_paths: Vec<LinkPair>,
    /// Seeds every random stage, as in the simulator.
    pub seed: u64,
    /// How long before each event the emulator stops sleeping and polls in a busy loop
    /// ([`DEFAULT_SPIN`]: none). On dedicated hardware a few tens of microseconds trim the
    /// kernel's wake-up latency from the timing error; on a virtual machine whose host
    /// throttles busy virtual CPUs it makes the error worse (measured: p90 from 1.5 ms to
    /// 2.5-4.8 ms with 1 ms of spin), so it is off by default.
    pub spin: Duration,
    /// Packets a direction may hold (queued, on the wire, in the delay stage) before the
    /// emulator drops what it reads for it, outside the model ([`EmuStats::dropped_overload`]).
    /// A link model with an unlimited queue is fine in virtual time, but a real sender can
    /// offer gigabits per second to it; this bounds the memory.
    pub max_in_flight: u64,
}

/// 100,000 packets: at most about 150 MB per direction.
pub const DEFAULT_MAX_IN_FLIGHT: u64 = 100_000;

/// No busy polling (see [`EmuConfig::spin`]).
pub const DEFAULT_SPIN: Duration = Duration::ZERO;

impl EmuConfig {
    /// `links` with seed 1 and [`DEFAULT_SPIN`].
    pub fn new(links: LinkPair) -> EmuConfig {
        EmuConfig {
            links,
            extra_paths: Vec::new(),
            seed: 1,
            spin: DEFAULT_SPIN,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
        }
    }
}

/// Counters of a finished emulation.
#[derive(Debug, Clone)]
pub struct EmuStats {
    /// Left -> right.
    pub down: LinkStats,
    /// Right -> left.
    pub up: LinkStats,
    /// The extra paths' (down, up) counters, in [`EmuConfig::extra_paths`]'s order.
    pub paths: Vec<(LinkStats, LinkStats)>,
    /// The 802.11n station counters of a direction that is one (MAC retries, A-MPDUs).
    pub down_wifi: Option<WifiStats>,
    pub up_wifi: Option<WifiStats>,
    /// How long the 802.11n channel was busy, when the links are one.
    pub channel_busy: Option<Duration>,
    /// Packets read from the left and right devices.
    pub read_left: u64,
    pub read_right: u64,
    /// Deliveries the kernel refused to take back.
    pub write_errors: u64,
    /// Packets read but not offered to the link because their direction held
    /// [`EmuConfig::max_in_flight`] packets already (left -> right, right -> left).
    pub dropped_overload: [u64; 2],
    /// Per delivered packet: wall-clock write time minus the virtual time it was due.
    pub lateness: Histogram,
    /// How long the emulator ran.
    pub elapsed: Duration,
}

/// A running emulator; dropping it stops the thread and deletes the namespaces.
pub struct Emulator {
    // Drop order matters: `Drop` joins the thread (closing the devices) before the
    // namespaces go.
    left: NetNs,
    right: NetNs,
    stop: OwnedFd,
    thread: Option<JoinHandle<Result<EmuStats, EmuError>>>,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Whether this machine and process can emulate: `/dev/net/tun` exists, the process holds
/// CAP_NET_ADMIN and CAP_SYS_ADMIN (root has both), and iproute2's `ip` is installed. Only a
/// missing one of these is [`EmuError::Unavailable`]; once they are there, any failure to
/// set up namespaces or devices is an error of its own ([`EmuError::Setup`]).
pub fn capability() -> Result<(), EmuError> {
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Err(EmuError::Unavailable("/dev/net/tun does not exist".into()));
    }
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| EmuError::Io("reading /proc/self/status", e))?;
    let effective = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .ok_or_else(|| EmuError::Setup("no CapEff line in /proc/self/status".into()))?;
    for (bit, name) in [(12, "CAP_NET_ADMIN"), (21, "CAP_SYS_ADMIN")] {
        if effective & (1 << bit) == 0 {
            return Err(EmuError::Unavailable(format!(
                "this process lacks {name}: run it as root"
            )));
        }
    }
    let on_path = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join("ip").is_file()));
    if !on_path {
        return Err(EmuError::Unavailable(
            "the `ip` program (iproute2) is not installed".into(),
        ));
    }
    Ok(())
}

impl Emulator {
    /// Create the namespaces and devices and start moving packets.
    pub fn start(config: EmuConfig) -> Result<Emulator, EmuError> {
        capability()?;
        netns::remove_stale();
        // Unique per process and per emulator, so parallel tests and runs never collide.
        let (pid, n) = (std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
        // The machine can emulate: from here on, any failure is an error, not "unavailable".
        let left = NetNs::create(&format!("qfec-{pid}-{n}-l"))?;
        let right = NetNs::create(&format!("qfec-{pid}-{n}-r"))?;
        let tl = tun::Tun::create(&format!("qf{pid}l{n}"))?;
        let tr = tun::Tun::create(&format!("qf{pid}r{n}"))?;
        for (tun, ns, addr) in [(&tl, &left, LEFT_ADDR), (&tr, &right, RIGHT_ADDR)] {
            // The descriptor keeps working after the device changes namespace.
            netns::ip(&["link", "set", "dev", tun.name(), "netns", ns.name()])?;
            ns.ip(&["link", "set", "dev", tun.name(), "name", DEVICE])?;
            // No IPv6 link-local address: nothing but the programs' own packets crosses
            // the link (router solicitations would count as packets, and shift drop lists).
            ns.ip(&["link", "set", "dev", DEVICE, "addrgenmode", "none"])?;
            ns.ip(&["addr", "add", &format!("{addr}/24"), "dev", DEVICE])?;
            ns.ip(&["link", "set", "dev", DEVICE, "up"])?;
        }
        // One more client-side address per extra path, on the same device (secondary
        // addresses: the first stays the default source).
        for k in 1..=config.extra_paths.len() {
            right.ip(&[
                "addr",
                "add",
                &format!("{}/24", right_addr(k)),
                "dev",
                DEVICE,
            ])?;
        }
        // SAFETY: eventfd takes no pointers; we own the result.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(EmuError::Io("eventfd", io::Error::last_os_error()));
        }
        // SAFETY: a fresh descriptor we own.
        let stop = unsafe { OwnedFd::from_raw_fd(raw) };
        let stop_rx = stop
            .try_clone()
            .map_err(|e| EmuError::Io("duplicating the stop descriptor", e))?;
        let thread = std::thread::Builder::new()
            .name("qfec-emu".into())
            .spawn(move || engine::Engine::new(&config, [tl, tr], stop_rx).run())
            .map_err(|e| EmuError::Io("spawning the emulator thread", e))?;
        Ok(Emulator {
            left,
            right,
            stop,
            thread: Some(thread),
        })
    }

    /// The server side's namespace (its device has [`LEFT_ADDR`]).
    pub fn left(&self) -> &NetNs {
        &self.left
    }

    /// The client side's namespace (its device has [`RIGHT_ADDR`]).
    pub fn right(&self) -> &NetNs {
        &self.right
    }

    /// Stop moving packets and return the counters.
    pub fn stop(mut self) -> Result<EmuStats, EmuError> {
        self.join().unwrap_or(Err(EmuError::Panicked))
    }

    fn join(&mut self) -> Option<Result<EmuStats, EmuError>> {
        let thread = self.thread.take()?;
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd.
        unsafe {
            libc::write(
                std::os::fd::AsRawFd::as_raw_fd(&self.stop),
                (&one as *const u64).cast(),
                8,
            )
        };
        Some(thread.join().unwrap_or(Err(EmuError::Panicked)))
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.join();
    }
}
