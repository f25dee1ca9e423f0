//! # qfec-qlog: qlog traces of qfec connections
//!
//! Turns the typed events of `qfec_proto::events` into qlog JSON-SEQ files (`.sqlog`, RFC
//! 7464: a record separator 0x1E before each JSON record, a line feed after it, the header
//! record first). It follows the texts in the project's `shared/refs`:
//! draft-ietf-quic-qlog-main-schema (the editor's copy after -13) and
//! draft-ietf-quic-qlog-quic-events (the editor's copy after -12, so the event schema is
//! identified as [`QUIC_EVENT_SCHEMA`], `…:quic-13`): event names `quic:packet_sent`,
//! `quic:recovery_metrics_updated`, `quic:parameters_set`, ... and the `QlogFileSeq` header
//! with `file_schema` and `serialization_format`. Extensions' events (FEC's) keep their own
//! namespace and are listed in `event_schemas` when the caller names their schema.
//!
//! Time: every event carries the `now` the protocol core was given, written as milliseconds
//! since the origin of that clock (`time_format` `relative_to_epoch` with a `monotonic`
//! reference clock whose epoch is `unknown`, the draft's form for a clock that is not the
//! calendar's). In the lab the origin is the start of the run in virtual time; for real
//! sockets it is the start of the driver, and the header carries the wall-clock time.
//!
//! The header also carries `qlog_version` and `qlog_format: "JSON-SEQ"`: qvis's JSON-SEQ
//! loader predates `file_schema` and refuses a file without them.
//!
//! Why not the `qlog` crate (quiche's): its streamer stamps events from
//! `std::time::Instant` (the lab runs in virtual time), and it encodes an older draft's
//! header and event layout than the one in `shared/refs` that the tests check against; its
//! escape hatch for extension events would leave FEC's events untyped anyway. The mapping
//! here is a few hundred lines of `serde_json` values.
//!
//! [`validate`] checks files against the drafts' required fields; the tests of this crate,
//! the lab and the command-line program use it.

mod json;
pub mod validate;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use qfec_proto::events::{ConnectionInfo, ConnectionState, Event, EventSink, EventSinkFactory};
use qfec_proto::{Instant, Side};
use serde_json::{Value, json};

pub use json::event_record;

/// The QUIC event schema of the draft followed (see the crate docs).
pub const QUIC_EVENT_SCHEMA: &str = "urn:ietf:params:qlog:events:quic-13";
/// qfec's own loss-recovery events, which the QUIC schema has no names for: the private
/// `recovery` namespace (`recovery:spurious_loss`, `recovery:loss_thresholds_updated`,
/// `recovery:congestion_undone`), listed in every file's `event_schemas`.
pub const RECOVERY_EVENT_SCHEMA: &str = "urn:x-qfec:qlog:events:recovery";
/// The file schema of JSON-SEQ qlog files.
pub const FILE_SCHEMA_SEQ: &str = "urn:ietf:params:qlog:file:sequential";
pub const SERIALIZATION_FORMAT: &str = "application/qlog+json-seq";
/// The record separator that starts each JSON-SEQ record.
pub const RS: u8 = 0x1e;

/// Whose view a trace is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Vantage {
    Client,
    Server,
}

impl Vantage {
    pub fn as_str(self) -> &'static str {
        match self {
            Vantage::Client => "client",
            Vantage::Server => "server",
        }
    }
}

impl From<Side> for Vantage {
    fn from(s: Side) -> Self {
        if s.is_client() {
            Vantage::Client
        } else {
            Vantage::Server
        }
    }
}

/// What goes into a file's header record.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceHeader {
    pub title: String,
    pub vantage: Vantage,
    /// The original destination connection ID (hex), the trace's `group_id`.
    pub group_id: Option<String>,
    /// Event schemas besides the QUIC one (e.g. FEC's).
    pub extra_schemas: Vec<String>,
    /// RFC 3339 wall-clock time at the clock's origin, if known (not in the lab, whose
    /// output must not depend on when it ran).
    pub wall_clock_time: Option<String>,
}

/// Writes one JSON-SEQ qlog trace.
pub struct QlogWriter<W: Write> {
    out: W,
}

impl<W: Write> QlogWriter<W> {
    /// Writes the header record.
    pub fn new(mut out: W, header: &TraceHeader) -> io::Result<Self> {
        let mut schemas = vec![
            Value::from(QUIC_EVENT_SCHEMA),
            Value::from(RECOVERY_EVENT_SCHEMA),
        ];
        schemas.extend(header.extra_schemas.iter().map(|s| Value::from(s.as_str())));
        let mut reference = json!({"clock_type": "monotonic", "epoch": "unknown"});
        if let Some(w) = &header.wall_clock_time {
            reference["wall_clock_time"] = Value::from(w.as_str());
        }
        let mut common = json!({
            "time_format": "relative_to_epoch",
            "reference_time": reference,
        });
        if let Some(g) = &header.group_id {
            common["group_id"] = Value::from(g.as_str());
        }
        let record = json!({
            "file_schema": FILE_SCHEMA_SEQ,
            "serialization_format": SERIALIZATION_FORMAT,
            "title": header.title,
            "qlog_version": "0.3",
            "qlog_format": "JSON-SEQ",
            "trace": {
                "title": header.title,
                "common_fields": common,
                "vantage_point": {"name": "qfec", "type": header.vantage.as_str()},
                "event_schemas": schemas,
            }
        });
        write_record(&mut out, &record)?;
        Ok(QlogWriter { out })
    }

    /// Writes one event (events the mapping does not know are skipped).
    pub fn event(&mut self, now: Instant, event: &Event<'_>) -> io::Result<()> {
        match event_record(now, event) {
            Some(r) => write_record(&mut self.out, &r),
            None => Ok(()),
        }
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Writes one record with a single `write_all`, so that a buffered writer never leaves half
/// a record in the file for a reader of a live trace.
fn write_record(out: &mut impl Write, record: &Value) -> io::Result<()> {
    let mut buf = Vec::with_capacity(256);
    buf.push(RS);
    serde_json::to_writer(&mut buf, record).map_err(io::Error::other)?;
    buf.push(b'\n');
    out.write_all(&buf)
}

/// Why a qlog file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("qlog {path}: {source}")]
pub struct QlogError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

/// Where and how a [`QlogFactory`] writes.
#[derive(Debug, Clone, PartialEq)]
pub struct QlogOptions {
    pub dir: PathBuf,
    /// Put before each file name (the lab's run label); empty for the QLOGDIR convention.
    pub prefix: String,
    pub title: String,
    pub extra_schemas: Vec<String>,
    pub wall_clock_time: Option<String>,
}

impl QlogOptions {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        QlogOptions {
            dir: dir.into(),
            prefix: String::new(),
            title: "qfec".into(),
            extra_schemas: Vec::new(),
            wall_clock_time: None,
        }
    }
}

/// Writes one file per connection, `PREFIX<odcid>_<client|server>.sqlog` (the QUIC interop
/// runner's and the draft's QLOGDIR naming), and the endpoint's stateless answers (Version
/// Negotiation, Retry, stateless resets, datagrams for no connection) to
/// `PREFIXendpoint_server.sqlog`, created when the first one happens.
#[derive(Debug)]
pub struct QlogFactory {
    options: QlogOptions,
    endpoint: Mutex<Option<QlogWriter<BufWriter<File>>>>,
    /// The first error met (files are written from inside the protocol core, which cannot
    /// report it).
    error: Mutex<Option<String>>,
}

impl<W: Write> std::fmt::Debug for QlogWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("QlogWriter")
    }
}

impl QlogFactory {
    /// Creates the directory if needed.
    pub fn new(options: QlogOptions) -> Result<Self, QlogError> {
        std::fs::create_dir_all(&options.dir).map_err(|source| QlogError {
            path: options.dir.clone(),
            source,
        })?;
        Ok(QlogFactory {
            options,
            endpoint: Mutex::new(None),
            error: Mutex::new(None),
        })
    }

    /// The file of a connection.
    pub fn path_for(&self, odcid: &str, vantage: Vantage) -> PathBuf {
        self.options.dir.join(format!(
            "{}{}_{}.sqlog",
            self.options.prefix,
            odcid,
            vantage.as_str()
        ))
    }

    /// The first error met while writing, if any.
    pub fn error(&self) -> Option<String> {
        self.error.lock().ok().and_then(|e| e.clone())
    }

    /// Flushes the endpoint file.
    pub fn flush(&self) {
        if let Ok(mut e) = self.endpoint.lock()
            && let Some(w) = e.as_mut()
            && let Err(err) = w.flush()
        {
            self.record_error(&self.options.dir, &err);
        }
    }

    fn record_error(&self, path: &Path, err: &io::Error) {
        tracing::warn!(path = %path.display(), error = %err, "qlog");
        if let Ok(mut e) = self.error.lock() {
            e.get_or_insert_with(|| format!("qlog {}: {err}", path.display()));
        }
    }

    fn open(&self, path: &Path, header: &TraceHeader) -> Option<QlogWriter<BufWriter<File>>> {
        let w = File::create(path)
            .and_then(|f| QlogWriter::new(BufWriter::with_capacity(64 << 10, f), header));
        match w {
            Ok(w) => Some(w),
            Err(e) => {
                self.record_error(path, &e);
                None
            }
        }
    }

    fn header(&self, vantage: Vantage, group_id: Option<String>) -> TraceHeader {
        TraceHeader {
            title: self.options.title.clone(),
            vantage,
            group_id,
            extra_schemas: self.options.extra_schemas.clone(),
            wall_clock_time: self.options.wall_clock_time.clone(),
        }
    }
}

impl EventSinkFactory for QlogFactory {
    fn connection_sink(&self, info: &ConnectionInfo) -> Option<Box<dyn EventSink>> {
        let odcid = info.original_dcid.to_string();
        let vantage = Vantage::from(info.side);
        let path = self.path_for(&odcid, vantage);
        let writer = self.open(&path, &self.header(vantage, Some(odcid)))?;
        Some(Box::new(QlogSink {
            writer,
            path,
            failed: false,
            flushed: None,
        }))
    }

    fn endpoint_event(&self, now: Instant, event: &Event<'_>) {
        let Ok(mut slot) = self.endpoint.lock() else {
            return;
        };
        let path = self.options.dir.join(format!(
            "{}endpoint_{}.sqlog",
            self.options.prefix,
            Vantage::Server.as_str()
        ));
        if slot.is_none() {
            *slot = self.open(&path, &self.header(Vantage::Server, None));
        }
        // Rare events of a long-lived process: each reaches the file at once.
        if let Some(w) = slot.as_mut()
            && let Err(e) = w.event(now, event).and_then(|()| w.flush())
        {
            *slot = None;
            drop(slot);
            self.record_error(&path, &e);
        }
    }
}

/// How long a connection's events may wait in its buffer: a process that is killed (as a
/// test harness or a batch scheduler stops a server) loses at most this much of the trace.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// One connection's file. Flushed when the connection closes, at its first event
/// [`FLUSH_EVERY`] after the last flush, and when dropped.
struct QlogSink {
    writer: QlogWriter<BufWriter<File>>,
    path: PathBuf,
    failed: bool,
    /// When the file was last flushed (`None`: not yet).
    flushed: Option<Instant>,
}

impl EventSink for QlogSink {
    fn event(&mut self, now: Instant, event: &Event<'_>) {
        if self.failed {
            return;
        }
        let mut r = self.writer.event(now, event);
        let closed = matches!(
            event,
            Event::ConnectionClosed { .. }
                | Event::ConnectionStateUpdated {
                    new: ConnectionState::Closed,
                    ..
                }
        );
        let due = self
            .flushed
            .is_none_or(|at| now.saturating_duration_since(at) >= FLUSH_EVERY);
        if closed || due {
            r = r.and_then(|()| self.writer.flush());
            self.flushed = Some(now);
        }
        if let Err(e) = r {
            // One warning per file; the rest of the trace is lost.
            tracing::warn!(path = %self.path.display(), error = %e, "qlog write failed");
            self.failed = true;
        }
    }
}

impl Drop for QlogSink {
    fn drop(&mut self) {
        if !self.failed {
            let _ = self.writer.flush();
        }
    }
}
