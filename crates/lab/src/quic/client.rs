//! The downloading side: issues the workload's requests (level by level for pages) and
//! measures completion; or receives a real-time stream of DATAGRAMs and plays it out.

use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::time::Duration;

use qfec_proto::{
    Application, ClientConfig, ConnectionHandle, Dir, Endpoint, Event, Instant, PathId, PathInfo,
    ReadError, StreamId,
};

use super::Content;
use crate::metrics::RunRecord;
use crate::trace::ByteBins;
use crate::workload::{REALTIME_HEADER, RealtimeSpec, Workload};

struct Request {
    size: u64,
    level: u32,
    stream: Option<StreamId>,
    received: u64,
    done: bool,
}

/// Playout of paper 002's real-time source.
struct Playout {
    spec: RealtimeSpec,
    /// Per message: packets received, time it became complete.
    packets: Vec<u32>,
    /// Per message and packet: received (a second copy is an error unless `copies`).
    seen: Vec<bool>,
    /// The server's scheduler sends each packet on every path: a second copy of a packet
    /// is expected, and ignored.
    copies: bool,
    complete_at: Vec<Option<Instant>>,
    /// Per message: when the server sent it.
    sent_at: Vec<Option<Instant>>,
    first_arrival: Option<Instant>,
    /// Stream delivery: bytes of each open stream not yet a whole packet.
    partial: Vec<(StreamId, Vec<u8>)>,
    /// Datagram delivery: the HTTP/3 session whose request (`/live`) the datagrams belong
    /// to (RFC 9297).
    h3: Option<Box<qfec_http::h3::H3Client>>,
}

/// What the playout measured (paper 002's metrics and message delays).
struct PlayoutMetrics {
    fraction: f64,
    rebuffering: Duration,
    /// Send-to-complete delay of every message that completed, seconds.
    delays: Vec<f64>,
}

enum Work {
    Requests {
        reqs: Vec<Request>,
        level: u32,
    },
    /// A web page over HTTP/3, as a browser loads it: the HTML, then the objects it names,
    /// level by level, each level's objects all at once.
    Page(Box<PageLoad>),
    Realtime(Playout),
}

/// A page load over HTTP/3: object `i` is `/{i}`; a level's objects are requested once
/// every object of the levels before it arrived.
struct PageLoad {
    h3: qfec_http::h3::H3Client,
    /// (size, level) per object.
    objects: Vec<(u64, u32)>,
    /// The H3Client request index of each object, once requested.
    requested: Vec<Option<usize>>,
    received: Vec<u64>,
    done: Vec<bool>,
}

impl PageLoad {
    fn new(page: &crate::workload::PageModel) -> Self {
        let n = page.objects.len();
        PageLoad {
            h3: qfec_http::h3::H3Client::new("localhost", []),
            objects: page.objects.iter().map(|o| (o.bytes, o.level)).collect(),
            requested: vec![None; n],
            received: vec![0; n],
            done: vec![false; n],
        }
    }

    /// Runs the page load; true once every object arrived. Bytes are checked against the
    /// pattern keyed by the object's index.
    fn drive(
        &mut self,
        now: Instant,
        c: &mut qfec_proto::Connection,
        content: &Content,
        app_bytes: &mut u64,
    ) -> Result<bool, String> {
        loop {
            // The lowest level with an object not yet arrived: request all of it.
            let Some(level) = (0..self.objects.len())
                .filter(|&i| !self.done[i])
                .map(|i| self.objects[i].1)
                .min()
            else {
                return Ok(true);
            };
            for i in 0..self.objects.len() {
                if self.objects[i].1 == level && self.requested[i].is_none() {
                    self.requested[i] = Some(self.h3.request(format!("/{i}")));
                }
            }
            self.h3.poll(now, c);
            let mut finished_one = false;
            for i in 0..self.objects.len() {
                let Some(r) = self.requested[i].filter(|_| !self.done[i]) else {
                    continue;
                };
                for b in self.h3.take_body(r) {
                    if !content.matches(i as u64, self.received[i], &b) {
                        return Err(format!(
                            "object {i}: wrong bytes at offset {}",
                            self.received[i]
                        ));
                    }
                    self.received[i] += b.len() as u64;
                    *app_bytes += b.len() as u64;
                }
                match self.h3.state(r) {
                    (_, _, None) => {}
                    (Some(200), _, Some(Ok(_))) if self.received[i] == self.objects[i].0 => {
                        self.done[i] = true;
                        finished_one = true;
                    }
                    (status, _, done) => {
                        return Err(format!(
                            "object {i}: status {status:?}, {} of {} bytes, {done:?}",
                            self.received[i], self.objects[i].0
                        ));
                    }
                }
            }
            // A finished level's successor is requested at once (no extra round).
            if !finished_one {
                return Ok(false);
            }
        }
    }
}

pub struct ClientApp {
    /// The connection, once the client connected.
    conn: Option<ConnectionHandle>,
    /// A client that starts later: what to connect with, and to.
    deferred: Option<(ClientConfig, SocketAddr)>,
    content: Content,
    start: Instant,
    work: Work,
    app_bytes: u64,
    /// Application bytes read per time bin from time 0: flows' shares, goodput series.
    delivered: ByteBins,
    done_at: Option<Instant>,
    /// When the handshake completed.
    established_at: Option<Instant>,
    error: Option<String>,
    /// Multipath: the paths to open and what each path did (boxed: idle on one path).
    paths: Box<Paths>,
    /// A returning client: the connections still to make before the measured one.
    earlier: Option<Box<Earlier>>,
}

/// A returning client's earlier connections: each runs the whole workload, closes, and once
/// it drained the next connects with the server's latest NEW_TOKEN token; only the last is
/// measured. What the endpoints learned of the path (their memory, the token) carries over.
struct Earlier {
    left: u32,
    config: ClientConfig,
    server: SocketAddr,
    workload: Workload,
    /// The addresses multipath opens paths from, for each connection anew.
    locals: Vec<SocketAddr>,
    /// A finished earlier connection waiting to drain.
    closing: bool,
}

/// A multipath client's paths: the local addresses it still has to open a path from (once
/// the handshake is confirmed and the server gave connection IDs for them), and the last
/// state of every path seen (kept after the connection forgets an abandoned path).
#[derive(Default)]
struct Paths {
    to_open: Vec<SocketAddr>,
    server: Option<SocketAddr>,
    seen: std::collections::BTreeMap<PathId, PathInfo>,
}

impl Paths {
    fn poll(&mut self, now: Instant, c: &mut qfec_proto::Connection) -> Result<(), String> {
        let Some(server) = self.server else {
            return Ok(());
        };
        if c.handshake_confirmed() && !self.to_open.is_empty() {
            let mut still = Vec::new();
            for local in std::mem::take(&mut self.to_open) {
                match c.open_path(now, Some(local), server) {
                    Ok(_) => {}
                    Err(e) if e.is_temporary() => still.push(local),
                    Err(e) => return Err(format!("cannot open a path from {local}: {e}")),
                }
            }
            self.to_open = still;
        }
        for p in c.paths_info() {
            self.seen.insert(p.id, p);
        }
        Ok(())
    }
}

impl ClientApp {
    /// A client that connects at `start` (when the node first runs at or after it) to
    /// `server` with `config`.
    pub fn deferred(
        config: ClientConfig,
        server: SocketAddr,
        workload: &Workload,
        start: Instant,
    ) -> Self {
        let mut app = Self::build(None, workload, start);
        app.deferred = Some((config, server));
        app
    }

    /// The server sends each packet on every path (a replicating scheduler): a real-time
    /// packet that arrives twice is a copy, not an error.
    pub fn expecting_copies(mut self) -> Self {
        if let Work::Realtime(p) = &mut self.work {
            p.copies = true;
        }
        self
    }

    /// A client whose connection was opened at `start`.
    pub fn new(conn: ConnectionHandle, workload: &Workload, start: Instant) -> Self {
        Self::build(Some(conn), workload, start)
    }

    /// Once connected (multipath negotiated, handshake confirmed), opens a path to `server`
    /// from each of `locals`: addresses of its own besides the one it connects from.
    pub fn with_paths(mut self, locals: Vec<SocketAddr>, server: SocketAddr) -> Self {
        if let Some(e) = self.earlier.as_mut() {
            e.locals.clone_from(&locals);
        }
        if !locals.is_empty() {
            self.paths = Box::new(Paths {
                to_open: locals,
                server: Some(server),
                seen: Default::default(),
            });
        }
        self
    }

    /// A returning client: `n` connections with the same workload (to `server`, with
    /// `config`) come before the measured one, each after the previous one drained.
    pub fn with_earlier_connections(
        mut self,
        n: u32,
        config: ClientConfig,
        server: SocketAddr,
        workload: &Workload,
    ) -> Self {
        if n > 0 {
            self.earlier = Some(Box::new(Earlier {
                left: n,
                config,
                server,
                workload: workload.clone(),
                locals: Vec::new(),
                closing: false,
            }));
        }
        self
    }

    fn build(conn: Option<ConnectionHandle>, workload: &Workload, start: Instant) -> Self {
        let req = |size, level| Request {
            size,
            level,
            stream: None,
            received: 0,
            done: false,
        };
        let work = match workload {
            Workload::Bulk { bytes } => Work::Requests {
                reqs: vec![req(*bytes, 0)],
                level: 0,
            },
            Workload::Files { sizes } => Work::Requests {
                reqs: sizes
                    .iter()
                    .enumerate()
                    .map(|(i, &s)| req(s, i as u32))
                    .collect(),
                level: 0,
            },
            Workload::Page(p) => Work::Page(Box::new(PageLoad::new(p))),
            Workload::Realtime(spec) => {
                let n = spec.total_messages() as usize;
                Work::Realtime(Playout {
                    spec: spec.clone(),
                    packets: vec![0; n],
                    seen: vec![false; n * spec.packets_per_message as usize],
                    copies: false,
                    complete_at: vec![None; n],
                    sent_at: vec![None; n],
                    first_arrival: None,
                    partial: Vec::new(),
                    h3: (spec.delivery == crate::workload::Delivery::H3Datagram).then(|| {
                        Box::new(
                            qfec_http::h3::H3Client::new("localhost", ["/live".to_string()])
                                .with_datagrams(),
                        )
                    }),
                })
            }
        };
        ClientApp {
            conn,
            deferred: None,
            content: Content::new(),
            start,
            work,
            app_bytes: 0,
            delivered: ByteBins::default(),
            done_at: None,
            established_at: None,
            error: None,
            paths: Box::default(),
            earlier: None,
        }
    }

    /// A returning client whose earlier connection finished: once it drained, the next one
    /// connects with the server's token and the measurement starts over.
    fn next_connection(&mut self, now: Instant, ep: &mut Endpoint) {
        let Some(e) = self.earlier.as_mut().filter(|e| e.closing) else {
            return;
        };
        let old = self.conn.and_then(|h| ep.connection(h));
        if old.is_some_and(|c| !c.is_drained()) {
            return;
        }
        let mut config = e.config.clone();
        config.token = old.and_then(|c| c.new_token()).map(<[u8]>::to_vec);
        let h = match ep.connect(now, config, e.server, "localhost") {
            Ok(h) => h,
            Err(err) => {
                self.error = Some(format!("cannot connect again: {err}"));
                return;
            }
        };
        if let Some(old) = self.conn.replace(h) {
            ep.release(old);
        }
        e.closing = false;
        e.left -= 1;
        let (workload, locals, server) = (e.workload.clone(), e.locals.clone(), e.server);
        let earlier = self.earlier.take().filter(|e| e.left > 0);
        *self = Self::build(Some(h), &workload, now).with_paths(locals, server);
        self.earlier = earlier;
    }

    /// Application bytes read per [`BIN`](crate::trace::BIN) from time 0.
    pub fn delivered(&self) -> &[u64] {
        self.delivered.bins()
    }

    pub fn start(&self) -> Instant {
        self.start
    }

    pub fn done_at(&self) -> Option<Instant> {
        self.done_at
    }

    pub fn is_done(&self) -> bool {
        self.done_at.is_some() || self.error.is_some()
    }

    fn drive(&mut self, now: Instant, ep: &mut Endpoint) {
        if self.earlier.as_ref().is_some_and(|e| e.closing) {
            self.next_connection(now, ep);
            if self.earlier.as_ref().is_some_and(|e| e.closing) {
                return;
            }
        }
        if self.conn.is_none() {
            if now < self.start {
                return;
            }
            let Some((config, server)) = self.deferred.take() else {
                return;
            };
            match ep.connect(now, config, server, "localhost") {
                Ok(h) => self.conn = Some(h),
                Err(e) => {
                    self.error = Some(format!("cannot connect: {e}"));
                    return;
                }
            }
        }
        let before = self.app_bytes;
        self.drive_connection(now, ep);
        self.delivered.add(now, self.app_bytes - before);
    }

    fn drive_connection(&mut self, now: Instant, ep: &mut Endpoint) {
        let Some(c) = self.conn.and_then(|h| ep.connection_mut(h)) else {
            self.error = Some("connection vanished".into());
            return;
        };
        while let Some(ev) = c.poll() {
            if let Event::ConnectionLost(e) = ev {
                self.error = Some(format!("connection lost: {e}"));
                return;
            }
        }
        if !c.is_established() {
            return;
        }
        self.established_at.get_or_insert(now);
        if let Err(e) = self.paths.poll(now, c) {
            self.error = Some(e);
            return;
        }
        let finished = match &mut self.work {
            Work::Requests { reqs, level } => drive_requests(
                now,
                c,
                reqs,
                level,
                &self.content,
                &mut self.app_bytes,
                &mut self.error,
            ),
            Work::Page(p) => match p.drive(now, c, &self.content, &mut self.app_bytes) {
                Ok(done) => done,
                Err(e) => {
                    self.error = Some(e);
                    return;
                }
            },
            Work::Realtime(p) => {
                // Over HTTP/3, each datagram names the request stream of `/live`.
                let flow = p.h3.as_mut().map(|h3| {
                    h3.poll(now, c);
                    h3.state_stream(0)
                });
                while let Some(d) = c.recv_datagram() {
                    let d = match flow {
                        None => d,
                        Some(flow) => match qfec_http::h3::datagram::decode(&d) {
                            Ok((stream, payload)) if Some(stream) == flow => payload,
                            Ok((stream, _)) => {
                                self.error =
                                    Some(format!("HTTP datagram for stream {stream}, not /live's"));
                                return;
                            }
                            Err(e) => {
                                self.error = Some(e.to_string());
                                return;
                            }
                        },
                    };
                    self.app_bytes += d.len() as u64;
                    if let Err(e) = p.on_packet(now, &d, &self.content) {
                        self.error = Some(e);
                        return;
                    }
                }
                match p.read_streams(now, c, &self.content) {
                    Ok(n) => self.app_bytes += n,
                    Err(e) => {
                        self.error = Some(e);
                        return;
                    }
                }
                p.end_time().is_some_and(|t| now >= t)
            }
        };
        if finished {
            c.close(now, 0, b"done");
            match self.earlier.as_mut() {
                Some(e) => e.closing = true,
                None => self.done_at = Some(now),
            }
        }
    }

    pub fn fill_record(&self, ep: &Endpoint, rec: &mut RunRecord) {
        if let Some(c) = self.conn.and_then(|h| ep.connection(h)) {
            rec.add_connection(c);
        }
        rec.app_bytes = self.app_bytes;
        rec.paths = (self.paths.seen.values())
            .map(crate::metrics::PathRecord::from_info)
            .collect();
        rec.handshake_s = self.established_at.map(|t| (t - self.start).as_secs_f64());
        if let Some(e) = &self.error {
            rec.error.get_or_insert_with(|| e.clone());
        }
        match &self.work {
            Work::Realtime(p) => {
                let m = p.playout_metrics();
                rec.app_data_fraction = Some(m.fraction);
                rec.rebuffering_s = Some(m.rebuffering.as_secs_f64());
                let mut d = m.delays;
                d.sort_by(f64::total_cmp);
                let q = |x| (!d.is_empty()).then(|| crate::metrics::quantile(&d, x));
                rec.msg_delay_p50_s = q(0.5);
                rec.msg_delay_p95_s = q(0.95);
                rec.msg_delay_p99_s = q(0.99);
                rec.completed = self.done_at.is_some();
            }
            Work::Requests { .. } | Work::Page(_) => {
                if let Some(t) = self.done_at {
                    let secs = (t - self.start).as_secs_f64();
                    rec.completed = true;
                    rec.completion_time_s = Some(secs);
                    rec.goodput_bps = Some(self.app_bytes as f64 * 8.0 / secs.max(1e-9));
                }
            }
        }
    }
}

impl Application for ClientApp {
    fn poll_timeout(&self) -> Option<Instant> {
        if self.conn.is_none() {
            return Some(self.start);
        }
        match &self.work {
            Work::Realtime(p) if !self.is_done() => p.end_time(),
            _ => None,
        }
    }

    fn poll(&mut self, now: Instant, ep: &mut Endpoint) -> ControlFlow<()> {
        if !self.is_done() {
            self.drive(now, ep);
        }
        if self.is_done() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}

/// Opens the current level's requests, reads responses, moves to the next level. Returns
/// true once everything arrived.
fn drive_requests(
    now: Instant,
    c: &mut qfec_proto::Connection,
    reqs: &mut [Request],
    level: &mut u32,
    content: &Content,
    app_bytes: &mut u64,
    error: &mut Option<String>,
) -> bool {
    // Reading may finish a level, whose successor is requested at once (no extra round).
    loop {
        if reqs.iter().filter(|r| r.level == *level).all(|r| r.done) {
            match reqs
                .iter()
                .filter(|r| r.level > *level)
                .map(|r| r.level)
                .min()
            {
                Some(next) => *level = next,
                None => return true,
            }
        }
        for r in reqs
            .iter_mut()
            .filter(|r| r.level == *level && r.stream.is_none())
        {
            let Some(id) = c.open_stream(Dir::Bi) else {
                break;
            };
            let _ = c.write(id, &r.size.to_be_bytes());
            let _ = c.finish(id);
            r.stream = Some(id);
        }
        let mut finished_one = false;
        for r in reqs.iter_mut().filter(|r| !r.done) {
            let Some(id) = r.stream else { continue };
            loop {
                match c.read(now, id, usize::MAX) {
                    Ok(Some(b)) => {
                        if error.is_none() && !content.matches(id.0, r.received, &b) {
                            *error =
                                Some(format!("stream {id}: wrong bytes at offset {}", r.received));
                        }
                        r.received += b.len() as u64;
                        *app_bytes += b.len() as u64;
                    }
                    Ok(None) => {
                        r.done = true;
                        finished_one = true;
                        if r.received != r.size {
                            *error = Some(format!(
                                "stream {id}: got {} of {} bytes",
                                r.received, r.size
                            ));
                        }
                        break;
                    }
                    Err(ReadError::Blocked) => break,
                    Err(e) => {
                        *error = Some(format!("stream {id}: {e:?}"));
                        r.done = true;
                        break;
                    }
                }
            }
        }
        if !finished_one {
            return false;
        }
    }
}

impl Playout {
    fn period(&self) -> Duration {
        Duration::from_secs(1) / self.spec.messages_per_sec.max(1)
    }

    /// A packet of the source; an error if it is not one the server sent, or came twice.
    fn on_packet(&mut self, now: Instant, d: &[u8], content: &Content) -> Result<(), String> {
        let per = self.spec.packets_per_message as usize;
        let header = REALTIME_HEADER as usize;
        if d.len() < header {
            return Err("real-time packet too short".into());
        }
        let msg = u32::from_be_bytes(d[..4].try_into().expect("4 bytes")) as usize;
        let pkt = d[4] as usize;
        let sent = Instant::from_nanos(u64::from_be_bytes(d[5..13].try_into().expect("8 bytes")));
        if msg >= self.packets.len() || pkt >= per {
            return Err(format!("packet of unknown message {msg} packet {pkt}"));
        }
        if !content.matches(
            super::server::datagram_key(msg as u64, pkt as u32),
            0,
            &d[header..],
        ) {
            return Err(format!("message {msg} packet {pkt}: wrong bytes"));
        }
        if std::mem::replace(&mut self.seen[msg * per + pkt], true) {
            if self.copies {
                return Ok(());
            }
            return Err(format!("message {msg} packet {pkt} delivered twice"));
        }
        self.first_arrival.get_or_insert(now);
        let s = self.sent_at[msg].get_or_insert(sent);
        *s = (*s).min(sent);
        self.packets[msg] += 1;
        if self.packets[msg] == self.spec.packets_per_message && self.complete_at[msg].is_none() {
            self.complete_at[msg] = Some(now);
        }
        Ok(())
    }

    /// Playback ends one second after the last message's scheduled play time.
    fn end_time(&self) -> Option<Instant> {
        let first = self.first_arrival?;
        Some(first + self.spec.playback_buffer + self.spec.duration + Duration::from_secs(1))
    }

    /// Stream delivery: reads the source's unidirectional streams, each a message of whole
    /// packets. Returns the bytes read.
    fn read_streams(
        &mut self,
        now: Instant,
        c: &mut qfec_proto::Connection,
        content: &Content,
    ) -> Result<u64, String> {
        while let Some(id) = c.accept_stream(Dir::Uni) {
            self.partial.push((id, Vec::new()));
        }
        let size = self.spec.packet_bytes as usize;
        let mut read = 0;
        let mut i = 0;
        while i < self.partial.len() {
            let id = self.partial[i].0;
            let mut finished = false;
            loop {
                match c.read(now, id, usize::MAX) {
                    Ok(Some(b)) => {
                        read += b.len() as u64;
                        self.partial[i].1.extend_from_slice(&b);
                    }
                    Ok(None) => {
                        finished = true;
                        break;
                    }
                    Err(ReadError::Blocked) => break,
                    Err(e) => return Err(format!("stream {id}: {e:?}")),
                }
            }
            let buf = std::mem::take(&mut self.partial[i].1);
            let mut chunks = buf.chunks_exact(size);
            for p in &mut chunks {
                self.on_packet(now, p, content)?;
            }
            self.partial[i].1 = chunks.remainder().to_vec();
            if finished {
                if !self.partial[i].1.is_empty() {
                    return Err(format!("stream {id} ended inside a packet"));
                }
                self.partial.swap_remove(i);
            } else {
                i += 1;
            }
        }
        Ok(read)
    }

    /// Paper 002's metrics (§5.4). The player reads one message per period, starting one
    /// playback buffer after the first arrival, on a fixed schedule (a live stream does not
    /// wait): a message not complete when due, lost or late, costs one period of
    /// re-buffering. The data fraction counts every byte that arrived, in time or not; the
    /// delays are those of every message that completed, late ones included.
    fn playout_metrics(&self) -> PlayoutMetrics {
        let Some(first) = self.first_arrival else {
            return PlayoutMetrics {
                fraction: 0.0,
                rebuffering: Duration::ZERO,
                delays: Vec::new(),
            };
        };
        let period = self.period();
        let mut rebuffering = Duration::ZERO;
        let mut delays = Vec::new();
        for (i, done) in self.complete_at.iter().enumerate() {
            let due = first + self.spec.playback_buffer + period * i as u32;
            if done.is_none_or(|t| t > due) {
                rebuffering += period;
            }
            if let (Some(t), Some(s)) = (*done, self.sent_at[i]) {
                delays.push((t - s).as_secs_f64());
            }
        }
        let received = self.seen.iter().filter(|s| **s).count();
        PlayoutMetrics {
            fraction: received as f64 / self.seen.len().max(1) as f64,
            rebuffering,
            delays,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Delivery;

    /// Four messages of two packets at 10 per second (100 ms apart), 50 ms playback buffer;
    /// the first arrives at t = 1 s, so message i is due at 1.05 + 0.1 i s.
    fn playout(delivery: Delivery, complete: [Option<f64>; 4]) -> PlayoutMetrics {
        let spec = RealtimeSpec {
            messages_per_sec: 10,
            packets_per_message: 2,
            packet_bytes: 100,
            duration: Duration::from_millis(400),
            playback_buffer: Duration::from_millis(50),
            delivery,
        };
        let at = |s: f64| Instant::from_nanos((s * 1e9).round() as u64);
        let mut p = Playout {
            spec,
            packets: vec![0; 4],
            seen: vec![false; 8],
            copies: false,
            complete_at: complete.iter().map(|c| c.map(at)).collect(),
            sent_at: (0..4).map(|i| Some(at(0.99 + 0.1 * i as f64))).collect(),
            first_arrival: Some(at(1.0)),
            partial: Vec::new(),
            h3: None,
        };
        for (i, c) in complete.iter().enumerate() {
            if c.is_some() {
                p.seen[2 * i] = true;
                p.seen[2 * i + 1] = true;
            }
        }
        // Half of message 3 arrived: it counts as data, not as a message.
        p.seen[6] = true;
        p.playout_metrics()
    }

    #[test]
    fn a_message_late_or_incomplete_costs_one_period() {
        // Message 1 is due at 1.15 s and completes at 1.32 s; 3 never completes.
        for delivery in [Delivery::Datagram, Delivery::Stream] {
            let m = playout(delivery, [Some(1.0), Some(1.32), Some(1.2), None]);
            assert!(
                (m.rebuffering.as_secs_f64() - 0.2).abs() < 1e-9,
                "{:?}",
                m.rebuffering
            );
            assert!((m.fraction - 7.0 / 8.0).abs() < 1e-12);
            // Late message 1 (sent at 1.09 s) is among the delays; 3 is not.
            assert_eq!(m.delays.len(), 3);
            assert!((m.delays[1] - (1.32 - 1.09)).abs() < 1e-9, "{:?}", m.delays);
        }
        let on_time = playout(
            Delivery::Datagram,
            [Some(1.0), Some(1.1), Some(1.2), Some(1.3)],
        );
        assert_eq!(on_time.rebuffering, Duration::ZERO);
    }
}
