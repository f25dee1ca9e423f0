//! `qfec emu`: run a server and a client in two network namespaces joined by an emulated
//! link (qfec-emu), then report what the link did; `qfec emu agree` compares the emulator
//! with the simulator; `qfec emu reproduce kharat` runs paper 004's evaluation.

mod agree;
mod bench;
mod kharat;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use qfec_emu::{EmuConfig, EmuStats, Emulator, LEFT_ADDR, LinkStats, RIGHT_ADDR, WifiStats};
use qfec_lab::units::{parse_duration, parse_ratio};
use qfec_lab::{Preset, Scenario};
use qfec_sim::{Jitter, LinkSpec, LossSpec, QueueLimit, Serializer};

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct EmuArgs {
    #[command(subcommand)]
    command: Option<EmuCommand>,
    /// Scenario file (TOML) whose links to emulate; its workload, if any, is not used.
    scenario: Option<PathBuf>,
    /// Link preset instead of a scenario file (wlan, 4g, 3g, satellite, da2gc, mss, interop,
    /// wlan-n; see `qfec lab presets`).
    #[arg(long)]
    preset: Option<String>,
    /// Random loss on each direction, "2%" or 0.02 (the preset's loss parameter; default
    /// its mid-range; for wlan-n the MPDU error rate).
    #[arg(long)]
    loss: Option<String>,
    /// Seed of the link's random stages (default: the scenario's first seed, or 1).
    #[arg(long)]
    seed: Option<u64>,
    /// Shell command run in the server namespace (address 10.77.0.1, also in
    /// $QFEC_EMU_SERVER) before the client starts; stopped once the client exits.
    #[arg(long, value_name = "CMD")]
    server: Option<String>,
    /// When the client may start: `listening` (once a UDP socket is bound or a TCP socket
    /// listens in the server namespace, at most 30 s), or after a fixed DURATION (e.g. 2s) for
    /// a server that listens before it is ready.
    #[arg(long, default_value = "listening", value_name = "listening|DURATION")]
    server_wait: String,
    /// Busy-poll this long before each packet is due (trades a core for timing accuracy on
    /// dedicated hardware; see qfec-emu's EmuConfig::spin), e.g. 50us.
    #[arg(long, value_name = "DURATION")]
    spin: Option<String>,
    /// The client command and its arguments, run in the client namespace (address
    /// 10.77.0.2); the server's address is in $QFEC_EMU_SERVER.
    #[arg(last = true, required = true, value_name = "CLIENT")]
    client: Vec<String>,
}

#[derive(Subcommand, Debug)]
enum EmuCommand {
    /// Run the same downloads in the simulator and through the emulator on real sockets
    /// (interop, wlan at 0 and 2 % loss, wlan+4g over two paths) and compare their median
    /// completion times.
    Agree(agree::AgreeArgs),
    /// The emulator's own limits on this machine: the rate it sustains and the timing error
    /// it adds, for constant-rate UDP through a delay-only link.
    Bench(bench::BenchArgs),
    /// A paper's evaluation through the emulator with real endpoints, written as a report
    /// directory (runs.csv, report.md, SVG figures).
    #[command(subcommand)]
    Reproduce(EmuPaper),
}

#[derive(Subcommand, Debug)]
enum EmuPaper {
    /// Paper 004 (Kharat et al.): QUIC vs kernel TCP (HTTP/2) over WiFi-like links, alone and
    /// competing (2 QUIC + 2 TCP): throughput, speedup, Jain's fairness index; with FEC too.
    Kharat(kharat::KharatArgs),
}

/// Build the links from the arguments, with messages that say how to fix them.
fn config(args: &EmuArgs) -> Result<EmuConfig> {
    let loss = args
        .loss
        .as_deref()
        .map(parse_ratio)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--loss: {e}"))?;
    let (links, extra_paths, seed) = match (&args.scenario, &args.preset) {
        (Some(_), Some(_)) => bail!("give a scenario file or --preset, not both"),
        (None, None) => {
            bail!("give a scenario file or --preset NAME (see `qfec lab presets`)")
        }
        (None, Some(name)) => {
            let p = Preset::from_name(name).map_err(|e| anyhow::anyhow!("--preset: {e}"))?;
            (p.links(loss), Vec::new(), 1)
        }
        (Some(path), None) => {
            let s = load_links_only(path)?;
            let links = match loss {
                Some(_) if s.preset.is_none() => bail!(
                    "--loss needs a preset in the scenario; set link.down.loss and \
                     link.up.loss in {} instead",
                    path.display()
                ),
                Some(p) => s.links.with_loss(p),
                None => s.links,
            };
            (links, s.extra_paths, s.seeds.first().copied().unwrap_or(1))
        }
    };
    let spin = match &args.spin {
        Some(s) => parse_duration(s).map_err(|e| anyhow::anyhow!("--spin: {e}"))?,
        None => qfec_emu::DEFAULT_SPIN,
    };
    Ok(EmuConfig {
        links,
        extra_paths,
        seed: args.seed.unwrap_or(seed),
        spin,
        max_in_flight: qfec_emu::DEFAULT_MAX_IN_FLIGHT,
    })
}

/// Load a scenario for its links. A scenario file must name a workload, which the emulator
/// does not use: a file without one gets a placeholder, appended after the last line so that
/// errors keep their line numbers.
fn load_links_only(path: &std::path::Path) -> Result<Scenario> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the scenario {}", path.display()))?;
    let names_workload = text.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with("[workload") || l.starts_with("workload")
    });
    let text = if names_workload {
        text
    } else {
        format!("{text}\n[workload]\nkind = \"bulk\"\nsize = \"1kB\"\n")
    };
    let dir = path
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    Scenario::from_toml(&text, &path.display().to_string(), &dir)
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// A no-op handler: while the client runs, Ctrl-C ends the client (which gets the signal
/// too) and this process stays to tear the namespaces down. A handler, unlike SIG_IGN, is
/// reset in the children at exec.
extern "C" fn on_interrupt(_: libc::c_int) {}

/// How long `--server-wait listening` waits for the server's socket.
const SERVER_LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

pub fn run(mut args: EmuArgs) -> Result<ExitCode> {
    if let Some(command) = args.command.take() {
        return match command {
            EmuCommand::Agree(a) => agree::run(a),
            EmuCommand::Bench(a) => bench::run(a),
            EmuCommand::Reproduce(EmuPaper::Kharat(a)) => kharat::run(a),
        };
    }
    let server_wait = match args.server_wait.as_str() {
        "listening" => None,
        d => Some(parse_duration(d).map_err(|e| {
            anyhow::anyhow!("--server-wait: {e}; or give `listening` (the default)")
        })?),
    };
    let config = config(&args)?;
    let (down, up) = (config.links.down.name.clone(), config.links.up.name.clone());
    let links = format!(
        "qfec emu: server -> client {}; client -> server {}",
        describe_link(&config.links.down),
        describe_link(&config.links.up)
    );
    let emu = Emulator::start(config).context("qfec emu needs root, /dev/net/tun and iproute2")?;
    eprintln!(
        "qfec emu: server side {} in namespace {}, client side {} in namespace {} \
         (device {} on each)",
        LEFT_ADDR,
        emu.left().name(),
        RIGHT_ADDR,
        emu.right().name(),
        qfec_emu::DEVICE
    );
    eprintln!("{links}");
    // SAFETY: installs a handler that does nothing, async-signal-safe by construction.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t,
        )
    };
    let env = |c: &mut Command| {
        c.env("QFEC_EMU_SERVER", LEFT_ADDR.to_string())
            .env("QFEC_EMU_CLIENT", RIGHT_ADDR.to_string());
    };
    let mut server = match &args.server {
        Some(cmd) => {
            let mut c = emu.left().command("sh");
            c.args(["-c", cmd]);
            env(&mut c);
            // Its own process group: stopping it reaches whatever the shell started.
            c.process_group(0);
            let child = c
                .spawn()
                .with_context(|| format!("cannot start the server {cmd:?}"))?;
            Some(ServerProcess(child))
        }
        None => None,
    };
    if let Some(s) = server.as_mut() {
        match server_wait {
            Some(d) => std::thread::sleep(d),
            None => {
                let listening = emu.left().wait_listening(
                    SERVER_LISTEN_TIMEOUT,
                    |l| !l.is_empty(),
                    || matches!(s.0.try_wait(), Ok(None)),
                );
                if let Err(e) = listening
                    && s.0.try_wait().ok().flatten().is_none()
                {
                    bail!("{e}; check --server (or give --server-wait a duration)");
                }
            }
        }
        if let Some(status) = s.0.try_wait().context("waiting for the server")? {
            bail!(
                "the server exited before the client started ({}); check --server",
                describe(status)
            );
        }
    }
    let mut client = emu.right().command(&args.client[0]);
    client.args(&args.client[1..]);
    env(&mut client);
    let started = Instant::now();
    let status = client
        .status()
        .with_context(|| format!("cannot start the client {:?}", args.client[0]))?;
    let took = started.elapsed();
    drop(server);
    let stats = emu.stop().context("the emulator failed")?;
    eprintln!("qfec emu: client {} after {took:.2?}", describe(status));
    eprint!("{}", report(&stats, &down, &up));
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        None => ExitCode::from(1),
    })
}

/// A link direction in a few words: what drains the queue, the queue, delay, losses.
fn describe_link(l: &LinkSpec) -> String {
    let ser = match &l.serializer {
        Serializer::Unlimited => "no rate limit".to_string(),
        Serializer::Rate(r) => format!("{} Mb/s", *r as f64 / 1e6),
        Serializer::Trace(t) => format!(
            "a delivery trace (mean {:.2} Mb/s)",
            t.mean_rate_bps() / 1e6
        ),
        Serializer::Wifi(st) => match st.mpdu_error {
            LossSpec::Bernoulli { p } => format!(
                "802.11n station on channel {:?} ({:.2} % MPDU errors)",
                st.channel.name,
                p * 100.0
            ),
            _ => format!("802.11n station on channel {:?}", st.channel.name),
        },
    };
    let queue = match l.queue {
        QueueLimit::Unlimited => "unlimited queue".to_string(),
        QueueLimit::Packets(n) => format!("{n}-packet queue"),
        QueueLimit::Bytes(b) => format!("{b}-byte queue"),
    };
    let mut out = format!("{ser}, {queue}, {:?} delay", l.delay);
    if !matches!(l.jitter, Jitter::None) {
        out += &format!(", jitter {:?}", l.jitter);
    }
    for loss in l.ingress_loss.iter().chain(&l.air_loss) {
        if let LossSpec::Bernoulli { p } = loss {
            out += &format!(", {:.2} % random loss", p * 100.0);
        }
    }
    let other = l
        .ingress_loss
        .iter()
        .chain(&l.air_loss)
        .filter(|x| !matches!(x, LossSpec::Bernoulli { .. }))
        .count();
    if other > 0 {
        out += &format!(", {other} other loss model(s)");
    }
    if !l.changes.is_empty() {
        out += &format!(", {} scheduled change(s)", l.changes.len());
    }
    out
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) => format!("was killed by signal {s}"),
        _ => "ended".to_string(),
    }
}

/// The server's process group, stopped when dropped: SIGTERM, then SIGKILL after 2 s.
struct ServerProcess(Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let pgid = self.0.id() as libc::pid_t;
        // SAFETY: signals our own child's process group.
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: as above.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// The link counters and the timing error, a few lines of text.
fn report(s: &EmuStats, down: &str, up: &str) -> String {
    let line = |name: &str, dir: &str, l: &LinkStats| {
        format!(
            "  {dir} ({name}): {} packets offered, {} delivered ({} B), dropped {} at ingress, \
             {} at the queue, {} on the air, {} in blackholes, {} at the MAC retry limit; \
             {} corrupted; queue max {} packets\n",
            l.offered_packets,
            l.delivered_packets,
            l.delivered_bytes,
            l.dropped_ingress,
            l.dropped_queue,
            l.dropped_air,
            l.dropped_blackhole,
            l.dropped_retry,
            l.corrupted,
            l.max_queue_packets
        )
    };
    let t = &s.lateness;
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mut out = format!("qfec emu: link after {:.2?}\n", s.elapsed);
    let wifi = |dir: &str, w: &Option<WifiStats>| match w {
        Some(w) => format!(
            "  {dir} 802.11n station: {} channel accesses ({} collided), {:.1} MPDUs per \
             A-MPDU, {} MPDUs sent, {} retried, {} dropped at the retry limit\n",
            w.txops,
            w.collisions,
            w.mean_ampdu(),
            w.mpdus_sent,
            w.mpdus_retried,
            w.mpdus_dropped
        ),
        None => String::new(),
    };
    out += &line(down, "server -> client", &s.down);
    out += &wifi("server -> client", &s.down_wifi);
    out += &line(up, "client -> server", &s.up);
    out += &wifi("client -> server", &s.up_wifi);
    out += &format!(
        "  timing error (write time - due time) over {} packets: p50 {:.0} us, p90 {:.0} us, \
         p99 {:.0} us, max {:.0} us\n",
        t.count(),
        us(t.percentile(0.5)),
        us(t.percentile(0.9)),
        us(t.percentile(0.99)),
        us(t.max())
    );
    if s.dropped_overload != [0, 0] {
        out += &format!(
            "  {} server -> client and {} client -> server packets dropped before the link: \
             more than {} in flight (the link model's queue is unlimited?)\n",
            s.dropped_overload[0],
            s.dropped_overload[1],
            qfec_emu::DEFAULT_MAX_IN_FLIGHT
        );
    }
    if s.write_errors > 0 {
        out += &format!("  {} packets the kernel refused\n", s.write_errors);
    }
    out
}
