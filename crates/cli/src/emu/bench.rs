//! `qfec emu bench`: the emulator's own limits on this machine. A UDP sender in the server
//! namespace offers a constant rate through a link with only a delay (no rate limit, no
//! loss, an unlimited queue), a receiver in the client namespace counts what arrives, and the
//! emulator reports how late it wrote each packet. The highest offered rate that arrives
//! whole is the rate it sustains; the lateness percentiles are the timing error it adds.

use std::net::{SocketAddr, UdpSocket};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use qfec_emu::{EmuConfig, Emulator, LEFT_ADDR, LinkPair, RIGHT_ADDR};
use qfec_lab::units::{parse_duration, parse_list, parse_rate};
use qfec_sim::{LinkSpec, QueueLimit};

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Offered rates, a list of rates ("10Mbit", "1Gbit") or "max" (as fast as one sending
    /// thread can).
    #[arg(long, default_value = "10Mbit,100Mbit,500Mbit,1Gbit,max")]
    rates: String,
    /// How long each rate is offered.
    #[arg(long, default_value = "3s")]
    duration: String,
    /// The link's one-way delay.
    #[arg(long, default_value = "10ms")]
    delay: String,
    /// IP packet size in bytes (UDP payload plus 28 bytes of headers).
    #[arg(long, default_value_t = 1428)]
    size: usize,
}

const PORT: u16 = 9100;
/// How often the sender tops up to its rate.
const TICK: Duration = Duration::from_micros(500);

/// One offered rate's outcome.
struct Row {
    offered: Option<f64>,
    sent_bps: f64,
    sent: u64,
    delivered_bps: f64,
    received: u64,
    overload: u64,
    /// Packets the sender's kernel dropped because the emulator had not read its device's
    /// queue in time (the left device's tx_dropped).
    device_drops: u64,
    /// Packets the receiver's kernel dropped because its socket buffer was full (UDP
    /// RcvbufErrors in the right namespace).
    socket_drops: u64,
    late: [Duration; 4],
}

pub fn run(args: BenchArgs) -> Result<ExitCode> {
    let rates = parse_list(&args.rates, |s| {
        if s == "max" {
            Ok(None)
        } else {
            parse_rate(s).map(|r| Some(r as f64))
        }
    })
    .map_err(|e| anyhow::anyhow!("--rates: {e}"))?;
    let duration =
        parse_duration(&args.duration).map_err(|e| anyhow::anyhow!("--duration: {e}"))?;
    let delay = parse_duration(&args.delay).map_err(|e| anyhow::anyhow!("--delay: {e}"))?;
    if !(100..=1500).contains(&args.size) {
        bail!("--size: give an IP packet size of 100 to 1500 bytes (the devices' MTU is 1500)");
    }
    println!(
        "{:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9}",
        "offered",
        "sent",
        "delivered",
        "lost %",
        "device",
        "socket",
        "overload",
        "late p50",
        "late p90",
        "late p99",
        "late p999"
    );
    for rate in rates {
        let r = measure(rate, duration, delay, args.size)?;
        let mbps = |b: f64| format!("{:.1}", b / 1e6);
        let us = |d: Duration| format!("{} us", d.as_micros());
        println!(
            "{:>10} {:>10} {:>10} {:>8.3} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9}",
            r.offered.map_or("max".to_string(), mbps),
            mbps(r.sent_bps),
            mbps(r.delivered_bps),
            100.0 * (r.sent - r.received.min(r.sent)) as f64 / r.sent.max(1) as f64,
            r.device_drops,
            r.socket_drops,
            r.overload,
            us(r.late[0]),
            us(r.late[1]),
            us(r.late[2]),
            us(r.late[3]),
        );
    }
    println!(
        "rates in Mb/s of IP packets of {} bytes; lost = sent but not received, of which \
         device = dropped by the sender's kernel before the emulator read them, socket = \
         dropped by the receiver's kernel (full socket buffer), overload = dropped by the \
         emulator outside the model; late = write time minus due time",
        args.size
    );
    Ok(ExitCode::SUCCESS)
}

fn measure(rate: Option<f64>, duration: Duration, delay: Duration, size: usize) -> Result<Row> {
    let link = |name: &str| LinkSpec::new(name, 0, delay).queue(QueueLimit::Unlimited);
    let emu = Emulator::start(EmuConfig::new(LinkPair {
        down: link("down"),
        up: link("up"),
    }))?;
    let rx = emu.right().within(|| {
        let s = UdpSocket::bind(SocketAddr::from((RIGHT_ADDR, PORT)))?;
        // As a QUIC driver does (qfec-io): room for the bursts a late wake-up releases.
        set_receive_buffer(&s, 8 << 20);
        s.set_read_timeout(Some(delay * 2 + Duration::from_millis(300)))?;
        Ok::<_, std::io::Error>(s)
    })??;
    let tx = emu.left().within(|| {
        let s = UdpSocket::bind(SocketAddr::from((LEFT_ADDR, 0)))?;
        s.connect(SocketAddr::from((RIGHT_ADDR, PORT)))?;
        Ok::<_, std::io::Error>(s)
    })??;
    let payload = vec![0u8; size - 28];
    let (sent, sent_for, received, span) = std::thread::scope(|s| {
        let receiver = s.spawn(|| {
            let mut buf = vec![0u8; 2048];
            let (mut n, mut first, mut last) = (0u64, None, None);
            while rx.recv(&mut buf).is_ok() {
                let now = Instant::now();
                first.get_or_insert(now);
                last = Some(now);
                n += 1;
            }
            (n, first.zip(last).map(|(a, b)| b - a))
        });
        let start = Instant::now();
        let mut sent = 0u64;
        while start.elapsed() < duration {
            let due = match rate {
                Some(r) => (start.elapsed().as_secs_f64() * r / (size as f64 * 8.0)) as u64,
                None => sent + 64,
            };
            while sent < due {
                // A full device queue drops silently; the count then shows the loss.
                let _ = tx.send(&payload);
                sent += 1;
            }
            if rate.is_some() {
                std::thread::sleep(TICK);
            }
        }
        let sent_for = start.elapsed();
        let (received, span) = receiver.join().expect("receiver thread");
        (sent, sent_for, received, span)
    });
    let device_drops = cat_in(emu.left(), "/sys/class/net/qfec0/statistics/tx_dropped")
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let socket_drops = udp_rcvbuf_errors(emu.right()).unwrap_or(0);
    let stats = emu.stop().context("the emulator failed")?;
    let bits = |n: u64| (n * size as u64 * 8) as f64;
    Ok(Row {
        offered: rate,
        sent_bps: bits(sent) / sent_for.as_secs_f64(),
        sent,
        delivered_bps: span.map_or(0.0, |d| bits(received) / d.as_secs_f64().max(1e-9)),
        received,
        overload: stats.dropped_overload[0],
        device_drops,
        socket_drops,
        late: [0.5, 0.9, 0.99, 0.999].map(|q| stats.lateness.percentile(q)),
    })
}

fn set_receive_buffer(s: &UdpSocket, bytes: libc::c_int) {
    use std::os::fd::AsRawFd;
    let set = |opt| {
        // SAFETY: setsockopt reads one c_int from a live local for this socket's descriptor.
        unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&bytes as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        }
    };
    // The FORCE variant passes the system maximum when privileged (the emulator needs root).
    if set(libc::SO_RCVBUFFORCE) != 0 {
        set(libc::SO_RCVBUF);
    }
}

/// The contents of `path` as seen inside `ns` (`ip netns exec` mounts its own sysfs).
fn cat_in(ns: &qfec_emu::NetNs, path: &str) -> Option<String> {
    let o = ns.command("cat").arg(path).output().ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}

/// UDP RcvbufErrors of `ns` (/proc/net/snmp: a header line and a value line).
fn udp_rcvbuf_errors(ns: &qfec_emu::NetNs) -> Option<u64> {
    let text = cat_in(ns, "/proc/net/snmp")?;
    let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next()?, udp.next()?);
    let i = names.split_whitespace().position(|n| n == "RcvbufErrors")?;
    values.split_whitespace().nth(i)?.parse().ok()
}
