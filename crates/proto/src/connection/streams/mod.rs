//! All streams of a connection: opening within MAX_STREAMS limits, stream and connection
//! flow control with receive-window auto-tuning, the send schedule, and the control frames
//! that streams need (RFC 9000 §2-4, §19.4-19.14).

mod recv;
mod send;
mod send_buffer;

pub use recv::RecvStream;
pub use send::{SendState, SendStream};

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use bytes::Bytes;

use crate::coding::varint_len;
use crate::config::TransportConfig;
use crate::connection::sent::{SentFrame, SentFrames};
use crate::frame::{self, StreamFrame};
use crate::time::Instant;
use crate::transport_params::TransportParameters;
use crate::types::{Dir, Side, StreamId, TransportError, error_code};

/// Why a write did not take all the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteError {
    /// Send buffer full: wait for `Event::StreamWritable`.
    Blocked,
    /// The peer sent STOP_SENDING with this code.
    Stopped(u64),
    /// No such stream, or not writable by us (finished, reset, receive-only).
    ClosedStream,
}

/// Why a read returned no data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadError {
    /// Nothing readable now: wait for `Event::StreamReadable`.
    Blocked,
    /// The peer reset the stream with this code.
    Reset(u64),
    /// No such stream, or not readable by us.
    ClosedStream,
}

/// Stream happenings reported to the application through `Connection::poll`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEvent {
    /// The peer opened a stream of this direction (accept it with `accept`).
    Opened(Dir),
    Readable(StreamId),
    Writable(StreamId),
    /// Every byte we sent on it was acknowledged.
    Finished(StreamId),
    /// The peer sent STOP_SENDING.
    Stopped(StreamId, u64),
    /// MAX_STREAMS raised our limit for this direction.
    Available(Dir),
}

/// Whether the application may still write to `s`, and if not, why.
fn accepts_writes(s: &SendStream) -> Result<(), WriteError> {
    if let Some(code) = s.stop_requested {
        return Err(WriteError::Stopped(code));
    }
    if s.state != SendState::Open {
        return Err(WriteError::ClosedStream);
    }
    Ok(())
}

fn dir_index(dir: Dir) -> usize {
    match dir {
        Dir::Bi => 0,
        Dir::Uni => 1,
    }
}

/// Control frames waiting to be sent.
#[derive(Debug, Default)]
struct Pending {
    max_data: bool,
    max_stream_data: BTreeSet<StreamId>,
    max_streams: [bool; 2],
    reset: BTreeSet<StreamId>,
    stop_sending: BTreeSet<StreamId>,
    data_blocked: bool,
    stream_data_blocked: BTreeSet<StreamId>,
    streams_blocked: [bool; 2],
}

#[derive(Debug)]
pub struct Streams {
    side: Side,
    send: BTreeMap<StreamId, SendStream>,
    recv: BTreeMap<StreamId, RecvStream>,
    /// Streams with data to send, in round-robin order.
    send_queue: VecDeque<StreamId>,
    /// Our streams: next index to open, and the peer's limit (MAX_STREAMS).
    next_local: [u64; 2],
    max_local: [u64; 2],
    /// Peer's streams: how many it opened, the limit we gave, how many closed.
    next_remote: [u64; 2],
    max_remote: [u64; 2],
    /// Peer streams opened but not yet returned by `accept`.
    next_accept: [u64; 2],
    /// Connection flow control, receiving.
    pub local_max_data: u64,
    recv_window: u64,
    max_recv_window: u64,
    received_data: u64,
    read_data: u64,
    last_max_data_update: Option<Instant>,
    /// Connection flow control, sending.
    peer_max_data: u64,
    sent_data: u64,
    data_blocked_at: Option<u64>,
    /// Stream windows for new streams.
    stream_window: u64,
    max_stream_window: u64,
    send_buffer: u64,
    /// Bytes buffered over all streams before writes block (what one connection may pin).
    connection_send_buffer: u64,
    /// A write was refused for the connection-wide limit: report `Writable` to every
    /// blocked stream when acknowledgements make room.
    connection_write_blocked: bool,
    /// The peer's initial per-stream limits.
    peer_params: TransportParameters,
    pending: Pending,
    events: VecDeque<StreamEvent>,
}

impl Streams {
    pub fn new(side: Side, cfg: &TransportConfig) -> Self {
        Streams {
            side,
            send: BTreeMap::new(),
            recv: BTreeMap::new(),
            send_queue: VecDeque::new(),
            next_local: [0; 2],
            max_local: [0; 2],
            next_remote: [0; 2],
            max_remote: [
                cfg.max_concurrent_bidi_streams,
                cfg.max_concurrent_uni_streams,
            ],
            next_accept: [0; 2],
            local_max_data: cfg.receive_window,
            recv_window: cfg.receive_window,
            max_recv_window: cfg.max_receive_window.max(cfg.receive_window),
            received_data: 0,
            read_data: 0,
            last_max_data_update: None,
            peer_max_data: 0,
            sent_data: 0,
            data_blocked_at: None,
            stream_window: cfg.stream_receive_window,
            max_stream_window: cfg.max_stream_receive_window.max(cfg.stream_receive_window),
            send_buffer: cfg.send_buffer,
            connection_send_buffer: cfg.connection_send_buffer,
            connection_write_blocked: false,
            peer_params: TransportParameters::default(),
            pending: Pending::default(),
            events: VecDeque::new(),
        }
    }

    /// Our own transport parameters for streams and flow control.
    pub fn fill_transport_parameters(&self, tp: &mut TransportParameters) {
        tp.initial_max_data = self.local_max_data;
        tp.initial_max_stream_data_bidi_local = self.stream_window;
        tp.initial_max_stream_data_bidi_remote = self.stream_window;
        tp.initial_max_stream_data_uni = self.stream_window;
        tp.initial_max_streams_bidi = self.max_remote[0];
        tp.initial_max_streams_uni = self.max_remote[1];
    }

    pub fn set_peer_params(&mut self, tp: &TransportParameters) {
        self.peer_max_data = tp.initial_max_data;
        self.max_local = [tp.initial_max_streams_bidi, tp.initial_max_streams_uni];
        self.peer_params = tp.clone();
        // Streams opened before the parameters were known get their limits now.
        let ids: Vec<StreamId> = self.send.keys().copied().collect();
        for id in ids {
            let limit = self.peer_initial_stream_limit(id);
            if let Some(s) = self.send.get_mut(&id) {
                s.max_data = s.max_data.max(limit);
            }
        }
        if self.max_local[0] > 0 {
            self.events.push_back(StreamEvent::Available(Dir::Bi));
        }
        if self.max_local[1] > 0 {
            self.events.push_back(StreamEvent::Available(Dir::Uni));
        }
    }

    fn peer_initial_stream_limit(&self, id: StreamId) -> u64 {
        let p = &self.peer_params;
        match (id.dir(), id.initiator() == self.side) {
            (Dir::Uni, _) => p.initial_max_stream_data_uni,
            // The peer's "remote" limit applies to streams we opened.
            (Dir::Bi, true) => p.initial_max_stream_data_bidi_remote,
            (Dir::Bi, false) => p.initial_max_stream_data_bidi_local,
        }
    }

    pub fn poll_event(&mut self) -> Option<StreamEvent> {
        self.events.pop_front()
    }

    // ---- application API ----

    pub fn open(&mut self, dir: Dir) -> Option<StreamId> {
        let i = dir_index(dir);
        if self.next_local[i] >= self.max_local[i] {
            self.pending.streams_blocked[i] = true;
            return None;
        }
        let id = StreamId::new(self.side, dir, self.next_local[i]);
        self.next_local[i] += 1;
        let limit = self.peer_initial_stream_limit(id);
        self.send.insert(id, SendStream::new(limit));
        if dir == Dir::Bi {
            self.recv.insert(id, RecvStream::new(self.stream_window));
        }
        Some(id)
    }

    /// The next stream the peer opened, if any.
    pub fn accept(&mut self, dir: Dir) -> Option<StreamId> {
        let i = dir_index(dir);
        if self.next_accept[i] >= self.next_remote[i] {
            return None;
        }
        let id = StreamId::new(self.side.peer(), dir, self.next_accept[i]);
        self.next_accept[i] += 1;
        Some(id)
    }

    pub fn write(&mut self, id: StreamId, data: &[u8]) -> Result<usize, WriteError> {
        let room = self.write_room(id)?;
        let n = data.len().min(room);
        self.write_chunk(id, Bytes::copy_from_slice(&data[..n]))
            .map(|_| n)
    }

    /// Room left in the stream's send buffer, or why it cannot be written.
    fn write_room(&mut self, id: StreamId) -> Result<usize, WriteError> {
        let s = self.send.get_mut(&id).ok_or(WriteError::ClosedStream)?;
        accepts_writes(s)?;
        let room = self.send_buffer.saturating_sub(s.buffered());
        if room == 0 {
            s.write_blocked = true;
            return Err(WriteError::Blocked);
        }
        let total: u64 = self.send.values().map(|s| s.buffered()).sum();
        let connection_room = self.connection_send_buffer.saturating_sub(total);
        if connection_room == 0 {
            self.connection_write_blocked = true;
            if let Some(s) = self.send.get_mut(&id) {
                s.write_blocked = true;
            }
            return Err(WriteError::Blocked);
        }
        Ok(room.min(connection_room) as usize)
    }

    /// Bytes the peer's flow control lets this stream send beyond what was written. An
    /// application that writes no more than this never buffers what the peer cannot take.
    pub fn send_credit(&self, id: StreamId) -> Result<u64, WriteError> {
        let s = self.send.get(&id).ok_or(WriteError::ClosedStream)?;
        accepts_writes(s)?;
        Ok(s.max_data.saturating_sub(s.write_offset()))
    }

    /// Writes `data` without copying it; takes all of it while the buffer has room, else
    /// nothing (`Blocked`). Returns the bytes taken.
    pub fn write_chunk(&mut self, id: StreamId, data: Bytes) -> Result<usize, WriteError> {
        self.write_room(id)?;
        let s = self.send.get_mut(&id).ok_or(WriteError::ClosedStream)?;
        let n = data.len();
        s.write(data);
        if !s.queued && s.has_pending() {
            s.queued = true;
            self.send_queue.push_back(id);
        }
        if s.is_blocked() {
            self.pending.stream_data_blocked.insert(id);
        }
        Ok(n)
    }

    pub fn finish(&mut self, id: StreamId) -> Result<(), WriteError> {
        let s = self.send.get_mut(&id).ok_or(WriteError::ClosedStream)?;
        accepts_writes(s)?;
        s.finish();
        if !s.queued && s.has_pending() {
            s.queued = true;
            self.send_queue.push_back(id);
        }
        Ok(())
    }

    pub fn reset(&mut self, id: StreamId, code: u64) -> Result<(), WriteError> {
        let s = self.send.get_mut(&id).ok_or(WriteError::ClosedStream)?;
        if matches!(s.state, SendState::Reset { .. } | SendState::AllAcked) {
            return Err(WriteError::ClosedStream);
        }
        s.reset(code);
        self.pending.reset.insert(id);
        if self.connection_write_blocked {
            self.release_connection_blocked();
        }
        Ok(())
    }

    pub fn stop_sending(&mut self, id: StreamId, code: u64) -> Result<(), ReadError> {
        let r = self.recv.get_mut(&id).ok_or(ReadError::ClosedStream)?;
        if r.stop_sent.is_some() || r.final_size.is_some_and(|f| f == r.read_offset) {
            return Ok(());
        }
        r.stop_sent = Some(code);
        self.pending.stop_sending.insert(id);
        Ok(())
    }

    /// Reads the next in-order chunk: `Ok(None)` at the end of the stream.
    pub fn read(
        &mut self,
        id: StreamId,
        max: usize,
        now: Instant,
        rtt: Duration,
    ) -> Result<Option<Bytes>, ReadError> {
        let r = self.recv.get_mut(&id).ok_or(ReadError::ClosedStream)?;
        if let Some(code) = r.reset {
            r.finished_reading = true;
            self.maybe_close_recv(id);
            return Err(ReadError::Reset(code));
        }
        if let Some(chunk) = r.read_chunk(max) {
            let n = chunk.len() as u64;
            self.read_data += n;
            if r.wants_credit_update() && !self.pending.max_stream_data.contains(&id) {
                autotune(
                    &mut r.window,
                    self.max_stream_window,
                    now,
                    rtt,
                    r.last_credit_update,
                );
                r.last_credit_update = Some(now);
                self.pending.max_stream_data.insert(id);
            }
            self.after_conn_read(now, rtt);
            return Ok(Some(chunk));
        }
        if r.is_fin_readable() {
            r.finished_reading = true;
            self.maybe_close_recv(id);
            return Ok(None);
        }
        Err(ReadError::Blocked)
    }

    fn after_conn_read(&mut self, now: Instant, rtt: Duration) {
        let unused = self.local_max_data - self.read_data;
        if unused <= self.recv_window / 2 && !self.pending.max_data {
            autotune(
                &mut self.recv_window,
                self.max_recv_window,
                now,
                rtt,
                self.last_max_data_update,
            );
            self.last_max_data_update = Some(now);
            self.pending.max_data = true;
        }
    }

    /// Forgets a receive stream once the application has seen its end, and grants the peer
    /// a new stream in its place.
    fn maybe_close_recv(&mut self, id: StreamId) {
        let done = self.recv.get(&id).is_some_and(|r| r.finished_reading);
        if !done {
            return;
        }
        self.recv.remove(&id);
        self.maybe_forget(id);
    }

    fn maybe_forget(&mut self, id: StreamId) {
        if self.send.contains_key(&id) || self.recv.contains_key(&id) {
            return;
        }
        if id.initiator() != self.side {
            let i = dir_index(id.dir());
            // One new stream for each one closed keeps the concurrency constant.
            self.max_remote[i] += 1;
            self.pending.max_streams[i] = true;
        }
    }

    // ---- frames received ----

    /// Finds or opens (for a peer-initiated ID) the receive side of a stream.
    fn recv_stream(&mut self, id: StreamId) -> Result<Option<&mut RecvStream>, TransportError> {
        if id.initiator() == self.side {
            if id.dir() == Dir::Uni {
                return Err(TransportError::new(
                    error_code::STREAM_STATE_ERROR,
                    "data on our own unidirectional stream",
                ));
            }
            if id.index() >= self.next_local[dir_index(id.dir())] {
                return Err(TransportError::new(
                    error_code::STREAM_STATE_ERROR,
                    "frame for a stream we never opened",
                ));
            }
            return Ok(self.recv.get_mut(&id));
        }
        self.open_remote_up_to(id)?;
        Ok(self.recv.get_mut(&id))
    }

    fn open_remote_up_to(&mut self, id: StreamId) -> Result<(), TransportError> {
        let i = dir_index(id.dir());
        if id.index() >= self.max_remote[i] {
            return Err(TransportError::new(
                error_code::STREAM_LIMIT_ERROR,
                "peer exceeded MAX_STREAMS",
            ));
        }
        while self.next_remote[i] <= id.index() {
            let new = StreamId::new(self.side.peer(), id.dir(), self.next_remote[i]);
            self.next_remote[i] += 1;
            self.recv.insert(new, RecvStream::new(self.stream_window));
            if id.dir() == Dir::Bi {
                let limit = self.peer_initial_stream_limit(new);
                self.send.insert(new, SendStream::new(limit));
            }
            self.events.push_back(StreamEvent::Opened(id.dir()));
        }
        Ok(())
    }

    fn check_conn_credit(&mut self, grown: u64) -> Result<(), TransportError> {
        self.received_data += grown;
        if self.received_data > self.local_max_data {
            return Err(TransportError::new(
                error_code::FLOW_CONTROL_ERROR,
                "peer exceeded MAX_DATA",
            ));
        }
        Ok(())
    }

    pub fn on_stream_frame(
        &mut self,
        f: &StreamFrame<'_>,
        data: Bytes,
    ) -> Result<(), TransportError> {
        let id = f.id;
        let Some(r) = self.recv_stream(id)? else {
            return Ok(());
        };
        let was_readable = r.has_readable();
        let grown = r.ingest(f.offset, data, f.fin)?;
        let now_readable = r.has_readable();
        self.check_conn_credit(grown)?;
        if now_readable && !was_readable {
            self.events.push_back(StreamEvent::Readable(id));
        }
        Ok(())
    }

    pub fn on_reset_stream(
        &mut self,
        id: StreamId,
        code: u64,
        final_size: u64,
    ) -> Result<(), TransportError> {
        let Some(r) = self.recv_stream(id)? else {
            return Ok(());
        };
        let had_reset = r.reset.is_some();
        let unread = final_size.saturating_sub(r.read_offset);
        let grown = r.on_reset(code, final_size)?;
        self.check_conn_credit(grown)?;
        if !had_reset {
            self.events.push_back(StreamEvent::Readable(id));
            // The discarded bytes will never be read: give their credit back, or every
            // reset stream would shrink the connection window for good.
            self.read_data += unread;
            if self.local_max_data.saturating_sub(self.read_data) <= self.recv_window / 2 {
                self.pending.max_data = true;
            }
        }
        Ok(())
    }

    /// Checks a frame about our sending half (STOP_SENDING, MAX_STREAM_DATA) against the
    /// stream's existence and direction; a new peer stream is opened by it (RFC 9000 §3.2).
    fn check_send_half(&mut self, id: StreamId, frame: &str) -> Result<(), TransportError> {
        if id.initiator() != self.side && id.dir() == Dir::Uni {
            return Err(TransportError::new(
                error_code::STREAM_STATE_ERROR,
                format!("{frame} for a receive-only stream"),
            ));
        }
        if id.initiator() == self.side && id.index() >= self.next_local[dir_index(id.dir())] {
            return Err(TransportError::new(
                error_code::STREAM_STATE_ERROR,
                format!("{frame} for a stream we never opened"),
            ));
        }
        if id.initiator() != self.side {
            self.open_remote_up_to(id)?;
        }
        Ok(())
    }

    pub fn on_stop_sending(&mut self, id: StreamId, code: u64) -> Result<(), TransportError> {
        self.check_send_half(id, "STOP_SENDING")?;
        let Some(s) = self.send.get_mut(&id) else {
            return Ok(());
        };
        if s.stop_requested.is_none() {
            s.stop_requested = Some(code);
            self.events.push_back(StreamEvent::Stopped(id, code));
            if !matches!(s.state, SendState::Reset { .. } | SendState::AllAcked) {
                // RFC 9000 §3.5: answer with RESET_STREAM carrying the same code.
                s.reset(code);
                self.pending.reset.insert(id);
            }
        }
        Ok(())
    }

    pub fn on_max_data(&mut self, max: u64) {
        if max > self.peer_max_data {
            self.peer_max_data = max;
            self.data_blocked_at = None;
        }
    }

    pub fn on_max_stream_data(&mut self, id: StreamId, max: u64) -> Result<(), TransportError> {
        self.check_send_half(id, "MAX_STREAM_DATA")?;
        if let Some(s) = self.send.get_mut(&id)
            && max > s.max_data
        {
            s.max_data = max;
            s.blocked_at = None;
            if !s.queued && s.has_pending() {
                s.queued = true;
                self.send_queue.push_back(id);
            }
        }
        Ok(())
    }

    pub fn on_max_streams(&mut self, dir: Dir, count: u64) {
        let i = dir_index(dir);
        if count > self.max_local[i] {
            self.max_local[i] = count;
            self.events.push_back(StreamEvent::Available(dir));
        }
    }

    /// STREAM_DATA_BLOCKED / STREAMS_BLOCKED from the peer need only validation.
    pub fn on_stream_data_blocked(&mut self, id: StreamId) -> Result<(), TransportError> {
        if id.initiator() == self.side && id.dir() == Dir::Uni {
            return Err(TransportError::new(
                error_code::STREAM_STATE_ERROR,
                "STREAM_DATA_BLOCKED for a send-only stream",
            ));
        }
        self.recv_stream(id).map(|_| ())
    }

    // ---- transmit ----

    /// Whether stream frames or stream control frames are waiting (and sendable).
    pub fn wants_to_send(&self) -> bool {
        self.has_control_pending() || self.has_stream_data()
    }

    fn has_control_pending(&self) -> bool {
        let p = &self.pending;
        p.max_data
            || !p.max_stream_data.is_empty()
            || p.max_streams.iter().any(|b| *b)
            || !p.reset.is_empty()
            || !p.stop_sending.is_empty()
            || p.data_blocked
            || !p.stream_data_blocked.is_empty()
            || p.streams_blocked.iter().any(|b| *b)
    }

    pub fn has_stream_data(&self) -> bool {
        let credit = self.peer_max_data.saturating_sub(self.sent_data);
        self.send_queue
            .iter()
            .any(|id| self.send.get(id).is_some_and(|s| s.sendable(credit)))
    }

    /// Bytes of STREAM data the connection could send now (see [`SendStream::unsent_bytes`]),
    /// new data within the connection's credit.
    pub fn unsent_bytes(&self) -> u64 {
        let mut credit = self.peer_max_data.saturating_sub(self.sent_data);
        let mut total = 0;
        for id in &self.send_queue {
            if let Some(s) = self.send.get(id) {
                let n = s.unsent_bytes(credit);
                total += n;
                credit = credit.saturating_sub(n);
            }
        }
        total
    }

    /// Writes pending stream control frames while they fit in `max` bytes of `buf`.
    pub fn write_control(&mut self, buf: &mut Vec<u8>, max: usize, sent: &mut SentFrames) {
        let start = buf.len();
        let room = |buf: &Vec<u8>| max.saturating_sub(buf.len() - start);
        if self.pending.max_data {
            let f =
                frame::Frame::MaxData(self.local_max_data.max(self.read_data + self.recv_window));
            if f.encoded_len() <= room(buf) {
                self.local_max_data = self.local_max_data.max(self.read_data + self.recv_window);
                frame::Frame::MaxData(self.local_max_data).encode(buf);
                self.pending.max_data = false;
                sent.push(SentFrame::MaxData);
            }
        }
        while let Some(&id) = self.pending.max_stream_data.first() {
            let Some(r) = self.recv.get_mut(&id) else {
                self.pending.max_stream_data.pop_first();
                continue;
            };
            let max_now = r.read_offset + r.window;
            let f = frame::Frame::MaxStreamData {
                id,
                max: max_now.max(r.max_data),
            };
            if f.encoded_len() > room(buf) {
                break;
            }
            r.issue_credit();
            f.encode(buf);
            self.pending.max_stream_data.pop_first();
            sent.push(SentFrame::MaxStreamData(id));
        }
        for dir in [Dir::Bi, Dir::Uni] {
            let i = dir_index(dir);
            if self.pending.max_streams[i] {
                let f = frame::Frame::MaxStreams {
                    dir,
                    count: self.max_remote[i],
                };
                if f.encoded_len() <= room(buf) {
                    f.encode(buf);
                    self.pending.max_streams[i] = false;
                    sent.push(SentFrame::MaxStreams(dir));
                }
            }
        }
        while let Some(&id) = self.pending.reset.first() {
            let Some(s) = self.send.get(&id) else {
                self.pending.reset.pop_first();
                continue;
            };
            let SendState::Reset { code, .. } = s.state else {
                self.pending.reset.pop_first();
                continue;
            };
            let f = frame::Frame::ResetStream {
                id,
                error_code: code,
                final_size: s.next_offset,
            };
            if f.encoded_len() > room(buf) {
                break;
            }
            f.encode(buf);
            self.pending.reset.pop_first();
            sent.push(SentFrame::ResetStream(id));
        }
        while let Some(&id) = self.pending.stop_sending.first() {
            let Some(code) = self.recv.get(&id).and_then(|r| r.stop_sent) else {
                self.pending.stop_sending.pop_first();
                continue;
            };
            let f = frame::Frame::StopSending {
                id,
                error_code: code,
            };
            if f.encoded_len() > room(buf) {
                break;
            }
            f.encode(buf);
            self.pending.stop_sending.pop_first();
            sent.push(SentFrame::StopSending(id));
        }
        if self.pending.data_blocked {
            let f = frame::Frame::DataBlocked {
                limit: self.peer_max_data,
            };
            if f.encoded_len() <= room(buf) {
                f.encode(buf);
                self.pending.data_blocked = false;
                sent.push(SentFrame::DataBlocked);
            }
        }
        while let Some(&id) = self.pending.stream_data_blocked.first() {
            let Some(s) = self.send.get_mut(&id) else {
                self.pending.stream_data_blocked.pop_first();
                continue;
            };
            if !s.is_blocked() || s.blocked_at == Some(s.max_data) {
                self.pending.stream_data_blocked.pop_first();
                continue;
            }
            let f = frame::Frame::StreamDataBlocked {
                id,
                limit: s.max_data,
            };
            if f.encoded_len() > room(buf) {
                break;
            }
            f.encode(buf);
            s.blocked_at = Some(s.max_data);
            self.pending.stream_data_blocked.pop_first();
            sent.push(SentFrame::StreamDataBlocked(id));
        }
        for dir in [Dir::Bi, Dir::Uni] {
            let i = dir_index(dir);
            if self.pending.streams_blocked[i] {
                let f = frame::Frame::StreamsBlocked {
                    dir,
                    limit: self.max_local[i],
                };
                if f.encoded_len() <= room(buf) {
                    f.encode(buf);
                    self.pending.streams_blocked[i] = false;
                    sent.push(SentFrame::StreamsBlocked(dir));
                }
            }
        }
    }

    /// Fills up to `max` bytes of `buf` with STREAM frames, round-robin over streams. Returns
    /// how many of the bytes were sent before (retransmissions).
    pub fn write_stream_frames(
        &mut self,
        buf: &mut Vec<u8>,
        max: usize,
        sent: &mut SentFrames,
    ) -> u64 {
        let start = buf.len();
        let mut resent = 0;
        let mut visited = 0;
        let queue_len = self.send_queue.len();
        while visited < queue_len {
            let room = max.saturating_sub(buf.len() - start);
            // Smallest useful frame: type + id + offset + length + 1 byte.
            if room < 1 + 8 + 8 + 2 + 1 {
                break;
            }
            let Some(id) = self.send_queue.pop_front() else {
                break;
            };
            visited += 1;
            let Some(s) = self.send.get_mut(&id) else {
                continue;
            };
            let credit = self.peer_max_data.saturating_sub(self.sent_data);
            let header_max = 1 + varint_len(id.0) + 8 + varint_len(room as u64);
            let next_before = s.next_offset;
            let Some((offset, len, fin)) = s.next_chunk(room - header_max, credit) else {
                s.queued = false;
                if s.is_blocked() && s.blocked_at != Some(s.max_data) {
                    self.pending.stream_data_blocked.insert(id);
                }
                if credit == 0 && s.next_offset < s.write_offset() {
                    if self.data_blocked_at != Some(self.peer_max_data) {
                        self.data_blocked_at = Some(self.peer_max_data);
                        self.pending.data_blocked = true;
                    }
                    // Stays queued until MAX_DATA arrives.
                    s.queued = true;
                    self.send_queue.push_back(id);
                }
                continue;
            };
            self.sent_data += s.next_offset - next_before;
            if offset < next_before {
                resent += len as u64;
            }
            // Always with a length: a FEC-protected frame must not run to the packet's end,
            // which a recovered (zero-padded) symbol moves.
            frame::encode_stream_header(buf, id, offset, len, fin, true);
            s.copy_range(offset, len, buf);
            sent.push(SentFrame::Stream {
                id,
                offset,
                len: len as u32,
                fin,
            });
            if s.has_pending() {
                self.send_queue.push_back(id);
            } else {
                s.queued = false;
            }
        }
        resent
    }
}

impl Streams {
    // ---- acknowledgements and losses of what we sent ----

    pub fn on_stream_acked(&mut self, id: StreamId, offset: u64, len: usize, fin: bool) {
        let Some(s) = self.send.get_mut(&id) else {
            return;
        };
        let before = s.buffered();
        let all_acked = s.on_ack(offset, len, fin);
        let freed = s.buffered() < before;
        if s.write_blocked && freed && s.state == SendState::Open {
            s.write_blocked = false;
            self.events.push_back(StreamEvent::Writable(id));
        }
        if all_acked {
            self.events.push_back(StreamEvent::Finished(id));
            self.send.remove(&id);
            self.maybe_forget(id);
        }
        if freed && self.connection_write_blocked {
            self.release_connection_blocked();
        }
    }

    /// After the connection-wide limit blocked writes: once there is room again, every
    /// stream that found it full may write.
    fn release_connection_blocked(&mut self) {
        let total: u64 = self.send.values().map(|s| s.buffered()).sum();
        if total >= self.connection_send_buffer {
            return;
        }
        self.connection_write_blocked = false;
        for (&id, s) in self.send.iter_mut() {
            if s.write_blocked && s.state == SendState::Open {
                s.write_blocked = false;
                self.events.push_back(StreamEvent::Writable(id));
            }
        }
    }

    /// Whether the peer has all of a STREAM frame we sent: acknowledged, or its stream is
    /// gone from our send side (all acknowledged, or reset).
    pub fn is_delivered(&self, id: StreamId, offset: u64, len: usize, fin: bool) -> bool {
        self.send
            .get(&id)
            .is_none_or(|s| s.is_acked(offset, len, fin))
    }

    pub fn on_stream_lost(&mut self, id: StreamId, offset: u64, len: usize, fin: bool) {
        let Some(s) = self.send.get_mut(&id) else {
            return;
        };
        s.on_lost(offset, len, fin);
        if !s.queued && s.has_pending() {
            s.queued = true;
            self.send_queue.push_back(id);
        }
    }

    pub fn on_reset_acked(&mut self, id: StreamId) {
        let Some(s) = self.send.get_mut(&id) else {
            return;
        };
        if let SendState::Reset { code, .. } = s.state {
            s.state = SendState::Reset { code, acked: true };
            self.send.remove(&id);
            self.maybe_forget(id);
        }
    }

    /// A control frame was lost: queue it again if it still matters.
    pub fn on_control_lost(&mut self, f: &SentFrame) {
        match *f {
            SentFrame::MaxData => self.pending.max_data = true,
            SentFrame::MaxStreamData(id)
                if self
                    .recv
                    .get(&id)
                    .is_some_and(|r| r.final_size.is_none() && r.reset.is_none()) =>
            {
                self.pending.max_stream_data.insert(id);
            }
            SentFrame::MaxStreams(dir) => self.pending.max_streams[dir_index(dir)] = true,
            SentFrame::ResetStream(id)
                if self
                    .send
                    .get(&id)
                    .is_some_and(|s| matches!(s.state, SendState::Reset { acked: false, .. })) =>
            {
                self.pending.reset.insert(id);
            }
            SentFrame::StopSending(id)
                if self.recv.get(&id).is_some_and(|r| r.final_size.is_none()) =>
            {
                self.pending.stop_sending.insert(id);
            }
            SentFrame::DataBlocked => {
                self.pending.data_blocked = self.sent_data >= self.peer_max_data;
            }
            SentFrame::StreamDataBlocked(id) => {
                if let Some(s) = self.send.get_mut(&id)
                    && s.is_blocked()
                {
                    s.blocked_at = None;
                    self.pending.stream_data_blocked.insert(id);
                }
            }
            SentFrame::StreamsBlocked(dir) => {
                let i = dir_index(dir);
                self.pending.streams_blocked[i] = self.next_local[i] >= self.max_local[i];
            }
            _ => {}
        }
    }

    pub fn diagnostics(&self) -> String {
        let sends: Vec<String> = self
            .send
            .iter()
            .map(|(id, s)| format!("{id}:{}", s.diagnostics()))
            .collect();
        let recvs: Vec<String> = self
            .recv
            .iter()
            .map(|(id, r)| {
                format!(
                    "{id}:read {} highest {} final {:?} max {} buffered {}",
                    r.read_offset,
                    r.highest,
                    r.final_size,
                    r.max_data,
                    r.buffered()
                )
            })
            .collect();
        format!(
            "recv [{}] send [{}] queue {:?} conn credit {}",
            recvs.join(" "),
            sends.join(" "),
            self.send_queue,
            self.peer_max_data.saturating_sub(self.sent_data)
        )
    }

    /// Open stream counts, for tests and statistics.
    pub fn counts(&self) -> (usize, usize) {
        (self.send.len(), self.recv.len())
    }

    /// Whether any stream still has unacknowledged or unsent data.
    pub fn has_unacked_data(&self) -> bool {
        self.send
            .values()
            .any(|s| s.buffered() > 0 || s.state == SendState::Finished)
    }
}

/// Grows a receive window when credit updates come faster than every two RTTs, i.e. when the
/// window, not the sender, limits throughput.
fn autotune(window: &mut u64, max: u64, now: Instant, rtt: Duration, last: Option<Instant>) {
    if let Some(last) = last
        && now.saturating_duration_since(last) < rtt * 2
    {
        *window = (*window * 2).min(max);
    }
}
