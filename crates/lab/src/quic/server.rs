//! The serving side: answers each request (an 8-byte size) with that many bytes, serves a web
//! page's objects over HTTP/3, or sends the real-time source's messages as DATAGRAMs; samples
//! RTT and congestion window.

use std::time::Duration;

use bytes::Bytes;
use std::ops::ControlFlow;

use qfec_proto::{
    Application, ConnectionHandle, Dir, Endpoint, Event, Instant, StreamId, WriteError,
};

use super::Content;
use crate::metrics::RunRecord;
use crate::workload::{Delivery, REALTIME_HEADER, RealtimeSpec, Workload};

/// Packet `pkt` of real-time message `msg`: the message number (4 bytes), the packet index
/// (1 byte), the send time in nanoseconds (8 bytes; the simulator's clock is shared), then
/// content keyed by message and packet.
pub(super) fn packet(
    content: &Content,
    spec: &RealtimeSpec,
    msg: u64,
    pkt: u32,
    sent: Instant,
) -> Bytes {
    let len = spec.packet_bytes.max(REALTIME_HEADER) as usize;
    let mut d = Vec::with_capacity(len);
    d.extend_from_slice(&(msg as u32).to_be_bytes());
    d.push(pkt as u8);
    d.extend_from_slice(&sent.as_nanos().to_be_bytes());
    d.extend_from_slice(&content.slice(datagram_key(msg, pkt), 0, len - REALTIME_HEADER as usize));
    Bytes::from(d)
}

pub(super) fn datagram_key(msg: u64, pkt: u32) -> u64 {
    msg * 256 + u64::from(pkt)
}

/// Largest piece of a response written at once.
const CHUNK: usize = 64 * 1024;
/// How often the path state is sampled for the traces.
const TRACE_INTERVAL: Duration = Duration::from_millis(50);

struct Response {
    id: StreamId,
    request: Vec<u8>,
    remaining: Option<u64>,
    /// Response bytes written so far.
    written: u64,
}

struct Source {
    spec: RealtimeSpec,
    next_msg: u64,
    total: u64,
    next_at: Option<Instant>,
    /// Stream delivery: messages waiting for a stream (the peer's limit was reached), and
    /// streams with bytes still to write.
    backlog: std::collections::VecDeque<Vec<Bytes>>,
    writing: Vec<(StreamId, Vec<Bytes>)>,
}

pub struct ServerApp {
    /// The latest connection accepted: a returning client's earlier ones are left to close.
    conn: Option<ConnectionHandle>,
    workload: Workload,
    /// A page workload: its objects over HTTP/3.
    h3: Option<qfec_http::h3::H3Server>,
    responses: Vec<Response>,
    source: Option<Source>,
    content: Content,
    next_trace: Instant,
    rtt_trace: Vec<(f64, f64)>,
    cwnd_trace: Vec<(f64, u64)>,
}

impl ServerApp {
    pub fn new(workload: &Workload) -> Self {
        let source = match workload {
            Workload::Realtime(spec) => Some(Source {
                spec: spec.clone(),
                next_msg: 0,
                total: spec.total_messages(),
                next_at: None,
                backlog: Default::default(),
                writing: Vec::new(),
            }),
            _ => None,
        };
        ServerApp {
            conn: None,
            h3: h3_server(workload),
            workload: workload.clone(),
            responses: Vec::new(),
            source,
            content: Content::new(),
            next_trace: Instant::ZERO,
            rtt_trace: Vec::new(),
            cwnd_trace: Vec::new(),
        }
    }

    fn drive(&mut self, now: Instant, ep: &mut Endpoint) {
        while let Some(h) = ep.accept() {
            if self.conn.is_some() {
                // A returning client: its new connection is served from scratch.
                self.responses.clear();
                self.h3 = h3_server(&self.workload);
                self.rtt_trace.clear();
                self.cwnd_trace.clear();
                self.next_trace = now;
            }
            self.conn = Some(h);
        }
        let Some(c) = self.conn.and_then(|h| ep.connection_mut(h)) else {
            return;
        };
        while let Some(ev) = c.poll() {
            if let Event::ConnectionLost(_) = ev {
                self.source = None;
            }
        }
        if now >= self.next_trace && c.is_established() {
            let p = c.path_stats();
            let t = now.as_nanos() as f64 / 1e9;
            self.rtt_trace.push((t, p.rtt.as_secs_f64()));
            // Without congestion control there is no window to trace.
            if p.cwnd != u64::MAX {
                self.cwnd_trace.push((t, p.cwnd));
            }
            self.next_trace = now + TRACE_INTERVAL;
        }
        // Over HTTP/3: the page's objects, or the request stream the source's datagrams name.
        let mut flow = None;
        if let Some(h3) = &mut self.h3 {
            h3.poll(now, c);
            flow = h3.flows().first().map(|f| f.1);
        } else {
            self.serve_requests(now, c);
        }
        if let Some(src) = self.source.as_mut() {
            let ready = match &self.h3 {
                Some(_) => flow.is_some(),
                None => c.is_established(),
            };
            if ready && src.next_at.is_none() && src.next_msg == 0 {
                src.next_at = Some(now);
            }
            while let Some(t) = src.next_at.filter(|t| *t <= now) {
                let msg = src.next_msg;
                let packets: Vec<Bytes> = (0..src.spec.packets_per_message)
                    .map(|pkt| packet(&self.content, &src.spec, msg, pkt, now))
                    .collect();
                match src.spec.delivery {
                    Delivery::Datagram | Delivery::H3Datagram => {
                        // Useless once the receiver has played it: one playback buffer after
                        // it would have arrived (the one-way delay taken as half the RTT).
                        let deadline = now + src.spec.playback_buffer + c.path_stats().min_rtt / 2;
                        for p in packets {
                            let p = match flow {
                                Some(stream) => qfec_http::h3::datagram::encode(stream, &p),
                                None => p,
                            };
                            let _ = c.send_datagram_with_deadline(p, deadline);
                        }
                    }
                    Delivery::Stream => src.backlog.push_back(packets),
                }
                src.next_msg += 1;
                src.next_at = (src.next_msg < src.total)
                    .then(|| t + Duration::from_secs(1) / src.spec.messages_per_sec.max(1));
            }
            write_messages(c, src);
        }
    }

    /// The lab's request protocol: an 8-byte size in, that many bytes out.
    fn serve_requests(&mut self, now: Instant, c: &mut qfec_proto::Connection) {
        while let Some(id) = c.accept_stream(Dir::Bi) {
            self.responses.push(Response {
                id,
                request: Vec::new(),
                remaining: None,
                written: 0,
            });
        }
        for r in &mut self.responses {
            if r.remaining.is_none() {
                while let Ok(Some(b)) = c.read(now, r.id, 8 - r.request.len()) {
                    r.request.extend_from_slice(&b);
                    if r.request.len() == 8 {
                        let size = u64::from_be_bytes(r.request[..8].try_into().expect("8 bytes"));
                        r.remaining = Some(size);
                        break;
                    }
                }
            }
            let Some(left) = r.remaining.as_mut() else {
                continue;
            };
            while *left > 0 {
                let n = (*left).min(CHUNK as u64) as usize;
                match c.write_chunk(r.id, self.content.slice(r.id.0, r.written, n)) {
                    Ok(w) => {
                        *left -= w as u64;
                        r.written += w as u64;
                    }
                    Err(WriteError::Blocked) => break,
                    Err(_) => {
                        *left = 0;
                    }
                }
            }
            if *left == 0 {
                let _ = c.finish(r.id);
            }
        }
        self.responses.retain(|r| r.remaining != Some(0));
    }

    pub fn fill_record(&self, ep: &Endpoint, rec: &mut RunRecord) {
        if let Some(src) = &self.source
            && src.next_msg < src.total
        {
            rec.error.get_or_insert_with(|| {
                format!("the source sent {} of {} messages", src.next_msg, src.total)
            });
        }
        if let Some(c) = self.conn.and_then(|h| ep.connection(h)) {
            rec.add_connection(c);
        }
        rec.rtt_trace = self.rtt_trace.clone();
        rec.cwnd_trace = self.cwnd_trace.clone();
    }
}

/// Stream delivery: each message on a new unidirectional stream, in order; a message waits
/// while the peer allows no more streams.
/// A server serves until its driver stops it: it never breaks out.
impl Application for ServerApp {
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) -> ControlFlow<()> {
        self.drive(now, ep);
        ControlFlow::Continue(())
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.source.as_ref().and_then(|s| s.next_at)
    }
}

/// The HTTP/3 server of a workload that runs over HTTP/3.
fn h3_server(workload: &Workload) -> Option<qfec_http::h3::H3Server> {
    match workload {
        Workload::Page(p) => Some(qfec_http::h3::H3Server::new(std::rc::Rc::new(
            super::content::PageContent {
                sizes: p.objects.iter().map(|o| o.bytes).collect(),
                content: Content::new(),
            },
        ))),
        // The real-time source over HTTP datagrams, once the client asked for `/live`.
        Workload::Realtime(spec) if spec.delivery == Delivery::H3Datagram => Some(
            qfec_http::h3::H3Server::new(std::rc::Rc::new(qfec_http::content::Memory::default()))
                .with_datagram_path("/live"),
        ),
        _ => None,
    }
}

fn write_messages(c: &mut qfec_proto::Connection, src: &mut Source) {
    while !src.backlog.is_empty() {
        let Some(id) = c.open_stream(Dir::Uni) else {
            break;
        };
        let packets = src.backlog.pop_front().expect("non-empty");
        src.writing.push((id, packets));
    }
    for (id, packets) in &mut src.writing {
        // A chunk is taken whole or not at all.
        while let Some(p) = packets.first() {
            if c.write_chunk(*id, p.clone()).is_err() {
                break;
            }
            packets.remove(0);
        }
        if packets.is_empty() {
            let _ = c.finish(*id);
        }
    }
    src.writing.retain(|(_, p)| !p.is_empty());
}
