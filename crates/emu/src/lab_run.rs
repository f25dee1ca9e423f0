//! Runs a lab [`RunSpec`] through the emulator on real sockets: the same applications
//! ([`ClientApp`], [`ServerApp`]), transport settings and links as `qfec_lab::quic::run`, but
//! the endpoints are driven by `qfec-io` over UDP sockets in the two namespaces, in real
//! time. The record has the same fields, so the simulator and the emulator compare run by
//! run.
//!
//! Every flow's server listens on [`LEFT_ADDR`] (port [`BASE_PORT`] + flow index) and its
//! client on [`RIGHT_ADDR`]: several flows share one namespace pair and one emulated link.
//! A multipath run (`RunSpec::extra_paths`, one flow) gives the client one more address per
//! path ([`crate::right_addr`]) and each path its own emulated links.
//! All endpoints run on the calling thread, on one clock, so flows' times compare.

use std::cell::Cell;
use std::net::{SocketAddr, UdpSocket};
use std::ops::ControlFlow;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use qfec_io::{Clock, Driver};
use qfec_lab::campaign::{FlowSpec, RunSpec};
use qfec_lab::metrics::{RunRecord, StationRecord, WlanRecord};
use qfec_lab::quic::{
    ClientApp, FlowResult, FlowTransports, ServerApp, fill_flows, flow_transports,
};
use qfec_proto::{
    Application, ClientConfig, ClientCryptoConfig, Endpoint, EndpointConfig, Instant, ServerConfig,
    ServerCryptoConfig,
};

use crate::{EmuConfig, EmuError, EmuStats, Emulator, LEFT_ADDR, RIGHT_ADDR, right_addr};

/// The first flow's server port; flow `i` uses `BASE_PORT + i`.
pub const BASE_PORT: u16 = 4433;

/// How often a server whose clients may all have finished looks again.
const SERVER_CHECK: Duration = Duration::from_millis(20);

/// A run through the emulator.
#[derive(Debug)]
pub struct EmuRun {
    /// What the simulator's runner would record; failures have `error` set.
    pub record: RunRecord,
    /// The emulated links' counters and timing error, when the emulator stopped cleanly.
    pub link: Option<EmuStats>,
}

/// Runs `spec` through a new emulator; failures of the run become a record with `error`
/// set, as in the simulator's runner. An emulator that cannot start (`EmuError::Unavailable`:
/// no root, no TUN; or a failed setup) is an error instead, since no run can succeed then.
pub fn run_spec(spec: &RunSpec) -> Result<EmuRun, EmuError> {
    let mut rec = spec.record();
    if !spec.extra_paths.is_empty() && !spec.flows.is_empty() {
        rec.error = Some(
            "the emulator runs several paths for one flow: drop [[flows]] or [[paths]]".into(),
        );
        return Ok(EmuRun {
            record: rec,
            link: None,
        });
    }
    let flows = spec.flow_list();
    let transports = flows
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|f| flow_transports(spec, f, |_| None));
    let (flows, transports) = match (flows, transports) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(e), _) | (_, Err(e)) => {
            rec.error = Some(e);
            return Ok(EmuRun {
                record: rec,
                link: None,
            });
        }
    };
    let mut config = EmuConfig::new(spec.links.clone());
    config.extra_paths = spec.extra_paths.clone();
    config.seed = spec.seed;
    let emu = Emulator::start(config)?;
    let sockets = bind_sockets(&emu, flows.len(), !spec.extra_paths.is_empty());
    let outcome = sockets.and_then(|(servers, clients)| {
        drive_flows(spec, &flows, transports, servers, clients)
            .map_err(|e| EmuError::Io("running the endpoints", e))
    });
    let stats = emu.stop();
    let (results, end) = match outcome {
        Ok(r) => r,
        Err(e @ EmuError::Unavailable(_)) => return Err(e),
        Err(e) => {
            rec.error = Some(e.to_string());
            return Ok(EmuRun {
                record: rec,
                link: stats.ok(),
            });
        }
    };
    fill_record(spec, &flows, results, end, &mut rec);
    match &stats {
        Ok(s) => add_link_stats(s, &mut rec),
        Err(e) => {
            rec.error.get_or_insert_with(|| e.to_string());
        }
    }
    Ok(EmuRun {
        record: rec,
        link: stats.ok(),
    })
}

/// Per flow, a server socket on the left and a client socket on the right; with
/// `multipath`, the client's is bound to the wildcard address, so that each path's packets
/// leave from its own address (IP_PKTINFO).
fn bind_sockets(
    emu: &Emulator,
    flows: usize,
    multipath: bool,
) -> Result<(Vec<UdpSocket>, Vec<UdpSocket>), EmuError> {
    let bind = |addr: SocketAddr| {
        (0..flows)
            .map(|i| {
                let port = if addr.port() == 0 {
                    0
                } else {
                    addr.port() + i as u16
                };
                let a = SocketAddr::new(addr.ip(), port);
                UdpSocket::bind(a).map_err(|e| EmuError::Io("binding a UDP socket", e))
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let servers = emu
        .left()
        .within(|| bind(SocketAddr::from((LEFT_ADDR, BASE_PORT))))??;
    let client_ip = if multipath {
        std::net::Ipv4Addr::UNSPECIFIED
    } else {
        RIGHT_ADDR
    };
    let clients = emu
        .right()
        .within(|| bind(SocketAddr::from((client_ip, 0))))??;
    Ok((servers, clients))
}

/// What one flow left behind: its two endpoints and applications.
struct FlowEnd {
    client: (Endpoint, ClientApp),
    server: (Endpoint, ServerApp),
}

/// Runs every flow's endpoints on one current-thread runtime until each client finished
/// (or the spec's time limit passed), then stops the servers.
fn drive_flows(
    spec: &RunSpec,
    flows: &[FlowSpec],
    transports: Vec<FlowTransports>,
    servers: Vec<UdpSocket>,
    clients: Vec<UdpSocket>,
) -> std::io::Result<(Vec<FlowEnd>, Instant)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Sockets register with the runtime as the drivers take them.
    let _context = rt.enter();
    // A lab certificate: the emulated link is private, and the client does not verify it.
    let (chain, key) =
        qfec_proto::self_signed_certificate(&["localhost"]).map_err(std::io::Error::other)?;
    let clock = Clock::new();
    let deadline = Instant::ZERO + spec.duration_limit;
    let clients_left = Rc::new(Cell::new(flows.len()));
    let local = tokio::task::LocalSet::new();
    let mut tasks = Vec::with_capacity(flows.len());
    for (i, ((f, (server_t, client_t)), (ss, cs))) in flows
        .iter()
        .zip(transports)
        .zip(servers.into_iter().zip(clients))
        .enumerate()
    {
        let salt = (i as u64).wrapping_mul(0x0100_0000_01b3);
        let alpn = qfec_lab::quic::alpn_of(&f.workload);
        let crypto = ServerCryptoConfig::new(chain.clone(), key.clone_key(), &[alpn])
            .map_err(std::io::Error::other)?;
        let mut server_cfg = ServerConfig::new(crypto);
        server_cfg.transport = server_t;
        let server_ep = Endpoint::new(
            Arc::new(EndpointConfig::default()),
            Some(Arc::new(server_cfg)),
            spec.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ salt,
        );
        let client_ep = Endpoint::new(
            Arc::new(EndpointConfig::default()),
            None,
            spec.seed ^ 0xc11e ^ salt,
        );
        let mut client_cfg = ClientConfig::new(ClientCryptoConfig::insecure(&[alpn]));
        client_cfg.transport = client_t;
        let server_addr = ss.local_addr()?;
        // One path per extra link, from the client side's address of that path.
        let port = cs.local_addr()?.port();
        let locals = (1..=spec.extra_paths.len())
            .map(|k| SocketAddr::from((right_addr(k), port)))
            .collect();
        let client_app = ClientApp::deferred(
            client_cfg,
            server_addr,
            &f.workload,
            Instant::ZERO + f.start,
        )
        .with_paths(locals, server_addr);
        let mut server = Driver::from_std(ss, server_ep)?;
        let mut client = Driver::from_std(cs, client_ep)?;
        server.set_clock(clock);
        client.set_clock(clock);
        let mut server_app = Supervised::serving(ServerApp::new(&f.workload), &clients_left);
        let mut client_app = Supervised::finishing(client_app, &clients_left);
        server_app.deadline = deadline;
        client_app.deadline = deadline;
        let s = local.spawn_local(async move {
            let r = server.run(&mut server_app).await;
            (server.endpoint, server_app.app, r)
        });
        let c = local.spawn_local(async move {
            let r = client.run(&mut client_app).await;
            (client.endpoint, client_app.app, r)
        });
        tasks.push((s, c));
    }
    let ends = rt.block_on(local.run_until(async move {
        let mut ends = Vec::with_capacity(tasks.len());
        for (s, c) in tasks {
            let (cep, capp, cr) = c.await.map_err(std::io::Error::other)?;
            let (sep, sapp, sr) = s.await.map_err(std::io::Error::other)?;
            cr?;
            sr?;
            ends.push(FlowEnd {
                client: (cep, capp),
                server: (sep, sapp),
            });
        }
        Ok::<_, std::io::Error>(ends)
    }))?;
    Ok((ends, clock.now()))
}

/// An application under the runner: stops at the deadline, and a server stops once every
/// client finished.
struct Supervised<A> {
    app: A,
    clients_left: Rc<Cell<usize>>,
    waited_for: bool,
    finished: bool,
    deadline: Instant,
    last: Instant,
}

impl<A: Application> Supervised<A> {
    fn finishing(app: A, clients_left: &Rc<Cell<usize>>) -> Self {
        Self::build(app, clients_left, true)
    }

    fn serving(app: A, clients_left: &Rc<Cell<usize>>) -> Self {
        Self::build(app, clients_left, false)
    }

    fn build(app: A, clients_left: &Rc<Cell<usize>>, waited_for: bool) -> Self {
        Supervised {
            app,
            clients_left: clients_left.clone(),
            waited_for,
            finished: false,
            deadline: Instant::ZERO,
            last: Instant::ZERO,
        }
    }
}

impl<A: Application> Application for Supervised<A> {
    fn poll(&mut self, now: Instant, endpoint: &mut Endpoint) -> ControlFlow<()> {
        self.last = now;
        if now >= self.deadline || (!self.waited_for && self.clients_left.get() == 0) {
            return ControlFlow::Break(());
        }
        let flow = self.app.poll(now, endpoint);
        if self.waited_for && flow.is_break() && !self.finished {
            self.finished = true;
            self.clients_left.set(self.clients_left.get() - 1);
        }
        if self.waited_for {
            flow
        } else {
            ControlFlow::Continue(())
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let check = (!self.waited_for).then_some(self.last + SERVER_CHECK);
        [self.app.poll_timeout(), Some(self.deadline), check]
            .into_iter()
            .flatten()
            .min()
    }
}

/// The record, as the simulator's runner fills it.
fn fill_record(
    spec: &RunSpec,
    flows: &[FlowSpec],
    ends: Vec<FlowEnd>,
    end: Instant,
    rec: &mut RunRecord,
) {
    if spec.flows.is_empty() {
        let e = &ends[0];
        e.client.1.fill_record(&e.client.0, rec);
        e.server.1.fill_record(&e.server.0, rec);
    } else {
        let results = ends
            .iter()
            .map(|e| {
                let mut r = RunRecord::default();
                e.client.1.fill_record(&e.client.0, &mut r);
                e.server.1.fill_record(&e.server.0, &mut r);
                FlowResult {
                    record: r,
                    client: &e.client.1,
                }
            })
            .collect();
        fill_flows(flows, results, end, rec);
    }
    rec.sim_time_s = end.as_nanos() as f64 / 1e9;
    if rec.error.is_none() && !rec.completed {
        rec.error = Some(format!(
            "not finished within {:?} of real time",
            spec.duration_limit
        ));
    }
}

/// The emulated links' counters, in the fields the simulator's runner fills.
fn add_link_stats(s: &EmuStats, rec: &mut RunRecord) {
    let span = rec
        .completion_time_s
        .map_or(s.elapsed, Duration::from_secs_f64);
    rec.down_queue_mean_bytes = s.down.mean_queue_bytes(span);
    rec.down_queue_max_bytes = s.down.max_queue_bytes;
    rec.down_dropped = s.down.dropped();
    rec.down_offered = s.down.offered_packets;
    rec.down_offered_bytes = s.down.offered_bytes;
    rec.down_ce_marked = s.down.marked_ce;
    if let (Some(d), Some(u), Some(busy)) = (&s.down_wifi, &s.up_wifi, s.channel_busy) {
        rec.wlan = Some(WlanRecord {
            down: StationRecord::from_stats(d),
            up: StationRecord::from_stats(u),
            busy_fraction: busy.as_secs_f64() / s.elapsed.as_secs_f64().max(1e-9),
        });
    }
}
