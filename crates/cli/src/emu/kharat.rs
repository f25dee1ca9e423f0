//! `qfec emu reproduce kharat`: paper 004 (QUIC vs TCP over WiFi: throughput, speedup and
//! Jain's fairness index) through the emulator, with real endpoints: qfec's QUIC (HTTP/3) and
//! the kernel's TCP (HTTP/2 over TLS 1.3), both CUBIC, fetching the same files.
//!
//! Per file size the link has the bandwidth and RTT the paper measured while fetching that
//! file (its Table I). At each size: one flow alone (QUIC, QUIC with adaptive FEC, TCP) and
//! four competing flows (2 QUIC + 2 TCP, and 2 QUIC with FEC + 2 TCP), five repetitions.
//! Servers run as `qfec server` processes in the server namespace; every client is a thread
//! in the client namespace, and competing clients start together.
//!
//! `--browser` runs the browser-like variant instead: each flow first connects once to its
//! server (as a browser that has visited the site), then its measured connection resumes that
//! session: TCP speaks TLS 1.2 (what the paper's 2017 browsers spoke) and resumes it, QUIC
//! resumes with its request in 0-RTT (what Chromium's QUIC did on a repeated connection).

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitCode};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use qfec_emu::{EmuConfig, Emulator, LEFT_ADDR, LinkPair, NetNs};
use qfec_lab::metrics::jain_index;
use qfec_lab::plot::{BoxStat, Corner, Figure, Panel, Series, draw};
use qfec_lab::units::{parse_list, parse_ratio};
use qfec_proto::{ClientConfig, ClientCryptoConfig};

use crate::hq::{self, FetchOptions, TransportArgs, Url};
use crate::tcp::{self, TcpCc, TcpFetchOptions, Trust};

#[derive(Args, Debug)]
pub struct KharatArgs {
    /// Files a tenth of the paper's and one repetition: checks that everything works, in
    /// about 25 s.
    #[arg(long)]
    quick: bool,
    /// Report directory (created): runs.csv, report.md, SVG figures.
    #[arg(long, default_value = "reproduce-kharat")]
    out: PathBuf,
    /// Replace the report in an --out directory that already holds one.
    #[arg(long, conflicts_with = "report_only")]
    force: bool,
    /// Continue an interrupted reproduction: keep the points already in --out's runs.csv
    /// (each point's flows are written as the point ends) and run only the others.
    #[arg(long, conflicts_with = "report_only")]
    resume: bool,
    /// Repetitions (the paper's epochs) instead of 5; `--seeds N` is the same option, named as
    /// in `qfec lab reproduce` (there a point's runs are its seeds).
    #[arg(long, visible_alias = "seeds", value_name = "N")]
    reps: Option<u32>,
    /// Random loss on both directions, a list such as "0,1%" (the paper's network: 0 %).
    #[arg(long, default_value = "0")]
    loss: String,
    /// Run nothing: rebuild report.md and the figures from the runs.csv in --out.
    #[arg(long, conflicts_with_all = ["quick", "reps", "loss", "browser"])]
    report_only: bool,
    /// The browser-like variant: every flow follows a first connection to its server and
    /// resumes that session, TCP on TLS 1.2, QUIC with its request in 0-RTT.
    #[arg(long)]
    browser: bool,
}

/// How the clients connect: the clean comparison, or as the paper's browsers did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stack {
    /// A new connection per flow, TLS 1.3 on both sides, no resumption.
    Clean,
    /// After a first connection to the same server: TCP resumes a TLS 1.2 session, QUIC
    /// resumes with its request in 0-RTT.
    Browser,
}

impl Stack {
    fn label(self) -> &'static str {
        match self {
            Stack::Clean => "clean",
            Stack::Browser => "browser",
        }
    }
}

/// The paper's Table I: while fetching each file, the bandwidth and RTT it measured.
struct Point {
    label: &'static str,
    bytes: u64,
    rate_bps: u64,
    rtt: Duration,
    /// Table II: QUIC and TCP throughput (Mb/s), one flow and four.
    paper_single: (f64, f64),
    paper_four: (f64, f64),
    /// Table II's speedups as printed, one flow and four (not the ratio of the rounded
    /// throughputs: 0.82 / 0.43 gives 1.91 where the paper prints 1.90).
    paper_speedup: (f64, f64),
}

const POINTS: [Point; 3] = [
    Point {
        label: "100 kB",
        bytes: 100_000,
        rate_bps: 10_000_000,
        rtt: Duration::from_millis(62),
        paper_single: (0.82, 0.43),
        paper_four: (0.39, 0.77),
        paper_speedup: (1.90, 0.51),
    },
    Point {
        label: "1 MB",
        bytes: 1_000_000,
        rate_bps: 18_000_000,
        rtt: Duration::from_millis(54),
        paper_single: (0.88, 0.73),
        paper_four: (0.56, 1.31),
        paper_speedup: (1.21, 0.43),
    },
    Point {
        label: "10 MB",
        bytes: 10_000_000,
        rate_bps: 6_000_000,
        rtt: Duration::from_millis(48),
        paper_single: (0.68, 0.45),
        paper_four: (0.83, 1.16),
        paper_speedup: (1.51, 0.72),
    },
];

/// A flow's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    Quic,
    /// QUIC with the server sending adaptive FEC.
    QuicFec,
    Tcp,
}

impl Proto {
    fn label(self) -> &'static str {
        match self {
            Proto::Quic => "QUIC",
            Proto::QuicFec => "QUIC+FEC",
            Proto::Tcp => "TCP",
        }
    }
}

/// What runs together in one repetition.
const SETUPS: [(&str, &[Proto]); 5] = [
    ("QUIC alone", &[Proto::Quic]),
    ("QUIC+FEC alone", &[Proto::QuicFec]),
    ("TCP alone", &[Proto::Tcp]),
    (
        "2 QUIC + 2 TCP",
        &[Proto::Quic, Proto::Tcp, Proto::Quic, Proto::Tcp],
    ),
    (
        "2 QUIC+FEC + 2 TCP",
        &[Proto::QuicFec, Proto::Tcp, Proto::QuicFec, Proto::Tcp],
    ),
];

/// The servers' ports on [`LEFT_ADDR`]: QUIC, QUIC sending FEC, and TCP (a TCP port, so it
/// may share the number with the first UDP one).
const QUIC_PORT: u16 = 4433;
const QUIC_FEC_PORT: u16 = 4434;
const TCP_PORT: u16 = 4433;

/// One flow's result.
#[derive(Debug, Clone)]
struct FlowRun {
    stack: Stack,
    size: &'static str,
    loss: f64,
    setup: &'static str,
    rep: u32,
    flow: usize,
    proto: Proto,
    /// Bytes and seconds from the start of the connection to the file's last byte.
    result: FlowResult,
}

/// A flow's bytes and seconds, or why it failed.
type FlowResult = Result<(u64, f64), String>;

impl FlowRun {
    fn mbps(&self) -> Option<f64> {
        self.result
            .as_ref()
            .ok()
            .map(|&(b, s)| b as f64 * 8.0 / s.max(1e-9) / 1e6)
    }
}

pub fn run(args: KharatArgs) -> Result<ExitCode> {
    if args.report_only {
        return report_from_csv(&args.out);
    }
    let stack = if args.browser {
        Stack::Browser
    } else {
        Stack::Clean
    };
    let reps = args.reps.unwrap_or(if args.quick { 1 } else { 5 });
    if reps == 0 {
        bail!("--reps (or --seeds) must be at least 1, e.g. --reps 5");
    }
    qfec_lab::reproduce::check_report_dir(&args.out, args.force, args.resume)
        .map_err(anyhow::Error::msg)?;
    let losses = parse_list(&args.loss, parse_ratio).map_err(|e| anyhow::anyhow!("--loss: {e}"))?;
    let scale = if args.quick { 10 } else { 1 };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    // Each point's flows are appended to runs.csv as the point ends: an interrupted
    // reproduction keeps them, and --resume runs only the points missing.
    let csv = args.out.join("runs.csv");
    let (mut runs, keep) = if args.resume {
        resumed_runs(&csv, reps, scale, stack)?
    } else {
        let _ = std::fs::remove_file(args.out.join("report.md"));
        (Vec::new(), 0)
    };
    // Never rewritten while running: resuming only cuts what a crash left unfinished.
    let mut journal = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&csv)
        .and_then(|mut f| {
            f.set_len(keep)?;
            if keep == 0 {
                f.write_all(RUNS_HEADER.as_bytes())?;
            }
            Ok(f)
        })
        .with_context(|| format!("cannot write {}", csv.display()))?;
    let root = args.out.join("files");
    std::fs::create_dir_all(&root).with_context(|| format!("cannot create {}", root.display()))?;
    for p in &POINTS {
        write_file(&root.join(file_name(p, scale)), p.bytes / scale)?;
    }
    write_file(&root.join(WARM_UP_FILE), WARM_UP_BYTES)?;
    let started = std::time::Instant::now();
    for &loss in &losses {
        for p in &POINTS {
            if runs.iter().any(|r| r.size == p.label && r.loss == loss) {
                eprintln!(
                    "kharat: {} at {:.1} % loss: in runs.csv already",
                    p.label,
                    loss * 100.0
                );
                continue;
            }
            eprintln!(
                "kharat: {} at {} Mb/s, {} ms RTT, {:.1} % loss",
                p.label,
                p.rate_bps / 1_000_000,
                p.rtt.as_millis(),
                loss * 100.0
            );
            let point = run_point(p, loss, scale, reps, &root, stack)?;
            // One write per point: a crash cuts at most this point, which --resume redoes.
            let rows: String = point.iter().map(run_row).collect();
            journal
                .write_all(rows.as_bytes())
                .with_context(|| format!("cannot write {}", csv.display()))?;
            runs.extend(point);
        }
    }
    // The files are inputs, not results.
    let _ = std::fs::remove_dir_all(&root);
    // In the order of the points, whatever order they ran in (a resumed run with another
    // --loss list).
    let at = |r: &FlowRun| {
        (
            losses.iter().position(|l| *l == r.loss),
            POINTS.iter().position(|p| p.label == r.size),
        )
    };
    if !runs.is_sorted_by_key(at) {
        runs.sort_by_key(at);
        write_runs(&csv, &runs)?;
    }
    drop(journal);
    let md = report(
        &runs,
        &losses,
        reps,
        scale,
        Some(started.elapsed()),
        &args.out,
    )?;
    std::fs::write(args.out.join("report.md"), &md)
        .with_context(|| format!("cannot write {}", args.out.join("report.md").display()))?;
    print!("{md}");
    let failed = runs.iter().filter(|r| r.result.is_err()).count();
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        eprintln!("kharat: {failed} flows failed (see runs.csv)");
        ExitCode::from(1)
    })
}

/// What a browser-like flow fetches on its first connection (not measured).
const WARM_UP_FILE: &str = "warm-up.bin";
const WARM_UP_BYTES: u64 = 2_000;

fn file_name(p: &Point, scale: u64) -> String {
    format!("f{}.bin", p.bytes / scale)
}

/// `bytes` of pseudo-random content (incompressible, like the paper's videos).
fn write_file(path: &Path, bytes: u64) -> Result<()> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ bytes;
    let data: Vec<u8> = (0..bytes)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(path, data).with_context(|| format!("cannot write {}", path.display()))
}

/// The link of a point: the measured bandwidth both ways, half the RTT each way, a queue of
/// one bandwidth-delay product, and `loss` on both directions.
fn links(p: &Point, loss: f64) -> LinkPair {
    LinkPair::symmetric(p.rate_bps, p.rtt, loss)
}

/// Kills a server process when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server(ns: &NetNs, args: &[String]) -> Result<Server> {
    let exe = std::env::current_exe().context("cannot find the qfec executable")?;
    let mut c = ns.command(
        exe.to_str()
            .context("the qfec executable's path is not UTF-8")?,
    );
    c.args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0);
    Ok(Server(c.spawn().context("cannot start qfec server")?))
}

/// Every setup, `reps` times, on one emulated link with the three servers.
fn run_point(
    p: &Point,
    loss: f64,
    scale: u64,
    reps: u32,
    root: &Path,
    stack: Stack,
) -> Result<Vec<FlowRun>> {
    let mut config = EmuConfig::new(links(p, loss));
    config.seed = 4;
    let emu = Emulator::start(config)?;
    let root_s = root
        .to_str()
        .context("the report directory's path is not UTF-8")?;
    let listen = |port: u16| SocketAddr::from((LEFT_ADDR, port)).to_string();
    let servers = [
        vec!["server".into(), "--listen".into(), listen(QUIC_PORT)],
        vec![
            "server".into(),
            "--listen".into(),
            listen(QUIC_FEC_PORT),
            "--fec".into(),
            "on".into(),
        ],
        vec![
            "server".into(),
            "--tcp".into(),
            "--tcp-cc".into(),
            "cubic".into(),
            "--listen".into(),
            listen(TCP_PORT),
        ],
    ];
    let mut servers = servers
        .into_iter()
        .map(|mut a| {
            a.extend(["--root".to_string(), root_s.to_string()]);
            // Browser-like QUIC clients resume with their request in 0-RTT.
            if stack == Stack::Browser && !a.iter().any(|x| x == "--tcp") {
                a.push("--early-data".to_string());
            }
            start_server(emu.left(), &a)
        })
        .collect::<Result<Vec<_>>>()?;
    // Ready once the three sockets exist in the server namespace.
    emu.left()
        .wait_listening(
            Duration::from_secs(30),
            |l| {
                l.udp.contains(&QUIC_PORT)
                    && l.udp.contains(&QUIC_FEC_PORT)
                    && l.tcp.contains(&TCP_PORT)
            },
            || {
                servers
                    .iter_mut()
                    .all(|s| matches!(s.0.try_wait(), Ok(None)))
            },
        )
        .context("the QUIC, QUIC+FEC and TCP servers did not start")?;
    let path = format!("/{}", file_name(p, scale));
    let mut out = Vec::new();
    for rep in 1..=reps {
        for (setup, protos) in SETUPS {
            let barrier = Arc::new(Barrier::new(protos.len()));
            let results = std::thread::scope(|s| {
                let handles: Vec<_> = protos
                    .iter()
                    .map(|&proto| {
                        let (barrier, path, ns) = (barrier.clone(), path.clone(), emu.right());
                        s.spawn(move || {
                            let entered = ns.enter_current_thread().map_err(|e| e.to_string());
                            // Every thread reaches the barrier, whatever failed before it.
                            let client = entered.and_then(|()| Client::new(proto, stack));
                            barrier.wait();
                            client?.fetch(&path)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err("client panicked".into())))
                    .collect::<Vec<_>>()
            });
            for (flow, (proto, result)) in protos.iter().zip(results).enumerate() {
                let expect = p.bytes / scale;
                let result = result.and_then(|(b, s)| {
                    if b == expect {
                        Ok((b, s))
                    } else {
                        Err(format!("got {b} bytes of {expect}"))
                    }
                });
                out.push(FlowRun {
                    stack,
                    size: p.label,
                    loss,
                    setup,
                    rep,
                    flow,
                    proto: *proto,
                    result,
                });
            }
            // Let queues drain and connections close before the next setup.
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    drop(servers);
    emu.stop().context("the emulator failed")?;
    Ok(out)
}

/// One flow's client: its protocol's settings, which in the browser-like variant hold the
/// session (and QUIC's address token) its first connection left.
struct Client {
    stack: Stack,
    settings: Settings,
}

/// What a client connects with, kept across its connections.
enum Settings {
    /// The QUIC settings, and the server port of the protocol (plain QUIC or QUIC+FEC).
    Quic {
        client: ClientConfig,
        port: u16,
    },
    Tcp(Arc<rustls::ClientConfig>),
}

/// Seconds before a client gives up.
const TIMEOUT_SECS: u64 = 300;

impl Client {
    /// A client ready to measure; a browser-like one has fetched [`WARM_UP_FILE`] once.
    fn new(proto: Proto, stack: Stack) -> Result<Client, String> {
        let settings = match proto {
            Proto::Quic | Proto::QuicFec => {
                // The options' defaults, as `qfec client` uses them (CUBIC, pacing, decoding
                // the server's FEC when it sends some).
                let mut crypto = ClientCryptoConfig::insecure(&[qfec_http::h3::ALPN_H3]);
                if stack == Stack::Browser {
                    crypto = crypto.with_early_data();
                }
                let mut client = ClientConfig::new(crypto);
                let transport = TransportArgs::default()
                    .transport()
                    .map_err(|e| format!("{e:#}"))?;
                client.transport = Arc::new(transport);
                let port = if proto == Proto::Quic {
                    QUIC_PORT
                } else {
                    QUIC_FEC_PORT
                };
                Settings::Quic { client, port }
            }
            Proto::Tcp => Settings::Tcp(
                tcp::client_tls(&Trust::Insecure, false, stack == Stack::Browser)
                    .map_err(|e| format!("{e:#}"))?,
            ),
        };
        let mut c = Client { stack, settings };
        if stack == Stack::Browser {
            let (warm_up, _) = c
                .get(&format!("/{WARM_UP_FILE}"))
                .map_err(|e| format!("first connection: {e}"))?;
            warm_up.map_err(|e| format!("first connection: {e}"))?;
        }
        Ok(c)
    }

    /// The measured download on the calling thread: bytes and seconds. A browser-like flow
    /// that did not resume its session (or whose 0-RTT the server refused) is an error: it
    /// measured something else.
    fn fetch(&mut self, path: &str) -> FlowResult {
        let (result, resumed) = self.get(path)?;
        if self.stack == Stack::Browser && !resumed.as_a_browser() {
            return Err(format!("not browser-like: {resumed}"));
        }
        result
    }

    /// One download: its bytes and seconds, and how the connection resumed (as a browser's
    /// repeated connection does: TCP on a resumed TLS 1.2 session, QUIC with its 0-RTT request
    /// accepted; or what happened instead).
    fn get(&mut self, path: &str) -> Result<(FlowResult, Resumed), String> {
        let url = |port| Url {
            host: LEFT_ADDR.to_string(),
            port,
            path: path.to_string(),
        };
        let rt = hq::runtime().map_err(|e| e.to_string())?;
        let browser = self.stack == Stack::Browser;
        match &mut self.settings {
            Settings::Quic { client, port } => {
                let opts = FetchOptions {
                    timeout: Duration::from_secs(TIMEOUT_SECS),
                    pmtu_from_route: true,
                    // Offering only HTTP/3 lets a resumed connection ask in 0-RTT.
                    alpn: browser.then_some(hq::AppProtocol::H3),
                    ..FetchOptions::default()
                };
                let o = rt
                    .block_on(hq::fetch(vec![url(*port)], client.clone(), &opts))
                    .map_err(|e| format!("{e:#}"))?;
                // As a browser does, the next connection presents the server's address token.
                client.token = o.token.clone().or(client.token.take());
                let resumed = Resumed(match (o.resumed, o.early_data) {
                    (true, Some(true)) => None,
                    (false, _) => Some("QUIC did not resume its session".into()),
                    (true, e) => Some(format!("QUIC resumed, 0-RTT accepted: {e:?}")),
                });
                let f = o.files.first().ok_or("no file")?;
                Ok((f.result.clone(), resumed))
            }
            Settings::Tcp(tcp_tls) => {
                let opts = TcpFetchOptions {
                    tls: tcp_tls.clone(),
                    timeout: Duration::from_secs(TIMEOUT_SECS),
                    server_name: None,
                    bind: None,
                    cc: Some(TcpCc::Cubic),
                    output: None,
                    sha256: false,
                };
                let o = rt
                    .block_on(tcp::fetch(vec![url(TCP_PORT)], &opts))
                    .map_err(|e| format!("{e:#}"))?;
                let resumed = Resumed(match (o.tls_version, o.resumed) {
                    (Some(rustls::ProtocolVersion::TLSv1_2), true) => None,
                    (v, r) => Some(format!("TCP on {v:?}, session resumed: {r}")),
                });
                let f = o.files.first().ok_or("no file")?;
                let result = f
                    .result
                    .as_ref()
                    .map(|s| (s.bytes, s.since_connect.as_secs_f64()))
                    .map_err(Clone::clone);
                Ok((result, resumed))
            }
        }
    }
}

/// How a connection resumed: `None` as a browser's repeated connection does, else what
/// happened instead.
struct Resumed(Option<String>);

impl Resumed {
    fn as_a_browser(&self) -> bool {
        self.0.is_none()
    }
}

impl std::fmt::Display for Resumed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.as_deref().unwrap_or("resumed as a browser does"))
    }
}

/// The header of runs.csv.
const RUNS_HEADER: &str = "size,loss,setup,rep,flow,protocol,bytes,seconds,mbps,error,stack\n";

/// One flow as a line of runs.csv.
fn run_row(r: &FlowRun) -> String {
    let (bytes, secs, err) = match &r.result {
        Ok((b, t)) => (b.to_string(), format!("{t:.6}"), String::new()),
        Err(e) => (String::new(), String::new(), e.replace([',', '\n'], ";")),
    };
    // From the seconds as written, so that a row read back (--resume) writes the same.
    let mbps = match (&r.result, secs.parse::<f64>()) {
        (Ok((b, _)), Ok(t)) => format!("{:.4}", *b as f64 * 8.0 / t.max(1e-9) / 1e6),
        _ => String::new(),
    };
    format!(
        "{},{},{},{},{},{},{},{},{},{},{}\n",
        r.size,
        r.loss,
        r.setup,
        r.rep,
        r.flow,
        r.proto.label(),
        bytes,
        secs,
        mbps,
        err,
        r.stack.label()
    )
}

/// Writes runs.csv whole, through a temporary file so that a crash leaves the old one.
fn write_runs(path: &Path, runs: &[FlowRun]) -> Result<()> {
    let mut s = String::from(RUNS_HEADER);
    for r in runs {
        s.push_str(&run_row(r));
    }
    qfec_lab::output::replace_file(path, |w| w.write_all(s.as_bytes()))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The files of a quick run are a tenth of the paper's: the scale the runs were made at.
fn runs_scale(runs: &[FlowRun]) -> u64 {
    runs.iter()
        .find_map(|r| {
            let bytes = r.result.as_ref().ok()?.0;
            let p = POINTS.iter().find(|p| p.label == r.size)?;
            Some(p.bytes / bytes.max(1))
        })
        .unwrap_or(1)
}

/// The points an interrupted reproduction finished, from its runs.csv, and the length of
/// the file that holds them: a point whose write a crash cut (the file does not end its
/// last line) is dropped and runs again. Refused when the runs were made with other
/// repetitions or file sizes than this command's.
fn resumed_runs(csv: &Path, reps: u32, scale: u64, stack: Stack) -> Result<(Vec<FlowRun>, u64)> {
    let text = match std::fs::read_to_string(csv) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => {
            return Err(e).with_context(|| format!("--resume: cannot read {}", csv.display()));
        }
    };
    let mut whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    let mut runs = read_runs(csv, whole)?;
    if whole.len() < text.len()
        && let Some(last) = runs.last().map(|r| (r.size, r.loss))
    {
        // The cut point's rows are the file's last ones: keep the lines before them.
        let cut = runs
            .iter()
            .rev()
            .take_while(|r| (r.size, r.loss) == last)
            .count();
        runs.truncate(runs.len() - cut);
        for _ in 0..cut {
            whole = &whole[..whole[..whole.len() - 1].rfind('\n').map_or(0, |i| i + 1)];
        }
    }
    if runs.is_empty() {
        whole = "";
    }
    if let Some(r) = runs.iter().find(|r| r.stack != stack) {
        bail!(
            "--resume: {} holds runs of the {} variant; give the options it was made with{}",
            csv.display(),
            r.stack.label(),
            if r.stack == Stack::Browser {
                " (--browser)"
            } else {
                " (without --browser)"
            }
        );
    }
    let made_reps = runs.iter().map(|r| r.rep).max();
    if made_reps.is_some_and(|m| m != reps) || (!runs.is_empty() && runs_scale(&runs) != scale) {
        bail!(
            "--resume: {} holds runs of {} repetitions{}; give the options it was made with",
            csv.display(),
            made_reps.unwrap_or(0),
            if runs_scale(&runs) == 10 {
                " made with --quick"
            } else {
                ""
            }
        );
    }
    eprintln!(
        "resuming: {} flows of {} points already in {}",
        runs.len(),
        runs.iter()
            .map(|r| (r.size, r.loss.to_bits()))
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        csv.display()
    );
    Ok((runs, whole.len() as u64))
}

/// Reads back what `write_runs` wrote and writes the report again.
fn report_from_csv(out: &Path) -> Result<ExitCode> {
    let path = out.join("runs.csv");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {} (run the reproduction first)",
            path.display()
        )
    })?;
    let runs = read_runs(&path, &text)?;
    let mut losses: Vec<f64> = Vec::new();
    for r in &runs {
        if !losses.contains(&r.loss) {
            losses.push(r.loss);
        }
    }
    let reps = runs.iter().map(|r| r.rep).max().unwrap_or(0);
    let md = report(&runs, &losses, reps, runs_scale(&runs), None, out)?;
    std::fs::write(out.join("report.md"), &md)
        .with_context(|| format!("cannot write {}", out.join("report.md").display()))?;
    print!("{md}");
    Ok(ExitCode::SUCCESS)
}

/// The flows of a runs.csv (`text`, read from `path`).
fn read_runs(path: &Path, text: &str) -> Result<Vec<FlowRun>> {
    let bad = |n: usize| anyhow::anyhow!("{}: line {n} is not a row of runs.csv", path.display());
    let mut runs = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let c: Vec<&str> = line.split(',').collect();
        // Runs made before the browser-like variant existed have no stack column.
        let stack = match c.get(10).copied() {
            None if c.len() == 10 => Stack::Clean,
            Some("clean") if c.len() == 11 => Stack::Clean,
            Some("browser") if c.len() == 11 => Stack::Browser,
            _ => return Err(bad(i + 1)),
        };
        let size = POINTS
            .iter()
            .find(|p| p.label == c[0])
            .ok_or_else(|| bad(i + 1))?;
        let setup = SETUPS
            .iter()
            .find(|s| s.0 == c[2])
            .ok_or_else(|| bad(i + 1))?
            .0;
        let proto = [Proto::Quic, Proto::QuicFec, Proto::Tcp]
            .into_iter()
            .find(|p| p.label() == c[5])
            .ok_or_else(|| bad(i + 1))?;
        let result = if c[9].is_empty() {
            Ok((
                c[6].parse().map_err(|_| bad(i + 1))?,
                c[7].parse().map_err(|_| bad(i + 1))?,
            ))
        } else {
            Err(c[9].to_string())
        };
        runs.push(FlowRun {
            stack,
            size: size.label,
            loss: c[1].parse().map_err(|_| bad(i + 1))?,
            setup,
            rep: c[3].parse().map_err(|_| bad(i + 1))?,
            flow: c[4].parse().map_err(|_| bad(i + 1))?,
            proto,
            result,
        });
    }
    Ok(runs)
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Mean throughput of `proto`'s flows in `setup` at a size and loss.
fn throughput(runs: &[FlowRun], size: &str, loss: f64, setup: &str, proto: Proto) -> Option<f64> {
    let xs: Vec<f64> = runs
        .iter()
        .filter(|r| r.size == size && r.loss == loss && r.setup == setup && r.proto == proto)
        .filter_map(FlowRun::mbps)
        .collect();
    mean(&xs)
}

/// Jain's index of each repetition of a four-flow setup (flows' throughputs).
fn jain_per_rep(runs: &[FlowRun], size: &str, loss: f64, setup: &str, reps: u32) -> Vec<f64> {
    (1..=reps)
        .filter_map(|rep| {
            let xs: Vec<f64> = runs
                .iter()
                .filter(|r| r.size == size && r.loss == loss && r.setup == setup && r.rep == rep)
                .map(|r| r.mbps())
                .collect::<Option<_>>()?;
            (xs.len() == 4).then(|| jain_index(&xs))
        })
        .collect()
}

fn f(x: Option<f64>, digits: usize) -> String {
    x.map_or("–".into(), |v| format!("{v:.digits$}"))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? / b?)
}

fn report(
    runs: &[FlowRun],
    losses: &[f64],
    reps: u32,
    scale: u64,
    took: Option<Duration>,
    out: &Path,
) -> Result<String> {
    let stack = runs.first().map_or(Stack::Clean, |r| r.stack);
    let mut md = format!(
        "# Paper 004 (Kharat et al.): QUIC vs TCP over WiFi, through the emulator{}\n\n",
        if stack == Stack::Browser {
            ", browser-like"
        } else {
            ""
        }
    );
    // The command the runs came from, which the report and every figure name.
    let command = format!(
        "qfec emu reproduce kharat{}{}{}",
        if scale > 1 { " --quick" } else { "" },
        if stack == Stack::Browser {
            " --browser"
        } else {
            ""
        },
        if losses == [0.0] {
            String::new()
        } else {
            format!(
                " --loss {}",
                losses
                    .iter()
                    .map(|l| format!("{}%", l * 100.0))
                    .collect::<Vec<_>>()
                    .join(",")
            )
        }
    );
    let _ = writeln!(
        md,
        "Command: `{command}`. {} flows{}, {reps} repetition(s) per setup.\n",
        runs.len(),
        took.map_or(" (report rebuilt from runs.csv)".to_string(), |t| format!(
            " in {:.0} s of real time, qfec {} built from commit {}",
            t.as_secs_f64(),
            env!("CARGO_PKG_VERSION"),
            qfec_lab::BUILD_COMMIT
        ))
    );
    let _ = write!(
        md,
        "Real endpoints through `qfec emu`: qfec's QUIC (HTTP/3, CUBIC, pacing) and the \
         kernel's TCP (HTTP/2 over TLS {}, CUBIC), both fetching the same file from `qfec \
         server` processes. Per file size the link has the bandwidth and RTT the paper measured \
         while fetching it (Table I: 10 Mb/s and 62 ms for 100 kB, 18 Mb/s and 54 ms for 1 MB, \
         6 Mb/s and 48 ms for 10 MB), both ways, with a one-BDP drop-tail queue. The paper's \
         WiFi hop (72 Mb/s) was not its bottleneck and is not modelled. Throughput is the \
         file's bytes over the time from the start of its connection (handshake included) to \
         its last byte. `QUIC+FEC`: the server sends qfec's adaptive FEC (`--fec on`).\n\n",
        if stack == Stack::Browser {
            "1.2"
        } else {
            "1.3"
        }
    );
    if stack == Stack::Browser {
        md.push_str(
            "**Browser-like variant** (`--browser`): each flow first fetches a 2 kB file over \
             a connection of its own (not measured, before the flows start together), as a \
             browser that has visited the site; its measured connection then resumes that \
             session. TCP speaks TLS 1.2, as the paper's 2017 browsers did, and resumes it \
             (an abbreviated handshake: the request leaves two round trips after the SYN); \
             QUIC resumes with its request in 0-RTT and presents the server's address token \
             (the request leaves with the first packet), as Chromium's QUIC did on a \
             repeated connection. A flow that did not resume, or whose 0-RTT the server \
             refused, counts as failed. The paper's browsers used HTTP/2, one TCP connection \
             per browser (its §III), so one connection per TCP flow is kept.\n\n",
        );
    }
    if scale > 1 {
        let _ = writeln!(
            md,
            "**Quick run:** files are 1/{scale} of the paper's sizes (rows keep the paper's \
             labels); the numbers only show that the pipeline works.\n"
        );
    }
    let mut jain_fig = Vec::new();
    for &loss in losses {
        let _ = writeln!(md, "## Loss {:.1} %\n", loss * 100.0);
        md.push_str("### Table II: throughput (Mb/s) and speedup\n\n");
        md.push_str("| flows | | 100 kB | 1 MB | 10 MB |\n|---|---|---:|---:|---:|\n");
        let row = |md: &mut String, flows: &str, what: &str, cell: &dyn Fn(&Point) -> String| {
            let cells: Vec<String> = POINTS.iter().map(cell).collect();
            let _ = writeln!(md, "| {flows} | {what} | {} |", cells.join(" | "));
        };
        let one = |p: &Point, setup: &str, proto| throughput(runs, p.label, loss, setup, proto);
        row(&mut md, "1", "QUIC (ours)", &|p| {
            f(one(p, "QUIC alone", Proto::Quic), 2)
        });
        row(&mut md, "1", "TCP (ours)", &|p| {
            f(one(p, "TCP alone", Proto::Tcp), 2)
        });
        row(&mut md, "1", "speedup (ours)", &|p| {
            f(
                ratio(
                    one(p, "QUIC alone", Proto::Quic),
                    one(p, "TCP alone", Proto::Tcp),
                ),
                2,
            )
        });
        row(&mut md, "1", "QUIC (paper)", &|p| {
            format!("{:.2}", p.paper_single.0)
        });
        row(&mut md, "1", "TCP (paper)", &|p| {
            format!("{:.2}", p.paper_single.1)
        });
        row(&mut md, "1", "speedup (paper)", &|p| {
            format!("{:.2}", p.paper_speedup.0)
        });
        row(&mut md, "1", "QUIC+FEC (ours)", &|p| {
            f(one(p, "QUIC+FEC alone", Proto::QuicFec), 2)
        });
        row(&mut md, "1", "speedup QUIC+FEC (ours)", &|p| {
            f(
                ratio(
                    one(p, "QUIC+FEC alone", Proto::QuicFec),
                    one(p, "TCP alone", Proto::Tcp),
                ),
                2,
            )
        });
        let four = "2 QUIC + 2 TCP";
        let four_fec = "2 QUIC+FEC + 2 TCP";
        row(&mut md, "4", "QUIC (ours)", &|p| {
            f(one(p, four, Proto::Quic), 2)
        });
        row(&mut md, "4", "TCP (ours)", &|p| {
            f(one(p, four, Proto::Tcp), 2)
        });
        row(&mut md, "4", "speedup (ours)", &|p| {
            f(
                ratio(one(p, four, Proto::Quic), one(p, four, Proto::Tcp)),
                2,
            )
        });
        row(&mut md, "4", "QUIC (paper)", &|p| {
            format!("{:.2}", p.paper_four.0)
        });
        row(&mut md, "4", "TCP (paper)", &|p| {
            format!("{:.2}", p.paper_four.1)
        });
        row(&mut md, "4", "speedup (paper)", &|p| {
            format!("{:.2}", p.paper_speedup.1)
        });
        row(&mut md, "4", "QUIC+FEC (ours)", &|p| {
            f(one(p, four_fec, Proto::QuicFec), 2)
        });
        row(&mut md, "4", "TCP beside QUIC+FEC (ours)", &|p| {
            f(one(p, four_fec, Proto::Tcp), 2)
        });
        row(&mut md, "4", "speedup QUIC+FEC (ours)", &|p| {
            f(
                ratio(
                    one(p, four_fec, Proto::QuicFec),
                    one(p, four_fec, Proto::Tcp),
                ),
                2,
            )
        });
        md.push('\n');
        md.push_str(
            "### Figs. 3-4: Jain's fairness index of the four flows' throughputs\n\n\
             | setup | size | per repetition | mean |\n|---|---|---|---:|\n",
        );
        for setup in [four, four_fec] {
            let mut series = Series {
                label: format!("{setup}, {:.0} % loss", loss * 100.0),
                points: Vec::new(),
            };
            let mut boxes = Vec::new();
            for (i, p) in POINTS.iter().enumerate() {
                let j = jain_per_rep(runs, p.label, loss, setup, reps);
                let _ = writeln!(
                    md,
                    "| {setup} | {} | {} | {} |",
                    p.label,
                    j.iter()
                        .map(|x| format!("{x:.3}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    f(mean(&j), 3)
                );
                if let Some(m) = mean(&j) {
                    series.points.push((i as f64 + 1.0, m));
                }
                if let Some(b) = BoxStat::of(p.label, &j) {
                    boxes.push(b);
                }
            }
            jain_fig.push((series, boxes));
        }
        md.push_str(
            "\nThe paper draws Figs. 3 and 4 without printing their values; its text says \
             fairness rises with the file size (long flows converge).\n\n",
        );
    }
    let fig4 = Figure {
        title: format!(
            "Mean Jain index of 2 QUIC + 2 TCP flows (paper 004 Fig. 4) · {command}, {}",
            qfec_lab::BUILD_COMMIT
        ),
        x_label: "file: 1 = 100 kB, 2 = 1 MB, 3 = 10 MB".into(),
        y_label: "Jain's fairness index".into(),
        panels: vec![Panel {
            title: String::new(),
            series: jain_fig.iter().map(|(s, _)| s.clone()).collect(),
            ..Panel::default()
        }],
        columns: 1,
        x_range: Some((0.8, 3.2)),
        y_range: Some((0.25, 1.02)),
        legend: Corner::LowerRight,
    };
    let fig3 = Figure {
        title: format!(
            "Jain index per repetition (paper 004 Fig. 3) · {command}, {}",
            qfec_lab::BUILD_COMMIT
        ),
        x_label: "file size".into(),
        y_label: "Jain's fairness index".into(),
        panels: jain_fig
            .iter()
            .map(|(s, b)| Panel {
                title: s.label.clone(),
                boxes: b.clone(),
                ..Panel::default()
            })
            .collect(),
        columns: 2,
        x_range: None,
        y_range: Some((0.25, 1.02)),
        legend: Corner::LowerRight,
    };
    // One panel per loss rate plus the paper's; a series keeps its colour across panels.
    let curves = [
        ("QUIC alone", Proto::Quic),
        ("TCP alone", Proto::Tcp),
        ("QUIC+FEC alone", Proto::QuicFec),
        ("2 QUIC + 2 TCP", Proto::Quic),
        ("2 QUIC + 2 TCP", Proto::Tcp),
    ];
    let label = |setup: &str, proto: Proto| format!("{} in {setup}", proto.label());
    let paper = |setup: &str, proto: Proto| {
        let points = POINTS
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let v = match (setup, proto) {
                    ("QUIC alone", Proto::Quic) => p.paper_single.0,
                    ("TCP alone", Proto::Tcp) => p.paper_single.1,
                    ("2 QUIC + 2 TCP", Proto::Quic) => p.paper_four.0,
                    ("2 QUIC + 2 TCP", Proto::Tcp) => p.paper_four.1,
                    _ => return None,
                };
                Some((i as f64 + 1.0, v))
            })
            .collect();
        Series {
            label: label(setup, proto),
            points,
        }
    };
    let mut panels = vec![Panel {
        title: "paper (Table II)".into(),
        series: curves.iter().map(|&(s, p)| paper(s, p)).collect(),
        ..Panel::default()
    }];
    for &loss in losses {
        let series = curves
            .iter()
            .map(|&(setup, proto)| Series {
                label: label(setup, proto),
                points: POINTS
                    .iter()
                    .enumerate()
                    .filter_map(|(i, p)| {
                        Some((
                            i as f64 + 1.0,
                            throughput(runs, p.label, loss, setup, proto)?,
                        ))
                    })
                    .collect(),
            })
            .collect();
        panels.push(Panel {
            title: format!("ours, {:.0} % loss", loss * 100.0),
            series,
            ..Panel::default()
        });
    }
    let table2 = Figure {
        title: format!(
            "Throughput per flow (paper 004 Table II) · {command}, {}",
            qfec_lab::BUILD_COMMIT
        ),
        x_label: "file: 1 = 100 kB, 2 = 1 MB, 3 = 10 MB".into(),
        y_label: "Mb/s".into(),
        columns: panels.len().min(3),
        panels,
        x_range: Some((0.8, 3.2)),
        y_range: None,
        legend: Corner::UpperRight,
    };
    for (name, fig) in [
        ("table2.svg", &table2),
        ("fig3.svg", &fig3),
        ("fig4.svg", &fig4),
    ] {
        let path = out.join(name);
        draw(fig, &path).map_err(|e| anyhow::anyhow!("cannot draw {}: {e}", path.display()))?;
    }
    md.push_str("Figures: `table2.svg`, `fig3.svg`, `fig4.svg`; every flow in `runs.csv`.\n");
    Ok(md)
}
