//! h3's QUIC traits ([`h3::quic`]) over a qfec [`Connection`], sans-IO.
//!
//! h3 is poll-based: its futures read and write through the traits implemented here, which
//! only touch a [`Bridge`]'s shared table of stream buffers and never the connection. The
//! owner of the connection calls [`Bridge::pump`] with it: the pump accepts and opens
//! streams, moves queued bytes into the connection's streams and received bytes out of
//! them, and wakes whatever waited. No clock and no runtime: the simulator's virtual-time
//! loop and `qfec-io`'s socket loop drive it the same way.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes};
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, WriteBuf};
use qfec_proto::{Connection, ConnectionError, Dir, Instant, ReadError, StreamId, WriteError};

use super::trace::{H3Event, Scanner};

/// Bytes the bridge holds per stream and direction: a writer waits (`poll_ready`) while its
/// queue is this full, and a stream is not read further while this much waits for h3. The
/// connection's own flow control does the rest.
pub const STREAM_BUFFER: usize = 256 * 1024;

/// HTTP/3's H3_NO_ERROR, for streams dropped before their end.
const H3_NO_ERROR: u64 = 0x100;

#[derive(Default)]
struct SendSide {
    queue: VecDeque<Bytes>,
    queued: usize,
    /// The writer finished; FIN follows the queue.
    finish: bool,
    /// FIN or RESET_STREAM handed to the connection: nothing more to do.
    done: bool,
    reset: Option<u64>,
    /// The peer's STOP_SENDING code, or the local stream's end.
    stopped: Option<u64>,
    waker: Option<Waker>,
}

#[derive(Default)]
struct RecvSide {
    queue: VecDeque<Bytes>,
    queued: usize,
    fin: bool,
    reset: Option<u64>,
    /// STOP_SENDING to send with this code (the reader is gone).
    stop: Option<u64>,
    stop_sent: bool,
    waker: Option<Waker>,
}

#[derive(Default)]
struct Stream {
    send: Option<SendSide>,
    recv: Option<RecvSide>,
    /// With a traced connection: the HTTP/3 frames each way, for its trace.
    scan: Option<Box<[Option<Scanner>; 2]>>,
}

impl Stream {
    /// A stream's two sides (`send`, `recv`), with scanners when `traced`.
    fn new(id: StreamId, send: bool, recv: bool, traced: bool) -> Self {
        let uni = id.0 & 0x2 != 0;
        Stream {
            send: send.then(SendSide::default),
            recv: recv.then(RecvSide::default),
            scan: traced.then(|| {
                Box::new([
                    send.then(|| Scanner::new(id.0, uni, true)),
                    recv.then(|| Scanner::new(id.0, uni, false)),
                ])
            }),
        }
    }
}

/// What the trait objects share with the pump.
#[derive(Default)]
struct Table {
    streams: BTreeMap<u64, Stream>,
    /// Streams the peer opened, not yet accepted by h3: bidirectional, unidirectional.
    incoming: [VecDeque<StreamId>; 2],
    accept_wakers: [Option<Waker>; 2],
    /// Streams opened for h3, not yet taken, and the callers waiting for one.
    opened: [VecDeque<StreamId>; 2],
    open_wakers: [Vec<Waker>; 2],
    close: Option<(u64, Vec<u8>)>,
    closed: bool,
    lost: Option<ConnectionErrorIncoming>,
}

fn dir_index(dir: Dir) -> usize {
    match dir {
        Dir::Bi => 0,
        Dir::Uni => 1,
    }
}

fn wake(w: &mut Option<Waker>) {
    if let Some(w) = w.take() {
        w.wake();
    }
}

fn register(slot: &mut Option<Waker>, cx: &Context<'_>) {
    match slot {
        Some(w) if w.will_wake(cx.waker()) => {}
        _ => *slot = Some(cx.waker().clone()),
    }
}

/// The error h3 sees for a closed connection.
fn incoming_error(e: &ConnectionError) -> ConnectionErrorIncoming {
    match e {
        ConnectionError::ApplicationClosed { code, .. } => {
            ConnectionErrorIncoming::ApplicationClose { error_code: *code }
        }
        ConnectionError::TimedOut => ConnectionErrorIncoming::Timeout,
        ConnectionError::LocallyClosed => ConnectionErrorIncoming::ApplicationClose {
            error_code: H3_NO_ERROR,
        },
        other => {
            ConnectionErrorIncoming::Undefined(Arc::new(std::io::Error::other(other.to_string())))
        }
    }
}

fn h3_id(id: StreamId) -> quic::StreamId {
    quic::StreamId::try_from(id.0).expect("QUIC stream IDs are below 2^62")
}

/// The connection's side of the bridge: owns the table the stream handles share.
pub struct Bridge {
    table: Rc<RefCell<Table>>,
}

impl Default for Bridge {
    fn default() -> Self {
        Self::new()
    }
}

impl Bridge {
    pub fn new() -> Self {
        Bridge {
            table: Rc::new(RefCell::new(Table::default())),
        }
    }

    /// The QUIC connection as h3 sees it, for `h3::client::builder().build(..)` or
    /// `h3::server::builder().build(..)`.
    pub fn quic(&self) -> QuicConnection {
        QuicConnection {
            table: self.table.clone(),
        }
    }

    /// Whether the connection is gone (closed by either side, or timed out).
    pub fn is_closed(&self) -> bool {
        self.table.borrow().closed
    }

    /// Moves everything that can move between the table and `conn`; returns whether
    /// anything did (then the h3 side may have work).
    pub fn pump(&mut self, now: Instant, conn: &mut Connection) -> bool {
        let mut t = self.table.borrow_mut();
        let t = &mut *t;
        if t.closed {
            return false;
        }
        let mut moved = false;
        if let Some((code, reason)) = t.close.take() {
            conn.close(now, code, &reason);
        }
        if conn.is_closed() || conn.error().is_some() {
            let e = conn.error().map(incoming_error).unwrap_or(
                ConnectionErrorIncoming::ApplicationClose {
                    error_code: H3_NO_ERROR,
                },
            );
            t.lost = Some(e);
            t.closed = true;
            for s in t.streams.values_mut() {
                if let Some(send) = &mut s.send {
                    wake(&mut send.waker);
                }
                if let Some(recv) = &mut s.recv {
                    wake(&mut recv.waker);
                }
            }
            for w in &mut t.accept_wakers {
                wake(w);
            }
            for ws in &mut t.open_wakers {
                ws.drain(..).for_each(Waker::wake);
            }
            return true;
        }
        let traced = conn.is_traced();
        let mut events = Vec::new();
        // Streams the peer opened.
        for dir in [Dir::Bi, Dir::Uni] {
            let i = dir_index(dir);
            while let Some(id) = conn.accept_stream(dir) {
                t.streams
                    .insert(id.0, Stream::new(id, dir == Dir::Bi, true, traced));
                if traced && dir == Dir::Bi {
                    events.push(Scanner::request_stream(id.0, false));
                }
                t.incoming[i].push_back(id);
                moved = true;
            }
            if !t.incoming[i].is_empty() {
                wake(&mut t.accept_wakers[i]);
            }
            // Streams h3 asked to open: one per waiting caller.
            let wanted = t.open_wakers[i].len().saturating_sub(t.opened[i].len());
            for _ in 0..wanted {
                let Some(id) = conn.open_stream(dir) else {
                    break;
                };
                t.streams
                    .insert(id.0, Stream::new(id, true, dir == Dir::Bi, traced));
                if traced && dir == Dir::Bi {
                    events.push(Scanner::request_stream(id.0, true));
                }
                t.opened[i].push_back(id);
                moved = true;
            }
            if !t.opened[i].is_empty() {
                t.open_wakers[i].drain(..).for_each(Waker::wake);
            }
        }
        let mut gone = Vec::new();
        for (&raw, s) in t.streams.iter_mut() {
            let id = StreamId(raw);
            let [send_scan, recv_scan] = match &mut s.scan {
                Some(b) => {
                    let [a, b] = &mut **b;
                    [a.as_mut(), b.as_mut()]
                }
                None => [None, None],
            };
            if let Some(send) = &mut s.send {
                moved |= pump_send(conn, id, send, send_scan, &mut events);
            }
            if let Some(recv) = &mut s.recv {
                moved |= pump_recv(now, conn, id, recv, recv_scan, &mut events);
            }
            let send_over = s.send.as_ref().is_none_or(|x| x.done);
            let recv_over = s
                .recv
                .as_ref()
                .is_none_or(|x| x.queue.is_empty() && (x.fin || x.reset.is_some() || x.stop_sent));
            if send_over && recv_over {
                gone.push(raw);
            }
        }
        for raw in gone {
            t.streams.remove(&raw);
        }
        for e in &events {
            conn.trace_application(now, e);
        }
        moved
    }
}

fn pump_send(
    conn: &mut Connection,
    id: StreamId,
    s: &mut SendSide,
    mut scan: Option<&mut Scanner>,
    events: &mut Vec<H3Event>,
) -> bool {
    if s.done {
        return false;
    }
    let mut moved = false;
    if let Some(code) = s.reset {
        let _ = conn.reset_stream(id, code);
        s.queue.clear();
        s.queued = 0;
        s.done = true;
        wake(&mut s.waker);
        return true;
    }
    while let Some(chunk) = s.queue.front() {
        match conn.write_chunk(id, chunk.clone()) {
            Ok(_) => {
                if let Some(sc) = scan.as_deref_mut() {
                    sc.feed(chunk, events);
                }
                s.queued -= chunk.len();
                s.queue.pop_front();
                moved = true;
            }
            Err(WriteError::Blocked) => break,
            Err(WriteError::Stopped(code)) => {
                s.stopped = Some(code);
                s.done = true;
                s.queue.clear();
                s.queued = 0;
                wake(&mut s.waker);
                return true;
            }
            Err(WriteError::ClosedStream) => {
                s.stopped = Some(H3_NO_ERROR);
                s.done = true;
                s.queue.clear();
                s.queued = 0;
                wake(&mut s.waker);
                return true;
            }
        }
    }
    if s.queue.is_empty() && s.finish {
        let _ = conn.finish(id);
        s.done = true;
        moved = true;
    }
    if s.queued < STREAM_BUFFER {
        wake(&mut s.waker);
    }
    moved
}

fn pump_recv(
    now: Instant,
    conn: &mut Connection,
    id: StreamId,
    r: &mut RecvSide,
    mut scan: Option<&mut Scanner>,
    events: &mut Vec<H3Event>,
) -> bool {
    if let Some(code) = r.stop {
        if !r.stop_sent {
            let _ = conn.stop_sending(id, code);
            r.stop_sent = true;
            return true;
        }
        return false;
    }
    let mut moved = false;
    while !r.fin && r.reset.is_none() && r.queued < STREAM_BUFFER {
        match conn.read(now, id, STREAM_BUFFER - r.queued) {
            Ok(Some(b)) => {
                if let Some(sc) = scan.as_deref_mut() {
                    sc.feed(&b, events);
                }
                r.queued += b.len();
                r.queue.push_back(b);
                moved = true;
            }
            Ok(None) => {
                r.fin = true;
                moved = true;
            }
            Err(ReadError::Blocked) => break,
            Err(ReadError::Reset(code)) => {
                r.reset = Some(code);
                moved = true;
            }
            Err(ReadError::ClosedStream) => {
                r.fin = true;
                moved = true;
            }
        }
    }
    if moved {
        wake(&mut r.waker);
    }
    moved
}

/// The connection for h3: accepts and opens streams through the bridge's table.
#[derive(Clone)]
pub struct QuicConnection {
    table: Rc<RefCell<Table>>,
}

/// A bidirectional stream: both halves.
pub struct BidiStream {
    send: SendStream,
    recv: RecvStream,
}

/// The sending half of a stream.
pub struct SendStream {
    id: StreamId,
    table: Rc<RefCell<Table>>,
}

/// The receiving half of a stream.
pub struct RecvStream {
    id: StreamId,
    table: Rc<RefCell<Table>>,
}

impl QuicConnection {
    fn take_incoming(
        &mut self,
        dir: Dir,
        cx: &Context<'_>,
    ) -> Poll<Result<StreamId, ConnectionErrorIncoming>> {
        let mut t = self.table.borrow_mut();
        let i = dir_index(dir);
        if let Some(id) = t.incoming[i].pop_front() {
            return Poll::Ready(Ok(id));
        }
        if let Some(e) = &t.lost {
            return Poll::Ready(Err(e.clone()));
        }
        register(&mut t.accept_wakers[i], cx);
        Poll::Pending
    }

    fn take_opened(
        &mut self,
        dir: Dir,
        cx: &Context<'_>,
    ) -> Poll<Result<StreamId, StreamErrorIncoming>> {
        let mut t = self.table.borrow_mut();
        let i = dir_index(dir);
        if let Some(id) = t.opened[i].pop_front() {
            return Poll::Ready(Ok(id));
        }
        if let Some(e) = &t.lost {
            return Poll::Ready(Err(StreamErrorIncoming::ConnectionErrorIncoming {
                connection_error: e.clone(),
            }));
        }
        let ws = &mut t.open_wakers[i];
        if !ws.iter().any(|w| w.will_wake(cx.waker())) {
            ws.push(cx.waker().clone());
        }
        Poll::Pending
    }

    fn bidi(&self, id: StreamId) -> BidiStream {
        BidiStream {
            send: SendStream {
                id,
                table: self.table.clone(),
            },
            recv: RecvStream {
                id,
                table: self.table.clone(),
            },
        }
    }
}

impl quic::Connection<Bytes> for QuicConnection {
    type RecvStream = RecvStream;
    type OpenStreams = QuicConnection;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<RecvStream, ConnectionErrorIncoming>> {
        self.take_incoming(Dir::Uni, cx).map_ok(|id| RecvStream {
            id,
            table: self.table.clone(),
        })
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<BidiStream, ConnectionErrorIncoming>> {
        self.take_incoming(Dir::Bi, cx).map_ok(|id| self.bidi(id))
    }

    fn opener(&self) -> QuicConnection {
        self.clone()
    }
}

impl quic::OpenStreams<Bytes> for QuicConnection {
    type BidiStream = BidiStream;
    type SendStream = SendStream;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<BidiStream, StreamErrorIncoming>> {
        self.take_opened(Dir::Bi, cx).map_ok(|id| self.bidi(id))
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<SendStream, StreamErrorIncoming>> {
        self.take_opened(Dir::Uni, cx).map_ok(|id| SendStream {
            id,
            table: self.table.clone(),
        })
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        let mut t = self.table.borrow_mut();
        if t.close.is_none() && !t.closed {
            t.close = Some((code.value(), reason.to_vec()));
        }
    }
}

fn lost(t: &Table) -> StreamErrorIncoming {
    StreamErrorIncoming::ConnectionErrorIncoming {
        connection_error: t
            .lost
            .clone()
            .unwrap_or(ConnectionErrorIncoming::ApplicationClose {
                error_code: H3_NO_ERROR,
            }),
    }
}

impl quic::SendStream<Bytes> for SendStream {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        let mut t = self.table.borrow_mut();
        if t.lost.is_some() {
            return Poll::Ready(Err(lost(&t)));
        }
        let Some(s) = t.streams.get_mut(&self.id.0).and_then(|s| s.send.as_mut()) else {
            return Poll::Ready(Err(StreamErrorIncoming::StreamTerminated {
                error_code: H3_NO_ERROR,
            }));
        };
        if let Some(code) = s.stopped {
            return Poll::Ready(Err(StreamErrorIncoming::StreamTerminated {
                error_code: code,
            }));
        }
        if s.queued < STREAM_BUFFER {
            return Poll::Ready(Ok(()));
        }
        register(&mut s.waker, cx);
        Poll::Pending
    }

    fn send_data<T: Into<WriteBuf<Bytes>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        let mut buf: WriteBuf<Bytes> = data.into();
        let mut t = self.table.borrow_mut();
        if t.lost.is_some() {
            return Err(lost(&t));
        }
        let Some(s) = t.streams.get_mut(&self.id.0).and_then(|s| s.send.as_mut()) else {
            return Err(StreamErrorIncoming::StreamTerminated {
                error_code: H3_NO_ERROR,
            });
        };
        if let Some(code) = s.stopped {
            return Err(StreamErrorIncoming::StreamTerminated { error_code: code });
        }
        while buf.has_remaining() {
            let n = buf.chunk().len();
            let chunk = buf.copy_to_bytes(n);
            s.queued += chunk.len();
            s.queue.push_back(chunk);
        }
        Ok(())
    }

    fn poll_finish(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        let mut t = self.table.borrow_mut();
        if t.lost.is_some() {
            return Poll::Ready(Err(lost(&t)));
        }
        if let Some(s) = t.streams.get_mut(&self.id.0).and_then(|s| s.send.as_mut()) {
            if let Some(code) = s.stopped {
                return Poll::Ready(Err(StreamErrorIncoming::StreamTerminated {
                    error_code: code,
                }));
            }
            s.finish = true;
        }
        Poll::Ready(Ok(()))
    }

    fn reset(&mut self, reset_code: u64) {
        let mut t = self.table.borrow_mut();
        if let Some(s) = t.streams.get_mut(&self.id.0).and_then(|s| s.send.as_mut())
            && !s.done
        {
            s.reset = Some(reset_code);
        }
    }

    fn send_id(&self) -> quic::StreamId {
        h3_id(self.id)
    }
}

impl quic::RecvStream for RecvStream {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let mut t = self.table.borrow_mut();
        let lost_now = t.lost.is_some().then(|| lost(&t));
        let Some(r) = t.streams.get_mut(&self.id.0).and_then(|s| s.recv.as_mut()) else {
            // Read to its end and forgotten.
            return Poll::Ready(Ok(None));
        };
        if let Some(b) = r.queue.pop_front() {
            r.queued -= b.len();
            return Poll::Ready(Ok(Some(b)));
        }
        if r.fin {
            return Poll::Ready(Ok(None));
        }
        if let Some(code) = r.reset {
            return Poll::Ready(Err(StreamErrorIncoming::StreamTerminated {
                error_code: code,
            }));
        }
        if let Some(e) = lost_now {
            return Poll::Ready(Err(e));
        }
        register(&mut r.waker, cx);
        Poll::Pending
    }

    fn stop_sending(&mut self, error_code: u64) {
        let mut t = self.table.borrow_mut();
        if let Some(r) = t.streams.get_mut(&self.id.0).and_then(|s| s.recv.as_mut())
            && !r.fin
            && r.reset.is_none()
            && r.stop.is_none()
        {
            r.stop = Some(error_code);
            r.queue.clear();
            r.queued = 0;
        }
    }

    fn recv_id(&self) -> quic::StreamId {
        h3_id(self.id)
    }
}

impl quic::SendStream<Bytes> for BidiStream {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_ready(cx)
    }
    fn send_data<T: Into<WriteBuf<Bytes>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        self.send.send_data(data)
    }
    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_finish(cx)
    }
    fn reset(&mut self, reset_code: u64) {
        quic::SendStream::<Bytes>::reset(&mut self.send, reset_code)
    }
    fn send_id(&self) -> quic::StreamId {
        quic::SendStream::<Bytes>::send_id(&self.send)
    }
}

impl quic::RecvStream for BidiStream {
    type Buf = Bytes;
    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        self.recv.poll_data(cx)
    }
    fn stop_sending(&mut self, error_code: u64) {
        self.recv.stop_sending(error_code)
    }
    fn recv_id(&self) -> quic::StreamId {
        self.recv.recv_id()
    }
}

impl quic::BidiStream<Bytes> for BidiStream {
    type SendStream = SendStream;
    type RecvStream = RecvStream;
    fn split(self) -> (SendStream, RecvStream) {
        (self.send, self.recv)
    }
}

impl Drop for RecvStream {
    /// A reader that goes away before the end asks the peer to stop sending (the bytes
    /// would pile up in the table otherwise).
    fn drop(&mut self) {
        if let Ok(mut t) = self.table.try_borrow_mut()
            && let Some(r) = t.streams.get_mut(&self.id.0).and_then(|s| s.recv.as_mut())
            && !r.fin
            && r.reset.is_none()
            && r.stop.is_none()
        {
            r.stop = Some(H3_NO_ERROR);
            r.queue.clear();
            r.queued = 0;
        }
    }
}
