//! Workloads: what the application moves over the simulated path.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::pages::{ObjectKind, PageModel, PageObject};

/// Paper 003's file sizes: 1 kB, 10 kB, 50 kB, 1 MB.
pub const PAPER003_FILES: [u64; 4] = [1_000, 10_000, 50_000, 1_000_000];

/// A real-time source (paper 002 §5.3): messages of several packets at a constant rate, read
/// by the receiver after a fixed playback buffer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RealtimeSpec {
    pub messages_per_sec: u32,
    pub packets_per_message: u32,
    /// Bytes of each packet's payload (a 13-byte header, then content).
    pub packet_bytes: u32,
    pub duration: Duration,
    pub playback_buffer: Duration,
    #[serde(default)]
    pub delivery: Delivery,
}

/// How the real-time source's packets travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// One DATAGRAM frame per packet (paper 002's unreliable stream): never retransmitted,
    /// sent with a deadline of one playback buffer after the message (see
    /// `qfec_proto::Connection::send_datagram_with_deadline`).
    #[default]
    Datagram,
    /// Each message on its own unidirectional stream (paper 002's reliable QUIC).
    Stream,
    /// As `Datagram`, over HTTP/3: the client requests `/live` and each packet is an HTTP
    /// datagram of that request (RFC 9297: one more byte, the Quarter Stream ID). Paper 002
    /// used raw QUIC, so its reproductions do not.
    H3Datagram,
}

/// Smallest real-time packet: the message number (4 bytes), packet index (1), send time (8).
pub const REALTIME_HEADER: u32 = 13;
/// Largest real-time packet: one DATAGRAM frame in a 1200-byte QUIC packet, with room for
/// FEC's SID and the longest short header.
pub const REALTIME_MAX_PACKET: u32 = 1100;

impl RealtimeSpec {
    /// Paper 002: 30 messages/s x 8 packets x 1000 B for 25 s, 100 ms playback buffer.
    pub fn paper002() -> Self {
        RealtimeSpec {
            messages_per_sec: 30,
            packets_per_message: 8,
            packet_bytes: 1000,
            duration: Duration::from_secs(25),
            playback_buffer: Duration::from_millis(100),
            delivery: Delivery::Datagram,
        }
    }

    /// Checks the sizes; the error names the field.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for (name, v) in [
            ("messages_per_sec", self.messages_per_sec),
            ("packets_per_message", self.packets_per_message),
        ] {
            if v == 0 {
                return Err((name, "must be positive".into()));
            }
        }
        if self.packets_per_message > 256 {
            return Err(("packets_per_message", "must be at most 256".into()));
        }
        if !(REALTIME_HEADER..=REALTIME_MAX_PACKET).contains(&self.packet_bytes) {
            return Err((
                "packet_size",
                format!(
                    "must be {REALTIME_HEADER}..={REALTIME_MAX_PACKET} bytes (one DATAGRAM per packet), got {}",
                    self.packet_bytes
                ),
            ));
        }
        Ok(())
    }

    /// Application bit rate.
    pub fn bitrate_bps(&self) -> u64 {
        u64::from(self.messages_per_sec)
            * u64::from(self.packets_per_message)
            * u64::from(self.packet_bytes)
            * 8
    }

    pub fn total_messages(&self) -> u64 {
        (self.duration.as_secs_f64() * f64::from(self.messages_per_sec)).round() as u64
    }
}

/// What to transfer in one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Workload {
    /// One download of `bytes` (server -> client).
    Bulk { bytes: u64 },
    /// Downloads of these sizes, one after the other on one connection.
    Files { sizes: Vec<u64> },
    /// A web page over HTTP/3: objects fetched level by level (level n+1 requested once
    /// level n is done), each level's objects at once.
    Page(PageModel),
    /// Paper 002's real-time message source.
    Realtime(RealtimeSpec),
}

impl Workload {
    /// Application bytes the server must deliver.
    pub fn total_bytes(&self) -> u64 {
        match self {
            Workload::Bulk { bytes } => *bytes,
            Workload::Files { sizes } => sizes.iter().sum(),
            Workload::Page(p) => p.total_bytes(),
            Workload::Realtime(r) => {
                r.total_messages() * u64::from(r.packets_per_message) * u64::from(r.packet_bytes)
            }
        }
    }

    /// Short label for tables and CSV ("bulk-20MB", "page-flickr", ...).
    pub fn label(&self) -> String {
        match self {
            Workload::Bulk { bytes } => format!("bulk-{}", short_size(*bytes)),
            Workload::Files { sizes } => {
                let s: Vec<String> = sizes.iter().map(|b| short_size(*b)).collect();
                format!("files-{}", s.join("+"))
            }
            Workload::Page(p) => format!("page-{}", p.name),
            Workload::Realtime(r) => format!(
                "realtime-{}x{}x{}B{}",
                r.messages_per_sec,
                r.packets_per_message,
                r.packet_bytes,
                match r.delivery {
                    Delivery::Datagram => "",
                    Delivery::Stream => "-stream",
                    Delivery::H3Datagram => "-h3",
                }
            ),
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// "20MB", "1776KiB", "1500B": exact when possible.
pub fn short_size(b: u64) -> String {
    for (div, unit) in [
        (1_000_000_000, "GB"),
        (1_000_000, "MB"),
        (1 << 20, "MiB"),
        (1_000, "kB"),
        (1 << 10, "KiB"),
    ] {
        if b >= div && b.is_multiple_of(div) {
            return format!("{}{unit}", b / div);
        }
    }
    format!("{b}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_totals() {
        assert_eq!(Workload::Bulk { bytes: 20_000_000 }.label(), "bulk-20MB");
        let f = Workload::Files {
            sizes: PAPER003_FILES.to_vec(),
        };
        assert_eq!(f.label(), "files-1kB+10kB+50kB+1MB");
        assert_eq!(f.total_bytes(), 1_061_000);
        let r = RealtimeSpec::paper002();
        assert_eq!(r.bitrate_bps(), 1_920_000);
        assert_eq!(Workload::Realtime(r).total_bytes(), 750 * 8 * 1000);
        assert_eq!(short_size(1_818_624), "1776KiB");
    }
}

impl Workload {
    /// Parses the command line's short form: `bulk:20MB`, `files:1kB,10kB,50kB,1MB`,
    /// `page:flickr` (or a paper 001 site), `realtime` or `realtime:25s`.
    pub fn parse(s: &str) -> Result<Workload, String> {
        let (kind, arg) = s.split_once(':').unwrap_or((s, ""));
        let need = |what: &str| {
            if arg.is_empty() {
                Err(format!(
                    "workload {s:?}: {kind} needs {what}, e.g. {kind}:{}",
                    example(kind)
                ))
            } else {
                Ok(arg)
            }
        };
        match kind {
            "bulk" => {
                let bytes = crate::units::parse_size_field(need("a size")?)
                    .map_err(|e| format!("workload {s:?}: {e}"))?;
                if bytes == 0 {
                    return Err(format!(
                        "workload {s:?}: a download of 0 bytes measures nothing; give a positive size, e.g. bulk:20MB"
                    ));
                }
                Ok(Workload::Bulk { bytes })
            }
            "files" => {
                let sizes =
                    crate::units::parse_list(need("sizes")?, crate::units::parse_size_field)
                        .map_err(|e| format!("workload {s:?}: {e}"))?;
                if sizes.contains(&0) {
                    return Err(format!(
                        "workload {s:?}: every file needs a positive size, e.g. files:1kB,10kB"
                    ));
                }
                Ok(Workload::Files { sizes })
            }
            "page" => crate::pages::PageModel::by_name(need("a page name")?)
                .map(Workload::Page)
                .map_err(|e| format!("workload {s:?}: {e}")),
            "realtime" => {
                let mut spec = RealtimeSpec::paper002();
                for opt in arg.split(',').map(str::trim).filter(|o| !o.is_empty()) {
                    match opt {
                        "stream" => spec.delivery = Delivery::Stream,
                        "datagram" => spec.delivery = Delivery::Datagram,
                        "h3" => spec.delivery = Delivery::H3Datagram,
                        _ => {
                            let (buffer, value) = match opt.strip_prefix("buffer=") {
                                Some(v) => (true, v),
                                None => (false, opt),
                            };
                            let d = crate::units::parse_duration(value).map_err(|e| {
                                format!(
                                    "workload {s:?}: {e}; options are DURATION, buffer=DURATION, stream, datagram, h3"
                                )
                            })?;
                            if buffer {
                                spec.playback_buffer = d;
                            } else {
                                spec.duration = d;
                            }
                        }
                    }
                }
                Ok(Workload::Realtime(spec))
            }
            _ => Err(format!(
                "unknown workload {s:?}; use bulk:SIZE, files:SIZE,SIZE.., page:NAME or realtime[:DURATION][,buffer=DURATION][,stream]"
            )),
        }
    }
}

fn example(kind: &str) -> &'static str {
    match kind {
        "bulk" => "20MB",
        "files" => "1kB,10kB,50kB,1MB",
        "page" => "flickr",
        _ => "...",
    }
}

#[cfg(test)]
mod parse_tests {
    use super::*;

    #[test]
    fn short_forms() {
        assert_eq!(
            Workload::parse("bulk:20MB"),
            Ok(Workload::Bulk { bytes: 20_000_000 })
        );
        assert_eq!(
            Workload::parse("files:1kB,1MB"),
            Ok(Workload::Files {
                sizes: vec![1_000, 1_000_000]
            })
        );
        assert!(matches!(
            Workload::parse("page:flickr"),
            Ok(Workload::Page(_))
        ));
        assert!(
            matches!(Workload::parse("realtime:5s"), Ok(Workload::Realtime(r)) if r.duration.as_secs() == 5)
        );
        assert!(Workload::parse("bulk").unwrap_err().contains("bulk:20MB"));
        assert!(Workload::parse("page:nosuchsite").is_err());
        assert!(
            Workload::parse("stream:1")
                .unwrap_err()
                .contains("unknown workload")
        );
    }
}
