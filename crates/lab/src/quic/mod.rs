//! Runs a [`RunSpec`] with real qfec-proto endpoints over the simulator: real packet
//! protection with deterministic TLS randomness, so the same seed gives the same bytes.
//!
//! The client downloads from the server (the lab's direction of interest: `down` carries the
//! data). Requests are 8-byte sizes on bidirectional streams; the real-time workload uses
//! DATAGRAM frames.

mod client;
mod content;
mod node;
mod server;

use std::sync::Arc;
use std::time::Duration;

use qfec_fec::FecConfig;
use qfec_proto::crypto::deterministic;
use qfec_proto::events::EventSinkFactory;
use qfec_proto::recovery::cc::{BbrConfig, CongestionControl, CubicConfig, NewRenoConfig};
use qfec_proto::{
    ClientConfig, Endpoint, EndpointConfig, Instant, ServerConfig, Side, TransportConfig,
};
use qfec_qlog::{QlogFactory, QlogOptions};
use qfec_sim::{RunOutcome, Simulator};

use crate::campaign::RunSpec;
use crate::config::ProtocolSettings;
use crate::metrics::RunRecord;
use crate::presets::{client_addr, server_addr};
use crate::trace::{Fanout, SeriesFactory};
use crate::workload::Workload;

pub use client::ClientApp;
pub use content::Content;
pub use node::QuicNode;
pub use server::ServerApp;

pub const ALPN: &[u8] = b"qfec-lab";

/// Largest DATAGRAM frame both sides accept in the real-time workload.
const MAX_DATAGRAM: u64 = 1400;

/// The transport configuration that `settings` describe for one side; an error names the
/// setting. Every lab workload is a download, so FEC is sent by the server; the client only
/// decodes.
pub fn transport_config(
    settings: &ProtocolSettings,
    workload: &Workload,
    side: Side,
) -> Result<TransportConfig, String> {
    let mut t = TransportConfig::default();
    let iw = settings.initial_window_packets.map(u64::from);
    match settings.congestion.unwrap_or(CongestionControl::Cubic) {
        CongestionControl::NewReno => {
            let mut c = NewRenoConfig::default();
            if let Some(iw) = iw {
                c.initial_window_packets = iw;
            }
            t.congestion_controller = Arc::new(c);
        }
        CongestionControl::Cubic => {
            let mut c = CubicConfig::default();
            if let Some(iw) = iw {
                c.initial_window_packets = iw;
            }
            t.congestion_controller = Arc::new(c);
        }
        CongestionControl::Bbr => {
            let mut c = BbrConfig::default();
            if let Some(iw) = iw {
                c.initial_window_packets = iw;
            }
            t.congestion_controller = Arc::new(c);
        }
    }
    if let Some(p) = settings.pacing {
        t.pacing = p;
    }
    if let Some(n) = settings.ack_eliciting_threshold {
        if n == 0 {
            return Err("protocol.ack_eliciting_threshold: must be at least 1".into());
        }
        t.ack_eliciting_threshold = u64::from(n);
    }
    if let Some(d) = &settings.max_ack_delay {
        if d.0 >= Duration::from_millis(1 << 14) {
            return Err("protocol.max_ack_delay: must be below 16384 ms".into());
        }
        t.max_ack_delay = d.0;
    }
    if let Some(d) = &settings.initial_rtt {
        t.initial_rtt = d.0;
    }
    if let Some(m) = settings.max_datagram_size {
        if !(1200..=65527).contains(&m) {
            return Err(format!(
                "protocol.max_datagram_size: must be 1200..=65527, got {m}"
            ));
        }
        t.max_udp_payload_size = m as u16;
    }
    if let Some(r) = settings.fec {
        let mut c = FecConfig::new(side.is_server().then_some(r));
        c.mode = settings.fec_cc.unwrap_or_else(|| r.default_mode());
        c.install(&mut t);
    }
    // Windows large enough that flow control never limits a lab transfer.
    t.receive_window = 32 << 20;
    t.max_receive_window = 64 << 20;
    t.stream_receive_window = 16 << 20;
    t.max_stream_receive_window = 64 << 20;
    t.send_buffer = 8 << 20;
    t.max_idle_timeout = Duration::from_secs(120);
    t.max_concurrent_bidi_streams = 1000;
    if matches!(workload, Workload::Realtime(_)) {
        t.max_datagram_frame_size = Some(MAX_DATAGRAM);
        t.datagram_receive_buffer = 100_000;
    }
    Ok(t)
}

/// Captures to write during a run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// A pcap of every datagram as sent and as delivered (losses show as unmatched sends).
    pub pcap: Option<std::path::PathBuf>,
    /// The simulator's text event log.
    pub event_log: Option<std::path::PathBuf>,
    /// A directory for qlog files: one per endpoint, named by the run (variant, point, seed),
    /// the original destination connection ID and the vantage point.
    pub qlog: Option<std::path::PathBuf>,
    /// Record the run's time series ([`crate::trace::RunTrace`]) in its record.
    pub trace: bool,
    /// Another event sink for both endpoints' connections (tests, measurements).
    pub events: Option<Arc<dyn EventSinkFactory>>,
}

/// Runs one spec; failures become a record with `error` set.
pub fn run(spec: &RunSpec) -> RunRecord {
    run_with(spec, &RunOptions::default())
}

/// Like [`run`], with captures.
pub fn run_with(spec: &RunSpec, options: &RunOptions) -> RunRecord {
    let mut rec = spec.record();
    let series = options.trace.then(|| SeriesFactory::new(Side::Server));
    let events = match event_sinks(spec, options, series.as_ref()) {
        Ok(e) => e,
        Err(e) => {
            rec.error = Some(e);
            return rec;
        }
    };
    let config = |side| {
        transport_config(&spec.protocol, &spec.workload, side).map(|mut t| {
            t.events = events.clone();
            Arc::new(t)
        })
    };
    let (server_transport, client_transport) = match (config(Side::Server), config(Side::Client)) {
        (Ok(s), Ok(c)) => (s, c),
        (Err(e), _) | (_, Err(e)) => {
            rec.error = Some(e);
            return rec;
        }
    };
    deterministic::seed_thread(spec.seed);
    let mut server_cfg = ServerConfig::new(deterministic::server_config(&[ALPN]));
    server_cfg.transport = server_transport;
    let server_ep = Endpoint::new(
        Arc::new(EndpointConfig::default()),
        Some(Arc::new(server_cfg)),
        spec.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15),
    );
    let mut client_ep = Endpoint::new(
        Arc::new(EndpointConfig::default()),
        None,
        spec.seed ^ 0xc11e,
    );
    let mut client_cfg = ClientConfig::new(deterministic::client_config(&[ALPN]));
    client_cfg.transport = client_transport;
    let start = Instant::ZERO;
    let conn = match client_ep.connect(start, client_cfg, server_addr(), "localhost") {
        Ok(h) => h,
        Err(e) => {
            rec.error = Some(e.to_string());
            return rec;
        }
    };
    let mut sim: Simulator<QuicNode> = Simulator::new(spec.seed);
    let server_id = sim.add_node(
        server_addr(),
        QuicNode::server(server_ep, ServerApp::new(&spec.workload)),
    );
    let mut client_app = ClientApp::new(conn, &spec.workload, start);
    if options.trace {
        client_app.record_goodput();
    }
    let client_id = sim.add_node(client_addr(), QuicNode::client(client_ep, client_app));
    let (down, _) = spec.links.install(&mut sim, server_addr(), client_addr());
    if let Err(e) = attach_captures(&mut sim, options) {
        rec.error = Some(e);
        return rec;
    }
    let limit = start + spec.duration_limit;
    let outcome = sim.run_until_done(limit);
    let client = sim.node(client_id);
    let server = sim.node(server_id);
    client.fill_record(&mut rec);
    server.fill_record(&mut rec);
    if let (Some(s), node::App::Client(app)) = (&series, &client.app) {
        rec.trace = Some(s.finish(app.goodput_bins().unwrap_or_default()));
    }
    if let Some(e) = rec.error.as_mut() {
        // Say where the sender stood: what a user needs to understand a stall.
        if let Some(d) = server.diagnostics() {
            e.push_str(&format!(" (server: {d})"));
        }
        if let Some(d) = client.diagnostics() {
            e.push_str(&format!(" (client: {d})"));
        }
    }
    let q = sim.link_stats(down);
    let span = rec
        .completion_time_s
        .map_or(sim.now() - start, Duration::from_secs_f64);
    rec.down_queue_mean_bytes = q.mean_queue_bytes(span);
    rec.down_queue_max_bytes = q.max_queue_bytes;
    rec.down_dropped = q.dropped();
    rec.sim_events = sim.stats().events;
    rec.sim_time_s = sim.now().as_nanos() as f64 / 1e9;
    rec.event_hash = sim.event_hash();
    if let Err(e) = sim.flush() {
        rec.error
            .get_or_insert_with(|| format!("writing captures: {e}"));
    }
    if rec.error.is_none() {
        match outcome {
            RunOutcome::AllDone => {}
            RunOutcome::Limit => {
                rec.error = Some(format!(
                    "not finished within {:?} of simulated time",
                    spec.duration_limit
                ))
            }
            other => rec.error = Some(format!("simulation stopped early: {other:?}")),
        }
    }
    rec
}

/// The event sinks `options` ask for: qlog files and the time series.
fn event_sinks(
    spec: &RunSpec,
    options: &RunOptions,
    series: Option<&SeriesFactory>,
) -> Result<Option<Arc<dyn EventSinkFactory>>, String> {
    let mut all: Vec<Arc<dyn EventSinkFactory>> = Vec::new();
    if let Some(dir) = &options.qlog {
        let mut o = QlogOptions::new(dir);
        o.prefix = format!("{}_", run_label(spec));
        o.title = format!("qfec lab: {}", run_label(spec));
        o.extra_schemas.push(qfec_fec::events::QLOG_SCHEMA.into());
        all.push(Arc::new(QlogFactory::new(o).map_err(|e| e.to_string())?));
    }
    if let Some(s) = series {
        all.push(Arc::new(s.clone()));
    }
    if let Some(e) = &options.events {
        all.push(e.clone());
    }
    Ok(match all.len() {
        0 => None,
        1 => all.pop(),
        _ => Some(Arc::new(Fanout(all))),
    })
}

/// A run's name for files: variant, point (preset or scenario, loss, workload) and seed.
pub fn run_label(spec: &RunSpec) -> String {
    let point = spec.preset.as_deref().unwrap_or(&spec.scenario);
    let raw = format!(
        "{}_{}_loss{}_{}_s{}",
        spec.variant,
        point,
        spec.loss * 100.0,
        spec.workload.label(),
        spec.seed
    );
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

fn attach_captures(sim: &mut Simulator<QuicNode>, options: &RunOptions) -> Result<(), String> {
    let create = |p: &std::path::Path| {
        std::fs::File::create(p)
            .map(std::io::BufWriter::new)
            .map_err(|e| format!("cannot create {}: {e}", p.display()))
    };
    if let Some(p) = &options.pcap {
        sim.set_pcap(Box::new(create(p)?), qfec_sim::PcapMode::Both)
            .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    if let Some(p) = &options.event_log {
        sim.set_text_log(Box::new(create(p)?));
    }
    Ok(())
}
