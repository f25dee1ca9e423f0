//! `qfec server`, `qfec client` and `qfec interop` over QUIC: HTTP/3 (ALPN `h3`) and HTTP/0.9
//! (ALPN `hq-interop`, as the QUIC interop runner uses it), through `qfec-http`; the options
//! they share (transport, FEC, multipath). `--tcp` hands over to `crate::tcp`.

pub(crate) mod client;
mod interop;
mod server;

pub use client::{AppProtocol, ClientArgs, run_client};
pub use interop::{InteropArgs, run as run_interop};
pub use server::{ServerArgs, run_server};

pub(crate) use crate::fetch::{Url, parse_url, runtime};

pub(crate) use client::{FetchOptions, fetch};
use server::serve;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use qfec_fec::FecConfig;
use qfec_proto::{
    AckFrequencyPolicy, Endpoint, EndpointConfig, RecoveredLossMode, ServerConfig, TransportConfig,
    recovery::cc::CongestionControl,
};
use qfec_qlog::{QlogFactory, QlogOptions};

pub use qfec_http::hq::ALPN_HQ;

/// The `TransportArgs` that only QUIC has (all but `keylog`), for `--tcp` to refuse.
pub(crate) const QUIC_TRANSPORT_ONLY: [&str; 13] = [
    "cc",
    "no_pacing",
    "no_ecn",
    "pmtu",
    "ack_frequency",
    "qlog",
    "idle_timeout",
    "fec",
    "fec_cc",
    "no_fec_decode",
    "multipath",
    "max_path_id",
    "scheduler",
];

/// Transport options shared by client and server.
#[derive(Args, Clone, Debug)]
pub struct TransportArgs {
    /// Congestion controller: newreno, cubic, bbr, lia or olia (with --multipath: NewReno
    /// whose paths share one flow's increase, RFC 6356; OLIA also shifts window to the paths
    /// that lose least); `disabled` sends without any (only for applications that set their
    /// own rate, and only on paths you own).
    #[arg(long, default_value = "cubic")]
    cc: CongestionControl,
    /// Disable pacing (send whole congestion windows in bursts).
    #[arg(long)]
    no_pacing: bool,
    /// Do not mark datagrams ECT(0). By default they are marked on each path whose ECN
    /// validation passes (RFC 9000 §13.4), and a CE mark the peer reports reduces the
    /// window as a loss would, with nothing lost. The marks that arrive are counted and
    /// reported either way.
    #[arg(long)]
    no_ecn: bool,
    /// Path MTU discovery (RFC 8899): the largest UDP payload to probe for. `auto`: what
    /// the route to the server carries (a server: its largest interface's MTU), at most a
    /// 9000-byte jumbo frame; a number of bytes (1200-65527); or `off`: every datagram
    /// 1452 bytes (or the peer's limit), as before discovery.
    #[arg(long, default_value = "auto", value_parser = parse_pmtu, value_name = "auto|off|BYTES")]
    pmtu: PmtuArg,
    /// What to ask of the peer's ACKs when it supports ACK frequency: none, bquic (paper
    /// 001's decimation) or adaptive (fewer ACKs past slow start, immediate ones when needed).
    #[arg(long, default_value = "none")]
    ack_frequency: AckFrequencyPolicy,
    /// How loss detection treats packets that arrive out of order: adaptive (the packet and
    /// time thresholds grow with the reordering that spurious losses show, up to 1000 packets
    /// and twice the RTT, and decay after 16 RTTs without; a window reduction whose losses
    /// all arrived after all is undone) or fixed (RFC 9002: 3 packets, 9/8 of the RTT).
    #[arg(long, default_value = "fixed", value_name = "adaptive|fixed")]
    reordering: qfec_proto::recovery::Reordering,
    /// Write TLS secrets to the file named by SSLKEYLOGFILE (for Wireshark); on whenever
    /// SSLKEYLOGFILE is set, as with other QUIC implementations.
    #[arg(long)]
    keylog: bool,
    /// Write a qlog (JSON-SEQ) file per connection into DIR, named
    /// <original destination connection ID>_<client|server>.sqlog; the QLOGDIR environment
    /// variable does the same.
    #[arg(long, value_name = "DIR")]
    qlog: Option<PathBuf>,
    /// Idle timeout in seconds.
    #[arg(long, default_value_t = 30)]
    idle_timeout: u64,
    /// FEC to send when the peer decodes it: on (= adaptive, ours), rquic, rquic(ss=off),
    /// rquic(tail=off), xor, xor(K,DEPTH), rs, rs(K,M), rlc, rlc(WINDOW,INTERVAL[,REPAIRS][,gf2][,dt=N]), or none.
    #[arg(long, default_value = "none", value_parser = parse_fec)]
    fec: FecArg,
    /// How losses the peer recovered reach congestion control: signal, mask or
    /// differentiate (mask without a standing queue, signal with one). Default: the code's
    /// own, mask for rquic (as paper 000 does), differentiate for adaptive (`on`), signal for
    /// fixed codes.
    #[arg(long)]
    fec_cc: Option<RecoveredLossMode>,
    /// Do not offer to decode the peer's FEC (plain QUIC unless --fec is given).
    #[arg(long)]
    no_fec_decode: bool,
    /// Offer multipath QUIC (draft-ietf-quic-multipath-21); used when the peer offers it too.
    #[arg(long)]
    multipath: bool,
    /// With --multipath: the highest path ID the peer may use at once (paths 0..=N).
    #[arg(long, value_name = "N", default_value_t = 3, requires = "multipath")]
    max_path_id: u32,
    /// With --multipath: which paths carry new data: minrtt (the fastest with room, backups
    /// last), backup (one path at a time, the next when it fails), single (the first path
    /// only), rr (each packet on the next path), highrb (each packet on a path drawn by its
    /// window's room), fec-aware (FEC symbols placed by each path's measured losses) or
    /// redundant (every packet on every path).
    #[arg(long, default_value = "minrtt", requires = "multipath")]
    scheduler: qfec_proto::Scheduler,
}

/// The options' defaults, as `qfec server` and `qfec client` without options use them.
impl Default for TransportArgs {
    fn default() -> Self {
        #[derive(clap::Parser)]
        struct Defaults {
            #[command(flatten)]
            transport: TransportArgs,
        }
        <Defaults as clap::Parser>::parse_from(["qfec"]).transport
    }
}

/// A `--pmtu` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PmtuArg {
    Auto,
    Off,
    Max(u16),
}

pub(crate) fn parse_pmtu(s: &str) -> Result<PmtuArg, String> {
    match s {
        "auto" => Ok(PmtuArg::Auto),
        "off" => Ok(PmtuArg::Off),
        n => match n.parse::<u16>() {
            Ok(b) if (1200..=65527).contains(&b) => Ok(PmtuArg::Max(b)),
            _ => Err(format!(
                "{n:?}: give auto, off, or a UDP payload size in bytes from 1200 to 65527"
            )),
        },
    }
}

/// A `--fec` value: `None` for "none".
#[derive(Clone, Copy, Debug)]
struct FecArg(Option<qfec_fec::Redundancy>);

fn parse_fec(s: &str) -> Result<FecArg, String> {
    qfec_fec::parse_fec(s)
        .map(FecArg)
        .map_err(|e| e.to_string())
}

impl TransportArgs {
    /// Whether multipath QUIC is offered (`--multipath`).
    pub(crate) fn multipath(&self) -> bool {
        self.multipath
    }

    /// Whether to log TLS secrets: `--keylog`, or SSLKEYLOGFILE set.
    /// Whether to write TLS secrets: --keylog (which needs SSLKEYLOGFILE) or SSLKEYLOGFILE.
    fn keylog(&self) -> Result<bool> {
        let file = std::env::var_os("SSLKEYLOGFILE").filter(|f| !f.is_empty());
        if self.keylog && file.is_none() {
            anyhow::bail!(
                "--keylog writes to the file SSLKEYLOGFILE names, and SSLKEYLOGFILE is not set: \
                 run with SSLKEYLOGFILE=PATH"
            );
        }
        Ok(file.is_some())
    }

    /// The qlog directory: `--qlog`, else QLOGDIR.
    /// `--pmtu auto`: a client takes its bound from the route to the server.
    pub(crate) fn pmtu_auto(&self) -> bool {
        self.pmtu == PmtuArg::Auto
    }

    fn qlog_dir(&self) -> Option<PathBuf> {
        self.qlog
            .clone()
            .or_else(|| std::env::var_os("QLOGDIR").map(PathBuf::from))
            .filter(|d| !d.as_os_str().is_empty())
    }

    pub(crate) fn transport(&self) -> Result<TransportConfig> {
        let mut t = TransportConfig {
            congestion_controller: self.cc.factory(),
            pacing: !self.no_pacing,
            ecn: !self.no_ecn,
            ack_frequency: self.ack_frequency,
            reordering: self.reordering,
            max_idle_timeout: Duration::from_secs(self.idle_timeout),
            receive_window: 16 << 20,
            stream_receive_window: 8 << 20,
            ..TransportConfig::default()
        };
        let upper = match self.pmtu {
            PmtuArg::Off => None,
            PmtuArg::Max(b) => Some(b),
            // A client narrows this to its route to the server (`fetch`).
            PmtuArg::Auto => Some(qfec_io::mtu::interfaces_max_udp_payload().unwrap_or(1472)),
        };
        t.mtu_discovery = upper.map(|upper_bound| qfec_proto::MtuDiscoveryConfig {
            upper_bound,
            ..Default::default()
        });
        if self.fec.0.is_some() || !self.no_fec_decode {
            let mut f = FecConfig::new(self.fec.0);
            f.mode = self
                .fec_cc
                .or_else(|| self.fec.0.map(|r| r.default_mode()))
                .unwrap_or(RecoveredLossMode::Signal);
            if self.no_fec_decode {
                f.decode.clear();
            }
            f.install(&mut t);
        }
        if self.multipath {
            t.multipath = Some(qfec_proto::MultipathConfig {
                max_path_id: self.max_path_id,
                scheduler: self.scheduler.factory(),
            });
        }
        if let Some(dir) = self.qlog_dir() {
            let mut o = QlogOptions::new(dir);
            o.extra_schemas.push(qfec_fec::events::QLOG_SCHEMA.into());
            o.wall_clock_time = Some(rfc3339_now());
            t.events = Some(Arc::new(QlogFactory::new(o)?));
        }
        Ok(t)
    }
}

/// The current UTC time as RFC 3339 (qlog's `wall_clock_time`: when the driver's clock, and
/// with it the trace's time 0, started).
fn rfc3339_now() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (the proleptic Gregorian calendar).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// An endpoint keyed from the OS random source, or from `seed` when one is given.
pub(crate) fn new_endpoint(
    server: Option<Arc<ServerConfig>>,
    seed: Option<u64>,
) -> Result<Endpoint> {
    let config = Arc::new(EndpointConfig::default());
    Ok(match seed {
        Some(seed) => Endpoint::new(config, server, seed),
        None => Endpoint::with_secrets(config, server, qfec_io::os_secrets()?),
    })
}

/// The hq applications are the core's sans-IO `Application`s: the simulator's node drives the
/// very code the socket driver does.
#[cfg(test)]
mod in_the_simulator {
    use std::ops::ControlFlow;
    use std::time::Duration;

    use qfec_lab::quic::QuicNode;
    use qfec_proto::crypto::deterministic;
    use qfec_proto::{Application, ClientConfig, Instant};
    use qfec_sim::{LinkSpec, LossSpec, RunOutcome, Simulator};
    use sha2::{Digest, Sha256};

    use super::client::HqClient;
    use super::*;

    enum Hq {
        Server(qfec_http::Server),
        Client(Box<HqClient>),
    }

    impl Application for Hq {
        fn poll(&mut self, now: Instant, ep: &mut Endpoint) -> ControlFlow<()> {
            match self {
                Hq::Server(s) => s.poll(now, ep),
                Hq::Client(c) => c.poll(now, ep),
            }
        }

        fn poll_timeout(&self) -> Option<Instant> {
            match self {
                Hq::Server(s) => s.poll_timeout(),
                Hq::Client(c) => c.poll_timeout(),
            }
        }
    }

    #[test]
    fn an_hq_download_over_a_lossy_simulated_link_arrives_intact() {
        let root = std::env::temp_dir().join(format!("qfec-hq-sim-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        std::fs::write(root.join("f.bin"), &data).unwrap();

        deterministic::seed_thread(3);
        let (s_addr, c_addr) = (
            "10.0.0.1:443".parse().unwrap(),
            "10.0.0.2:5000".parse().unwrap(),
        );
        let mut server_cfg = ServerConfig::new(deterministic::server_config(&[ALPN_HQ]));
        server_cfg.transport = Arc::new(TransportConfig::default());
        let server = Endpoint::new(
            Arc::new(EndpointConfig::default()),
            Some(Arc::new(server_cfg)),
            1,
        );
        let mut client = Endpoint::new(Arc::new(EndpointConfig::default()), None, 2);
        let h = client
            .connect(
                Instant::ZERO,
                ClientConfig::new(deterministic::client_config(&[ALPN_HQ])),
                s_addr,
                "localhost",
            )
            .unwrap();
        let url = parse_url("https://10.0.0.1:443/f.bin").unwrap();
        let app = HqClient::new(
            h,
            vec![url],
            vec![None],
            Instant::ZERO + Duration::from_secs(60),
            Instant::ZERO,
            true,
        );
        let mut sim: Simulator<QuicNode<Hq>> = Simulator::new(9);
        sim.add_node(
            s_addr,
            QuicNode::serving(
                server,
                Hq::Server(qfec_http::Server::new(std::rc::Rc::new(
                    qfec_http::content::Files::new(&root).unwrap(),
                ))),
            ),
        );
        let c = sim.add_node(
            c_addr,
            QuicNode::finishing(client, Hq::Client(Box::new(app))),
        );
        let link = |name: &str| {
            LinkSpec::new(name, 20_000_000, Duration::from_millis(10))
                .air_loss(LossSpec::Bernoulli { p: 0.03 })
        };
        sim.connect(s_addr, c_addr, &link("down"), &link("up"));
        let outcome = sim.run_until_done(Instant::ZERO + Duration::from_secs(60));
        assert!(matches!(outcome, RunOutcome::AllDone), "{outcome:?}");
        let Hq::Client(app) = &mut sim.node_mut(c).app else {
            unreachable!()
        };
        let o = app.outcome().unwrap();
        assert_eq!(o.failed, 0, "{:?}", o.lines);
        assert_eq!(o.files[0].result.as_ref().unwrap().0, data.len() as u64);
        let sha: String = Sha256::digest(&data)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert!(o.lines[0].contains(&sha), "{:?}", o.lines);
        let _ = std::fs::remove_dir_all(&root);
    }
}
