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

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use qfec_fec::FecConfig;
use qfec_proto::crypto::deterministic;
use qfec_proto::events::EventSinkFactory;
use qfec_proto::recovery::cc::{CongestionControl, CubicConfig, UnenforcedConfig};
use qfec_proto::{
    ClientConfig, Endpoint, EndpointConfig, Instant, MultipathConfig, Scheduler, ServerConfig,
    Side, TransportConfig,
};
use qfec_qlog::{QlogFactory, QlogOptions};
use qfec_sim::{RunOutcome, Simulator};

use crate::campaign::{FlowSpec, RunSpec};
use crate::config::ProtocolSettings;
use crate::metrics::{FlowRecord, RunRecord, StationRecord, WlanRecord, jain_index};
use crate::presets::{client_addr, server_addr};
use crate::trace::{Fanout, SeriesFactory};
use crate::workload::Workload;

pub use client::ClientApp;
pub use content::Content;
pub use node::QuicNode;
pub use server::ServerApp;

pub const ALPN: &[u8] = b"qfec-lab";

/// The ALPN of a flow's workload: `h3` for web pages (loaded over HTTP/3) and the real-time
/// source over HTTP datagrams (RFC 9297), the lab's own protocol otherwise.
pub fn alpn_of(workload: &Workload) -> &'static [u8] {
    match workload {
        Workload::Page(_) => qfec_http::h3::ALPN_H3,
        Workload::Realtime(s) if s.delivery == crate::workload::Delivery::H3Datagram => {
            qfec_http::h3::ALPN_H3
        }
        _ => ALPN,
    }
}

/// Most earlier connections of a returning client.
pub const MAX_EARLIER_CONNECTIONS: u32 = 100;

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
    if let Some(n) = settings.earlier_connections {
        if n > MAX_EARLIER_CONNECTIONS {
            return Err(format!(
                "protocol.earlier_connections = {n}: give at most {MAX_EARLIER_CONNECTIONS}"
            ));
        }
        if n > 0 && matches!(workload, Workload::Realtime(_)) {
            return Err(
                "protocol.earlier_connections: a returning client is for downloads \
                 (bulk, files, page), not the real-time workload"
                    .into(),
            );
        }
    }
    if let Some(iw) = settings.initial_window_packets
        && !crate::config::INITIAL_WINDOW_PACKETS.contains(&iw)
    {
        return Err(format!(
            "protocol.initial_window_packets = {iw}: give a window of 1 to 10000 packets"
        ));
    }
    let mut t = TransportConfig::default();
    let cc = settings.congestion.unwrap_or(CongestionControl::Cubic);
    t.congestion_controller = match (settings.initial_window_packets, settings.hystart) {
        (iw, Some(true)) => {
            if cc != CongestionControl::Cubic {
                return Err(format!(
                    "protocol.hystart: HyStart++ is part of congestion = \"cubic\", not \"{cc}\""
                ));
            }
            let defaults = CubicConfig::default();
            Arc::new(CubicConfig {
                hystart: true,
                initial_window_packets: iw.map_or(defaults.initial_window_packets, u64::from),
                ..defaults
            })
        }
        (None, _) => cc.factory(),
        (Some(iw), _) => cc
            .factory_with_initial_window(u64::from(iw))
            .ok_or_else(|| {
                format!(
                    "protocol.initial_window_packets: there is no window with congestion = \"{cc}\""
                )
            })?,
    };
    if settings.enforce_window == Some(false) {
        if cc == CongestionControl::Disabled {
            return Err(
                "protocol.enforce_window: congestion = \"disabled\" has no window to compute"
                    .into(),
            );
        }
        t.congestion_controller = Arc::new(UnenforcedConfig(t.congestion_controller.clone()));
    }
    if let Some(p) = settings.pacing {
        t.pacing = p;
    }
    t.ecn = settings.ecn.unwrap_or(false);
    if let Some(r) = settings.reordering {
        t.reordering = r;
    }
    if let Some(a) = settings.ack_frequency {
        t.ack_frequency = a;
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
        // The server sends what the run names. A client sends `adaptive` too, as qfec's
        // client does with `--fec on`: it protects the request of a download (its loss waits
        // for a probe timeout as the response's would) and the client's handshake flight; the
        // papers' codes are run as the papers ran them, by the server only (they ask for no
        // handshake copies either).
        let client_sends = matches!(r, qfec_fec::Redundancy::Adaptive(_));
        let mut c = FecConfig::new((side.is_server() || client_sends).then_some(r));
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
        // Stream delivery opens a stream per message; retransmissions may keep many open.
        t.max_concurrent_uni_streams = 1000;
    }
    Ok(t)
}

/// A flow's server and client transport settings.
pub type FlowTransports = (Arc<TransportConfig>, Arc<TransportConfig>);

/// Server and client transport settings per flow of `spec`, flow `i`'s connections reporting
/// to `events(i)`; an error names the setting (and the flow, when the run has several).
pub fn flow_transports(
    spec: &RunSpec,
    flows: &[FlowSpec],
    events: impl Fn(usize) -> Option<Arc<dyn EventSinkFactory>>,
) -> Result<Vec<FlowTransports>, String> {
    flows
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let config = |side| {
                transport_config(&f.protocol, &f.workload, side).and_then(|mut t| {
                    t.events = events(i);
                    t.multipath = multipath(spec, &f.protocol)?;
                    Ok(Arc::new(t))
                })
            };
            match (config(Side::Server), config(Side::Client)) {
                (Ok(s), Ok(c)) => Ok((s, c)),
                (Err(e), _) | (_, Err(e)) if spec.flows.is_empty() => Err(e),
                (Err(e), _) | (_, Err(e)) => Err(format!("flow {}: {e}", f.name)),
            }
        })
        .collect()
}

/// Multipath QUIC for a run with more than one path: as many path IDs as paths (at least the
/// core's default), and the flow's scheduler.
fn multipath(spec: &RunSpec, p: &ProtocolSettings) -> Result<Option<MultipathConfig>, String> {
    if spec.extra_paths.is_empty() {
        if p.scheduler.is_some() {
            return Err(
                "protocol.scheduler: a scheduler chooses among paths; add [[paths]] (or drop it)"
                    .into(),
            );
        }
        return Ok(None);
    }
    let defaults = MultipathConfig::default();
    Ok(Some(MultipathConfig {
        max_path_id: defaults.max_path_id.max(spec.extra_paths.len() as u32),
        scheduler: p.scheduler.unwrap_or(Scheduler::MinRtt).factory(),
    }))
}

/// The address flow `i`'s client opens path `k` (1, 2, ...) from: its own address with the
/// second octet `k`.
fn path_addr(client: SocketAddr, k: usize) -> SocketAddr {
    match client.ip() {
        std::net::IpAddr::V4(v4) => {
            let o = v4.octets();
            SocketAddr::from((
                [o[0], o[1].wrapping_add(k as u8), o[2], o[3]],
                client.port(),
            ))
        }
        std::net::IpAddr::V6(v6) => {
            let mut o = v6.segments();
            o[1] = o[1].wrapping_add(k as u16);
            SocketAddr::from((o, client.port()))
        }
    }
}

/// The outside address of a client's `j`-th NAT rebinding (1, 2, ...): in 100.64.0.0/10
/// (shared address space, RFC 6598), another port.
fn rebound_addr(client: SocketAddr, j: usize) -> SocketAddr {
    let flow = match client.ip() {
        std::net::IpAddr::V4(v4) => v4.octets()[2],
        std::net::IpAddr::V6(v6) => v6.octets()[15],
    };
    SocketAddr::from((
        [100, 64, flow, (j % 256) as u8],
        client.port().wrapping_add(j as u16),
    ))
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

/// Addresses of flow `i`'s server and client (flow 0: [`server_addr`], [`client_addr`]).
fn flow_addrs(i: usize) -> (SocketAddr, SocketAddr) {
    let (s, c) = (server_addr(), client_addr());
    let net = |a: SocketAddr| match a.ip() {
        std::net::IpAddr::V4(v4) => {
            let o = v4.octets();
            SocketAddr::from(([o[0], o[1], i as u8, o[3]], a.port()))
        }
        std::net::IpAddr::V6(_) => a,
    };
    (net(s), net(c))
}

/// Like [`run`], with captures.
pub fn run_with(spec: &RunSpec, options: &RunOptions) -> RunRecord {
    let mut rec = spec.record();
    let flows = match spec.flow_list() {
        Ok(f) => f,
        Err(e) => {
            rec.error = Some(e);
            return rec;
        }
    };
    // The time series follow the first flow's server; qlog files cover every connection.
    let series = options.trace.then(|| SeriesFactory::new(Side::Server));
    let qlog = match qlog_sink(spec, options) {
        Ok(q) => q,
        Err(e) => {
            rec.error = Some(e);
            return rec;
        }
    };
    let first_events = event_sinks(&qlog, options, series.as_ref());
    let other_events = event_sinks(&qlog, options, None);
    let events = |i| {
        if i == 0 {
            first_events.clone()
        } else {
            other_events.clone()
        }
    };
    let transports = match flow_transports(spec, &flows, events) {
        Ok(t) => t,
        Err(e) => {
            rec.error = Some(e);
            return rec;
        }
    };
    deterministic::seed_thread(spec.seed);
    let mut sim: Simulator<QuicNode> = Simulator::new(spec.seed);
    let start = Instant::ZERO;
    // (server node, client node) per flow.
    let mut nodes = Vec::with_capacity(flows.len());
    for (i, (f, (server_transport, client_transport))) in flows.iter().zip(transports).enumerate() {
        let (server, client) = flow_addrs(i);
        // Flow 0 keeps the seeds of a single-flow run.
        let salt = (i as u64).wrapping_mul(0x0100_0000_01b3);
        let alpn = alpn_of(&f.workload);
        let mut server_cfg = ServerConfig::new(deterministic::server_config(&[alpn]));
        server_cfg.transport = server_transport;
        let ep_config = Arc::new(EndpointConfig {
            path_memory_capacity: match f.protocol.path_memory {
                Some(false) => 0,
                _ => EndpointConfig::default().path_memory_capacity,
            },
            ..EndpointConfig::default()
        });
        let server_ep = Endpoint::new(
            ep_config.clone(),
            Some(Arc::new(server_cfg)),
            spec.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ salt,
        );
        let mut client_ep = Endpoint::new(ep_config, None, spec.seed ^ 0xc11e ^ salt);
        let mut client_cfg = ClientConfig::new(deterministic::client_config(&[alpn]));
        client_cfg.transport = client_transport;
        let flow_start = start + f.start;
        let earlier = f.protocol.earlier_connections.unwrap_or(0);
        let returning = (earlier > 0).then(|| client_cfg.clone());
        let app = if f.start.is_zero() {
            match client_ep.connect(start, client_cfg, server, "localhost") {
                Ok(h) => ClientApp::new(h, &f.workload, start),
                Err(e) => {
                    rec.error = Some(e.to_string());
                    return rec;
                }
            }
        } else {
            ClientApp::deferred(client_cfg, server, &f.workload, flow_start)
        };
        let locals = (1..=spec.extra_paths.len())
            .map(|k| path_addr(client, k))
            .collect();
        let app = match returning {
            Some(cfg) => app.with_earlier_connections(earlier, cfg, server, &f.workload),
            None => app,
        };
        let mut app = app.with_paths(locals, server);
        if f.protocol
            .scheduler
            .is_some_and(|s| qfec_proto::multipath::SchedulerFactory::build(&s).replicates())
        {
            app = app.expecting_copies();
        }
        let s = sim.add_node(
            server,
            QuicNode::server(server_ep, ServerApp::new(&f.workload)),
        );
        let c = sim.add_node(client, QuicNode::client(client_ep, app));
        for k in 1..=spec.extra_paths.len() {
            sim.add_address(c, path_addr(client, k));
        }
        for (j, at) in spec.rebindings.iter().enumerate() {
            sim.add_rebinding(start + *at, client, rebound_addr(client, j + 1));
        }
        nodes.push((s, c));
    }
    // WLAN links (`Serializer::Wifi`) become the two stations of one channel here: the
    // access point's downlink and the client's uplink. Every flow's client sends through the
    // one uplink, so with several flows the clients share one station queue.
    let down = sim.add_link(&spec.links.down);
    let up = sim.add_link(&spec.links.up);
    for i in 0..flows.len() {
        let (server, client) = flow_addrs(i);
        sim.add_route(server, client, down);
        sim.add_route(client, server, up);
    }
    // Path k: its own two links, between the server and the client's k-th address.
    for (k, pair) in spec.extra_paths.iter().enumerate() {
        let (down, up) = (sim.add_link(&pair.down), sim.add_link(&pair.up));
        for i in 0..flows.len() {
            let (server, client) = flow_addrs(i);
            let local = path_addr(client, k + 1);
            sim.add_route(server, local, down);
            sim.add_route(local, server, up);
        }
    }
    if let Err(e) = attach_captures(&mut sim, options) {
        rec.error = Some(e);
        return rec;
    }
    let limit = start + spec.duration_limit;
    let outcome = sim.run_until_done(limit);
    if spec.flows.is_empty() {
        let (server, client) = nodes[0];
        sim.node(client).fill_record(&mut rec);
        sim.node(server).fill_record(&mut rec);
    } else {
        let results = nodes
            .iter()
            .map(|&(server, client)| {
                let mut r = RunRecord::default();
                sim.node(client).fill_record(&mut r);
                sim.node(server).fill_record(&mut r);
                FlowResult {
                    record: r,
                    client: sim.node(client).client_app().expect("a client node"),
                }
            })
            .collect();
        fill_flows(&flows, results, sim.now(), &mut rec);
    }
    if let Some(s) = &series {
        let first = sim.node(nodes[0].1).client_app().expect("a client node");
        rec.trace = Some(s.finish(first.delivered()));
    }
    if let Some(e) = rec.error.as_mut() {
        // One line for people: when, and how far the transfer got. Where each endpoint's
        // connection stood (what a developer needs to understand a stall) goes beside it.
        e.push_str(&format!(
            " at {:.1} s of simulated time, {} of {} delivered",
            (sim.now() - start).as_secs_f64(),
            crate::workload::short_size(rec.app_bytes),
            crate::workload::short_size(flows.iter().map(|f| f.workload.total_bytes()).sum()),
        ));
        let (server, client) = nodes[0];
        let detail: Vec<String> = [("server", server), ("client", client)]
            .into_iter()
            .filter_map(|(side, n)| Some(format!("{side}: {}", sim.node(n).diagnostics()?)))
            .collect();
        if !detail.is_empty() {
            rec.error_detail = Some(detail.join("; "));
        }
    }
    let q = sim.link_stats(down);
    let span = rec
        .completion_time_s
        .map_or(sim.now() - start, Duration::from_secs_f64);
    rec.down_queue_mean_bytes = q.mean_queue_bytes(span);
    rec.down_queue_max_bytes = q.max_queue_bytes;
    rec.down_dropped = q.dropped();
    rec.down_offered = q.offered_packets;
    rec.down_offered_bytes = q.offered_bytes;
    rec.down_ce_marked = q.marked_ce;
    if let (Some(d), Some(u), Some(ch)) = (
        sim.wifi_stats(down),
        sim.wifi_stats(up),
        sim.wifi_channel_stats(down),
    ) {
        let run_ns = (sim.now() - start).as_nanos().max(1) as f64;
        rec.wlan = Some(WlanRecord {
            down: StationRecord::from_stats(d),
            up: StationRecord::from_stats(u),
            busy_fraction: ch.busy_ns as f64 / run_ns,
        });
    }
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
                    "not finished within {} of simulated time ({} of {} delivered; a longer \
                     --time-limit or duration_limit gives it more)",
                    crate::units::fmt_duration(spec.duration_limit),
                    crate::workload::short_size(rec.app_bytes),
                    crate::workload::short_size(
                        flows.iter().map(|f| f.workload.total_bytes()).sum()
                    ),
                ))
            }
            other => rec.error = Some(format!("simulation stopped early: {other:?}")),
        }
    }
    rec
}

/// What one flow of a run measured: its record (client and server sides) and its client.
pub struct FlowResult<'a> {
    pub record: RunRecord,
    pub client: &'a ClientApp,
}

/// A run with several flows that ended at `end`: each flow's record, their sums in `rec`,
/// and their shares of the links while all were active. The clients' times share one
/// origin (the simulator's, or the emulator runner's clock).
pub fn fill_flows(
    flows: &[FlowSpec],
    results: Vec<FlowResult<'_>>,
    end: Instant,
    rec: &mut RunRecord,
) {
    let mut records = Vec::with_capacity(flows.len());
    // The interval all flows were active: from the last start to the first finish.
    let (mut from, mut to) = (Instant::ZERO, end);
    for (
        f,
        FlowResult {
            record: r,
            client: app,
        },
    ) in flows.iter().zip(results)
    {
        from = from.max(app.start());
        to = to.min(app.done_at().unwrap_or(end));
        records.push((f, r, app.delivered()));
    }
    let bin = crate::trace::BIN.as_nanos() as u64;
    // Whole bins inside the interval.
    let (b0, b1) = (
        from.as_nanos().div_ceil(bin) as usize,
        (to.as_nanos() / bin) as usize,
    );
    let mut first_start = f64::MAX;
    let mut last_finish: Option<f64> = Some(0.0);
    rec.completed = true;
    for (f, r, delivered) in records {
        let shared = (b1 > b0).then(|| {
            let bytes: u64 = delivered.iter().take(b1).skip(b0).sum();
            bytes as f64 * 8.0 / ((b1 - b0) as f64 * crate::trace::BIN.as_secs_f64())
        });
        let start_s = f.start.as_secs_f64();
        first_start = first_start.min(start_s);
        last_finish = match (last_finish, r.finished_time()) {
            (Some(l), Some(t)) => Some(l.max(start_s + t)),
            _ => None,
        };
        rec.completed &= r.completed;
        rec.app_bytes += r.app_bytes;
        rec.add_counters(&r);
        if let Some(e) = &r.error {
            rec.error
                .get_or_insert_with(|| format!("flow {}: {e}", f.name));
        }
        rec.flows.push(FlowRecord {
            name: f.name.clone(),
            workload: f.workload.label(),
            start_s,
            completed: r.completed,
            completion_time_s: r.completion_time_s,
            goodput_bps: r.goodput_bps,
            shared_goodput_bps: shared,
            app_bytes: r.app_bytes,
            bytes_on_wire: r.bytes_on_wire,
            retransmissions: r.retransmissions,
            fec_bytes: r.fec_bytes,
            recovered_symbols: r.recovered_symbols,
            app_data_fraction: r.app_data_fraction,
            rebuffering_s: r.rebuffering_s,
            error: r.error,
        });
    }
    if let Some(last) = last_finish.filter(|_| rec.completed) {
        let span = last - first_start;
        rec.completion_time_s = Some(span);
        rec.goodput_bps = Some(rec.app_bytes as f64 * 8.0 / span.max(1e-9));
    }
    let shares: Option<Vec<f64>> = rec.flows.iter().map(|f| f.shared_goodput_bps).collect();
    rec.fairness = shares.map(|s| jain_index(&s));
}

/// The qlog factory `options` ask for, shared by every flow of the run.
fn qlog_sink(
    spec: &RunSpec,
    options: &RunOptions,
) -> Result<Option<Arc<dyn EventSinkFactory>>, String> {
    let Some(dir) = &options.qlog else {
        return Ok(None);
    };
    let mut o = QlogOptions::new(dir);
    o.prefix = format!("{}_", run_label(spec));
    o.title = format!("qfec lab: {}", run_label(spec));
    o.extra_schemas.push(qfec_fec::events::QLOG_SCHEMA.into());
    Ok(Some(Arc::new(
        QlogFactory::new(o).map_err(|e| e.to_string())?,
    )))
}

/// The event sinks of one flow: qlog files, the time series, the caller's own.
fn event_sinks(
    qlog: &Option<Arc<dyn EventSinkFactory>>,
    options: &RunOptions,
    series: Option<&SeriesFactory>,
) -> Option<Arc<dyn EventSinkFactory>> {
    let mut all: Vec<Arc<dyn EventSinkFactory>> = Vec::new();
    all.extend(qlog.clone());
    if let Some(s) = series {
        all.push(Arc::new(s.clone()));
    }
    all.extend(options.events.clone());
    match all.len() {
        0 => None,
        1 => all.pop(),
        _ => Some(Arc::new(Fanout(all))),
    }
}

/// A run's name for files: variant, point (preset or scenario, loss, workload) and seed.
pub fn run_label(spec: &RunSpec) -> String {
    let point = spec.preset.as_deref().unwrap_or(&spec.scenario);
    // The loss in percent to 1e-4, so that 3.3 % is "3.3", not "3.3000000000000003".
    let pct = (spec.loss * 100.0 * 1e4).round() / 1e4;
    let raw = format!(
        "{}_{}_loss{}_{}_s{}",
        spec.variant,
        point,
        pct,
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
