//! The downloading side: issues the workload's requests (level by level for pages) and
//! measures completion; or receives a real-time stream of DATAGRAMs and plays it out.

use std::time::Duration;

use qfec_proto::{ConnectionHandle, Dir, Endpoint, Event, Instant, ReadError, StreamId};

use super::Content;
use crate::metrics::RunRecord;
use crate::workload::{RealtimeSpec, Workload};

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
    /// Per message and packet: received (a second copy is an error).
    seen: Vec<bool>,
    complete_at: Vec<Option<Instant>>,
    first_arrival: Option<Instant>,
}

enum Work {
    Requests { reqs: Vec<Request>, level: u32 },
    Realtime(Playout),
}

pub struct ClientApp {
    conn: ConnectionHandle,
    content: Content,
    start: Instant,
    work: Work,
    app_bytes: u64,
    /// Bytes read per time bin, when the run records its time series.
    goodput: Option<crate::trace::ByteBins>,
    done_at: Option<Instant>,
    error: Option<String>,
}

impl ClientApp {
    pub fn new(conn: ConnectionHandle, workload: &Workload, start: Instant) -> Self {
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
            Workload::Page(p) => Work::Requests {
                reqs: p.objects.iter().map(|o| req(o.bytes, o.level)).collect(),
                level: p.objects.iter().map(|o| o.level).min().unwrap_or(0),
            },
            Workload::Realtime(spec) => {
                let n = spec.total_messages() as usize;
                Work::Realtime(Playout {
                    spec: spec.clone(),
                    packets: vec![0; n],
                    seen: vec![false; n * spec.packets_per_message as usize],
                    complete_at: vec![None; n],
                    first_arrival: None,
                })
            }
        };
        ClientApp {
            conn,
            content: Content::new(),
            start,
            work,
            app_bytes: 0,
            goodput: None,
            done_at: None,
            error: None,
        }
    }

    pub fn is_done(&self) -> bool {
        self.done_at.is_some() || self.error.is_some()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.work {
            Work::Realtime(p) if !self.is_done() => p.end_time(),
            _ => None,
        }
    }

    pub fn drive(&mut self, now: Instant, ep: &mut Endpoint) {
        if self.is_done() {
            return;
        }
        let Some(c) = ep.connection_mut(self.conn) else {
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
        let before = self.app_bytes;
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
            Work::Realtime(p) => {
                while let Some(d) = c.recv_datagram() {
                    self.app_bytes += d.len() as u64;
                    if let Err(e) = p.on_datagram(now, &d, &self.content) {
                        self.error = Some(e);
                        return;
                    }
                }
                p.end_time().is_some_and(|t| now >= t)
            }
        };
        if let Some(g) = self.goodput.as_mut() {
            g.add(now, self.app_bytes - before);
        }
        if finished {
            self.done_at = Some(now);
            c.close(now, 0, b"done");
        }
    }

    /// Records the application bytes read per time bin (`--trace`).
    pub fn record_goodput(&mut self) {
        self.goodput = Some(crate::trace::ByteBins::default());
    }

    /// Bytes read per bin, if recorded.
    pub fn goodput_bins(&self) -> Option<&[u64]> {
        self.goodput.as_ref().map(|g| g.bins())
    }

    pub fn fill_record(&self, ep: &Endpoint, rec: &mut RunRecord) {
        if let Some(c) = ep.connection(self.conn) {
            let s = c.stats();
            rec.bytes_on_wire += s.udp_tx_bytes;
            rec.packets_sent += s.packets_sent;
            rec.retransmissions += s.packets_retransmitted;
            rec.spurious_retransmissions += s.spurious_losses;
            rec.packets_lost += s.packets_lost;
            if let Some(f) = c.extension::<qfec_fec::FecExtension>() {
                let f = f.stats();
                rec.fec_bytes += f.fec_bytes_sent;
                rec.repair_symbols += f.repair_symbols_sent;
                rec.recovered_symbols += f.symbols_recovered;
            }
        }
        rec.app_bytes = self.app_bytes;
        if let Some(e) = &self.error {
            rec.error.get_or_insert_with(|| e.clone());
        }
        match &self.work {
            Work::Realtime(p) => {
                let (fraction, rebuffer) = p.playout_metrics();
                rec.app_data_fraction = Some(fraction);
                rec.rebuffering_s = Some(rebuffer.as_secs_f64());
                rec.completed = self.done_at.is_some();
            }
            Work::Requests { .. } => {
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

    /// A datagram of the source; an error if it is not one the server sent, or came twice.
    fn on_datagram(&mut self, now: Instant, d: &[u8], content: &Content) -> Result<(), String> {
        let per = self.spec.packets_per_message as usize;
        let (msg, pkt) = match d {
            [a, b, c, e, p, ..] => (u32::from_be_bytes([*a, *b, *c, *e]) as usize, *p as usize),
            _ => return Err("datagram too short".into()),
        };
        if msg >= self.packets.len() || pkt >= per {
            return Err(format!("datagram of unknown message {msg} packet {pkt}"));
        }
        if !content.matches(
            super::server::datagram_key(msg as u64, pkt as u32),
            0,
            &d[5..],
        ) {
            return Err(format!("message {msg} packet {pkt}: wrong bytes"));
        }
        if std::mem::replace(&mut self.seen[msg * per + pkt], true) {
            return Err(format!("message {msg} packet {pkt} delivered twice"));
        }
        self.first_arrival.get_or_insert(now);
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

    /// Paper 002's metrics: fraction of application data played, and total re-buffering.
    /// Playback starts one buffer after the first arrival; a late message stalls playback
    /// until it is complete; a message that never completes is skipped.
    fn playout_metrics(&self) -> (f64, Duration) {
        let Some(first) = self.first_arrival else {
            return (0.0, Duration::ZERO);
        };
        let mut stall = Duration::ZERO;
        let mut played = 0usize;
        for (i, done) in self.complete_at.iter().enumerate() {
            let due = first + self.spec.playback_buffer + self.period() * i as u32 + stall;
            match done {
                Some(t) if *t <= due => played += 1,
                Some(t) => {
                    stall += *t - due;
                    played += 1;
                }
                None => {}
            }
        }
        (played as f64 / self.complete_at.len().max(1) as f64, stall)
    }
}
