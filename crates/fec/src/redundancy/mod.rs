//! How much repair a FEC sender sends: the [`RedundancyController`] trait and the built-in
//! controllers, named by [`Redundancy`] on the command line and in scenarios:
//!
//! - `fixed` ([`FixedRedundancy`]): one code at its own cadence (`xor`, `rs`, `rlc`, ...);
//! - `rquic` ([`Rquic`]): paper 000's Algorithm 1, an XOR block size steered by residual loss;
//! - `adaptive` ([`Adaptive`]): ours, repair only where the losses this connection sees make
//!   it pay (see its module docs).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use qfec_erasure::{Field, Scheme};
use qfec_proto::{ConnectionStats, ExtensionCx, Instant, PathStats, RecoveredLossMode};

mod adaptive;
mod rquic;

pub use adaptive::{Adaptive, AdaptiveConfig};
pub use rquic::{Rquic, RquicConfig};

/// What a controller may look at: only what a real sender sees. Computed on demand.
pub struct RedundancyCx<'c, 'a> {
    cx: &'c ExtensionCx<'a>,
    /// Source symbols added since the last repair symbol (not yet protected).
    pub unprotected: u64,
    /// How losses the peer recovers reach our congestion control.
    pub mode: RecoveredLossMode,
    /// For `protect_tail` and `tail_gap`: after which a repair sent now is of no use (the
    /// latest deadline of the symbols it covers); `None` when one of them has none (stream
    /// data), and for the other questions.
    pub deadline: Option<Instant>,
}

impl<'c, 'a> RedundancyCx<'c, 'a> {
    pub(crate) fn new(cx: &'c ExtensionCx<'a>, unprotected: u64, mode: RecoveredLossMode) -> Self {
        RedundancyCx {
            cx,
            unprotected,
            mode,
            deadline: None,
        }
    }

    pub(crate) fn with_deadline(mut self, deadline: Option<Instant>) -> Self {
        self.deadline = deadline;
        self
    }

    /// Largest payload of a full-size 1-RTT packet: the size of a packet, roughly.
    pub fn packet_size(&self) -> u64 {
        self.cx.max_packet_payload() as u64
    }

    /// The congestion window in full-size packets (at least 1).
    pub fn cwnd_packets(&self) -> u64 {
        (self.path().cwnd / self.packet_size().max(1)).max(1)
    }

    pub fn now(&self) -> Instant {
        self.cx.now
    }

    /// RTT, congestion window, bytes in flight, PTO.
    pub fn path(&self) -> PathStats {
        self.cx.path()
    }

    /// What the path's losses show ([`RedundancyCx::path`]'s `loss`, without the rest).
    pub fn path_loss(&self) -> qfec_proto::recovery::LossEstimate {
        self.cx.path_loss()
    }

    /// Bytes the application could still send now (STREAM data and DATAGRAMs).
    pub fn app_pending_bytes(&self) -> u64 {
        self.cx.app_data_pending_bytes()
    }

    /// What the endpoint remembered of the path when the connection began (earlier
    /// connections' losses), if anything.
    pub fn remembered_loss(&self) -> Option<qfec_proto::recovery::LossEstimate> {
        self.cx.remembered_loss()
    }

    /// The connection's counters (packets sent, lost, retransmitted, ...).
    pub fn stats(&self) -> &ConnectionStats {
        self.cx.stats()
    }
}

/// What happened to a symbol the sender sent, for controllers that adapt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feedback {
    SourceAcked,
    /// Declared lost by loss detection (it may still be reported recovered later).
    SourceLost,
    /// The peer reported the source symbol recovered.
    SourceRecovered,
    RepairAcked,
    RepairLost,
}

/// Decides how much repair to send. The sender asks it for the erasure code when it starts
/// encoding (again when the peer's coding window changes, and whenever `rescheme` says so),
/// whether each packet joins the code, whether to protect the symbols added so far after
/// each source symbol and when the sender runs out of data, and tells it what became of each
/// symbol.
pub trait RedundancyController: Send + fmt::Debug {
    fn name(&self) -> &'static str;

    /// The code to encode with. Its span (a block's source symbols from first to last, or the
    /// RLC window) must not exceed `max_span`, nor k + m for Reed-Solomon. `None`: no code
    /// for now; packets go unprotected until `rescheme` asks again.
    fn scheme(&mut self, max_span: u64) -> Option<Scheme>;

    /// Asked before each packet that could be protected: whether to replace the code (or get
    /// one, after `scheme` gave none). The sender first protects what the old code holds.
    fn rescheme(&mut self, _cx: &RedundancyCx<'_, '_>) -> bool {
        false
    }

    /// Asked before each packet the code could protect: whether this one joins the code
    /// (carries a SID and counts as a source symbol). A packet left out costs nothing and
    /// gets no repair.
    fn protect_packet(&mut self, _cx: &RedundancyCx<'_, '_>) -> bool {
        true
    }

    /// A source symbol went into the code (repair symbols the code's own cadence produced are
    /// already out) and some are unprotected: how many repair symbols to protect them with
    /// now (0: none). A block code closes its block once, whatever the count; RLC sends that
    /// many repairs over its window.
    fn protect_now(&mut self, _cx: &RedundancyCx<'_, '_>) -> u32 {
        0
    }

    /// The application has nothing more to send (for now) and some source symbols are
    /// unprotected: how many repair symbols to protect them with now, so that a tail loss
    /// does not wait for a probe timeout (0: none). A block code closes its block once,
    /// whatever the count; RLC sends that many repairs over its window.
    fn protect_tail(&mut self, _cx: &RedundancyCx<'_, '_>) -> u32 {
        1
    }

    /// How long the tail repair `protect_tail` asked for waits before it may leave (zero: at
    /// once). Not asked when a symbol it covers has a deadline.
    fn tail_gap(&self, _cx: &RedundancyCx<'_, '_>) -> Duration {
        Duration::ZERO
    }

    /// Whether to receive `on_feedback` (it costs a lookup per acknowledged packet).
    fn wants_feedback(&self) -> bool {
        false
    }

    fn on_feedback(&mut self, _cx: &RedundancyCx<'_, '_>, _feedback: Feedback) {}
}

/// Fixed redundancy: one code with its own cadence, the tail protected when the sender runs
/// out of data (unless `tail` is false).
#[derive(Debug, Clone)]
pub struct FixedRedundancy {
    pub scheme: Scheme,
    /// Protect what is unprotected when the sender runs out of data. Without it a block
    /// closes only when full, as paper 002's real-time codes do: a message that ends mid-block
    /// waits for the next message's symbols.
    pub tail: bool,
}

impl RedundancyController for FixedRedundancy {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn scheme(&mut self, max_span: u64) -> Option<Scheme> {
        fit_to_window(self.scheme, max_span)
    }

    fn protect_tail(&mut self, _cx: &RedundancyCx<'_, '_>) -> u32 {
        u32::from(self.tail)
    }
}

/// `scheme` shrunk so that it fits a coding window of `max_span` source symbols.
pub fn fit_to_window(scheme: Scheme, max_span: u64) -> Option<Scheme> {
    let w = max_span.min(4095);
    if w == 0 {
        return None;
    }
    Some(match scheme {
        Scheme::Xor { k, depth } => {
            let depth = u64::from(depth).min(w);
            // (k - 1) * depth + 1 <= w
            let k = u64::from(k).min((w - 1) / depth + 1).max(1);
            Scheme::Xor {
                k: k as u8,
                depth: depth as u16,
            }
        }
        Scheme::ReedSolomon { k, m } => {
            if w < 2 {
                return None;
            }
            let m = u64::from(m).min(w / 2).max(1);
            let k = u64::from(k).min(w - m).max(1);
            Scheme::ReedSolomon {
                k: k as u8,
                m: m as u8,
            }
        }
        Scheme::Rlc {
            window,
            density,
            field,
            interval,
            repairs,
        } => Scheme::Rlc {
            window: u64::from(window).min(w) as u16,
            density,
            field,
            interval,
            repairs,
        },
    })
}

/// The built-in redundancy settings, as written on the command line and in scenarios:
/// `xor`, `xor(k,depth)`, `rs`, `rs(k,m)`, `rlc`, `rlc(window,interval[,repairs][,gf2][,dt=N])`,
/// each with an optional last `tail=off`, `rquic`, `rquic(ss=off,tail=off)` (either or both),
/// `adaptive` and
/// `adaptive(prior=RATE)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redundancy {
    /// A fixed code (see [`FixedRedundancy`]).
    Fixed(Scheme),
    /// A fixed code at its own cadence only (`tail=off`): nothing is protected early when the
    /// sender runs out of data (see [`FixedRedundancy::tail`]).
    Cadence(Scheme),
    /// Paper 000's adaptive XOR (see [`Rquic`]).
    Rquic(RquicConfig),
    /// Ours (see [`Adaptive`]); the default when FEC is on without a named code.
    Adaptive(AdaptiveConfig),
}

impl Default for Redundancy {
    fn default() -> Self {
        Redundancy::Adaptive(AdaptiveConfig::default())
    }
}

impl Redundancy {
    /// Paper 002's XOR: (3,2), i.e. one repair per 2 source symbols, 10 interleaved blocks.
    pub const XOR: Scheme = Scheme::Xor { k: 2, depth: 10 };
    /// Papers 002/003's Reed-Solomon: 20 source + 10 repair symbols per block.
    pub const RS: Scheme = Scheme::ReedSolomon { k: 20, m: 10 };
    /// Papers 002/003's RLC (3,2,20): one repair per 2 source symbols over a window of 20.
    pub const RLC: Scheme = Scheme::Rlc {
        window: 20,
        density: 15,
        field: Field::Gf256,
        interval: 2,
        repairs: 1,
    };

    /// How recovered losses reach congestion control unless the user says otherwise: `mask`
    /// for rQUIC (paper 000 hides them), `differentiate` for `adaptive` (a loss recovered
    /// without a standing queue was the channel's), `signal` (RFC 9265) for fixed codes.
    pub fn default_mode(&self) -> RecoveredLossMode {
        match self {
            Redundancy::Rquic(_) => RecoveredLossMode::Mask,
            Redundancy::Adaptive(_) => RecoveredLossMode::Differentiate,
            _ => RecoveredLossMode::Signal,
        }
    }

    /// Copies of the first handshake flight (`packets` packets) an endpoint sending with
    /// this redundancy asks for, at most `max`: `adaptive` sizes them from its prior and
    /// what the endpoint remembers of the path (`remembered`), as it sizes a tail's repair;
    /// the fixed codes and `rquic` (the papers' schemes) send none.
    pub fn handshake_copies(
        &self,
        remembered: Option<qfec_proto::recovery::LossEstimate>,
        packets: u64,
        max: u8,
    ) -> u8 {
        match self {
            Redundancy::Adaptive(c) => adaptive::handshake_copies(c, remembered, packets, max),
            Redundancy::Fixed(_) | Redundancy::Cadence(_) | Redundancy::Rquic(_) => 0,
        }
    }

    /// A controller for one connection.
    pub fn controller(&self) -> Box<dyn RedundancyController> {
        match *self {
            Redundancy::Fixed(scheme) => Box::new(FixedRedundancy { scheme, tail: true }),
            Redundancy::Cadence(scheme) => Box::new(FixedRedundancy {
                scheme,
                tail: false,
            }),
            Redundancy::Rquic(c) => Box::new(Rquic::new(c)),
            Redundancy::Adaptive(c) => Box::new(Adaptive::new(c)),
        }
    }
}

impl fmt::Display for Redundancy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (scheme, tail) = match self {
            Redundancy::Fixed(s) => (*s, ""),
            Redundancy::Cadence(s) => (*s, ",tail=off"),
            Redundancy::Rquic(c) => {
                let opts: Vec<&str> = [
                    (!c.fec_in_slow_start).then_some("ss=off"),
                    (!c.tail_repair).then_some("tail=off"),
                ]
                .into_iter()
                .flatten()
                .collect();
                return if opts.is_empty() {
                    f.write_str("rquic")
                } else {
                    write!(f, "rquic({})", opts.join(","))
                };
            }
            Redundancy::Adaptive(c) if *c == AdaptiveConfig::default() => {
                return f.write_str("adaptive");
            }
            Redundancy::Adaptive(c) => {
                return write!(f, "adaptive(prior={}%)", f64::from(c.prior_loss) / 100.0);
            }
        };
        match scheme {
            Scheme::Xor { k, depth } => write!(f, "xor({k},{depth}{tail})"),
            Scheme::ReedSolomon { k, m } => write!(f, "rs({k},{m}{tail})"),
            Scheme::Rlc {
                window,
                density,
                field,
                interval,
                repairs,
            } => {
                write!(f, "rlc({window},{interval}")?;
                if repairs != 1 {
                    write!(f, ",{repairs}")?;
                }
                if field == Field::Gf2 {
                    f.write_str(",gf2")?;
                }
                if density != 15 {
                    write!(f, ",dt={density}")?;
                }
                write!(f, "{tail})")
            }
        }
    }
}

/// A FEC setting that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{reason} in FEC setting {input:?}: use none, adaptive, adaptive(prior=RATE), rquic, \
     rquic(ss=off), rquic(tail=off), xor, \
     xor(K,DEPTH), rs, rs(K,M), rlc or rlc(WINDOW,INTERVAL[,REPAIRS][,gf2][,dt=N]); a fixed \
     code may end with tail=off, e.g. rs(20,10,tail=off) or xor(tail=off)"
)]
pub struct ParseRedundancyError {
    pub input: String,
    pub reason: String,
}

/// Parses a FEC setting: `none` (or `off`) gives `None`, `on` the default ([`Adaptive`]).
pub fn parse_fec(s: &str) -> Result<Option<Redundancy>, ParseRedundancyError> {
    let t = s.trim().to_ascii_lowercase();
    if t == "none" || t == "off" {
        return Ok(None);
    }
    if t == "on" {
        return Ok(Some(Redundancy::default()));
    }
    t.parse()
        .map(Some)
        .map_err(|e: ParseRedundancyError| ParseRedundancyError {
            input: s.to_string(),
            reason: e.reason,
        })
}

impl FromStr for Redundancy {
    type Err = ParseRedundancyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: String| ParseRedundancyError {
            input: s.to_string(),
            reason,
        };
        let t = s.trim().to_ascii_lowercase();
        let (name, mut args) = match t.split_once('(') {
            Some((n, rest)) => {
                let inner = rest
                    .strip_suffix(')')
                    .ok_or_else(|| err("missing closing parenthesis".into()))?;
                let args: Vec<&str> = inner
                    .split(',')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .collect();
                (n.trim(), args)
            }
            None => (t.as_str(), Vec::new()),
        };
        let num = |a: &str, what: &str, max: u64| -> Result<u64, ParseRedundancyError> {
            match a.parse::<u64>() {
                Ok(v) if (1..=max).contains(&v) => Ok(v),
                _ => Err(err(format!(
                    "{what} must be an integer in 1..={max}, got {a:?}"
                ))),
            }
        };
        if name == "rquic" {
            let mut c = RquicConfig::default();
            for a in &args {
                match *a {
                    "ss=off" => c.fec_in_slow_start = false,
                    "ss=on" => c.fec_in_slow_start = true,
                    "tail=off" => c.tail_repair = false,
                    "tail=on" => c.tail_repair = true,
                    _ => {
                        return Err(err(format!(
                            "unknown rquic option {a:?}: use ss=off and/or tail=off"
                        )));
                    }
                }
            }
            return Ok(Redundancy::Rquic(c));
        }
        // `tail=off` (last) makes a fixed code a `Cadence` one.
        let tail = match args.last().and_then(|a| a.strip_prefix("tail=")) {
            None => true,
            Some(_) if !matches!(name, "xor" | "rs" | "rlc") => {
                return Err(err(format!("tail= applies to xor, rs and rlc, not {name}")));
            }
            Some(v) => {
                let on = match v {
                    "on" => true,
                    "off" => false,
                    _ => return Err(err("tail must be on or off".into())),
                };
                args.pop();
                on
            }
        };
        let scheme = match (name, args.as_slice()) {
            ("adaptive", []) => return Ok(Redundancy::Adaptive(AdaptiveConfig::default())),
            ("adaptive", [a]) => {
                let v = a.strip_prefix("prior=").ok_or_else(|| {
                    err(format!(
                        "unknown adaptive option {a:?}: use prior=RATE, e.g. prior=2%"
                    ))
                })?;
                let rate = match v.strip_suffix('%') {
                    Some(pct) => pct.trim().parse::<f64>().map(|x| x / 100.0),
                    None => v.parse::<f64>(),
                };
                return match rate {
                    Ok(r) if (0.0..=0.5).contains(&r) => Ok(Redundancy::Adaptive(AdaptiveConfig {
                        prior_loss: (r * 10_000.0).round() as u16,
                    })),
                    _ => Err(err(format!(
                        "prior must be a loss rate from 0 to 50 %, e.g. 2% or 0.02, got {v:?}"
                    ))),
                };
            }
            ("xor", []) => Redundancy::XOR,
            ("xor", [k]) => Scheme::Xor {
                k: num(k, "k", 255)? as u8,
                depth: 1,
            },
            ("xor", [k, d]) => Scheme::Xor {
                k: num(k, "k", 255)? as u8,
                depth: num(d, "depth", 1024)? as u16,
            },
            ("rs", []) => Redundancy::RS,
            ("rs", [k, m]) => {
                let (k, m) = (num(k, "k", 254)?, num(m, "m", 254)?);
                if k + m > 255 {
                    return Err(err("k + m must not exceed 255".into()));
                }
                Scheme::ReedSolomon {
                    k: k as u8,
                    m: m as u8,
                }
            }
            ("rlc", []) => Redundancy::RLC,
            ("rlc", [w, i, rest @ ..]) => {
                let Scheme::Rlc {
                    mut density,
                    mut field,
                    mut repairs,
                    ..
                } = Redundancy::RLC
                else {
                    unreachable!("RLC default is an RLC scheme")
                };
                for (n, a) in rest.iter().enumerate() {
                    if *a == "gf2" {
                        field = Field::Gf2;
                    } else if *a == "gf256" {
                        field = Field::Gf256;
                    } else if let Some(v) = a.strip_prefix("dt=") {
                        density = match v.parse::<u8>() {
                            Ok(d) if d <= 15 => d,
                            _ => return Err(err(format!("dt must be 0..=15, got {v:?}"))),
                        };
                    } else if n == 0 {
                        repairs = num(a, "repairs", 255)? as u8;
                    } else {
                        return Err(err(format!("unknown RLC option {a:?}")));
                    }
                }
                Scheme::Rlc {
                    window: num(w, "window", 4095)? as u16,
                    density,
                    field,
                    interval: num(i, "interval", 65535)? as u16,
                    repairs,
                }
            }
            ("xor" | "rs" | "rlc" | "rquic" | "adaptive", _) => {
                return Err(err(format!("wrong number of parameters for {name}")));
            }
            _ => return Err(err(format!("unknown scheme {name:?}"))),
        };
        scheme.validate().map_err(|e| err(e.to_string())).map(|()| {
            if tail {
                Redundancy::Fixed(scheme)
            } else {
                Redundancy::Cadence(scheme)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print() {
        for (s, want) in [
            ("xor", Redundancy::XOR),
            ("rs", Redundancy::RS),
            ("rlc", Redundancy::RLC),
            ("RS(30, 5)", Scheme::ReedSolomon { k: 30, m: 5 }),
            ("xor(4)", Scheme::Xor { k: 4, depth: 1 }),
            (
                "rlc(16,10,2,gf2,dt=7)",
                Scheme::Rlc {
                    window: 16,
                    density: 7,
                    field: Field::Gf2,
                    interval: 10,
                    repairs: 2,
                },
            ),
        ] {
            let r: Redundancy = s.parse().unwrap();
            assert_eq!(r, Redundancy::Fixed(want), "{s}");
            assert_eq!(r.to_string().parse::<Redundancy>().unwrap(), r);
        }
        for (s, want, printed) in [
            ("rs(20,10,tail=off)", Redundancy::RS, "rs(20,10,tail=off)"),
            ("xor(tail=off)", Redundancy::XOR, "xor(2,10,tail=off)"),
            ("rlc(20,2,tail=off)", Redundancy::RLC, "rlc(20,2,tail=off)"),
        ] {
            let r: Redundancy = s.parse().unwrap();
            assert_eq!(r, Redundancy::Cadence(want), "{s}");
            assert_eq!(r.to_string(), printed);
            assert_eq!(printed.parse::<Redundancy>().unwrap(), r);
        }
        assert_eq!(
            "rs(20,10,tail=on)".parse::<Redundancy>().unwrap(),
            Redundancy::Fixed(Redundancy::RS)
        );
        assert_eq!(parse_fec(" None ").unwrap(), None);
        assert_eq!(parse_fec("on").unwrap(), Some(Redundancy::default()));
        for s in [
            "adaptive",
            "rquic",
            "rquic(ss=off)",
            "rquic(tail=off)",
            "rquic(ss=off,tail=off)",
            "adaptive(prior=0.5%)",
        ] {
            let r = parse_fec(s).unwrap().unwrap();
            assert_eq!(r.to_string(), s);
        }
        assert_eq!(
            parse_fec("rquic").unwrap().unwrap().default_mode(),
            RecoveredLossMode::Mask
        );
        assert_eq!(
            Redundancy::default().default_mode(),
            RecoveredLossMode::Differentiate
        );
        assert_eq!(
            Redundancy::Fixed(Redundancy::RLC).default_mode(),
            RecoveredLossMode::Signal
        );
        assert_eq!(
            parse_fec("adaptive(prior=0)").unwrap(),
            Some(Redundancy::Adaptive(AdaptiveConfig { prior_loss: 0 }))
        );
        assert_eq!(
            parse_fec("adaptive(prior=0.02)").unwrap(),
            Some(Redundancy::default())
        );
        assert!(matches!(
            parse_fec("rquic(ss=off)").unwrap(),
            Some(Redundancy::Rquic(RquicConfig {
                fec_in_slow_start: false,
                tail_repair: true,
            }))
        ));
        assert_eq!(
            parse_fec("rquic(tail=off, ss=on)").unwrap(),
            Some(Redundancy::Rquic(RquicConfig::PAPER))
        );
        for bad in [
            "rs(200,100)",
            "xor(0)",
            "rlc(20)",
            "ldpc",
            "rs(20,10",
            "rlc(20,2,x)",
            "rquic(fast)",
            "adaptive(3)",
            "adaptive(prior=60%)",
            "adaptive(prior=x)",
            "rquic(tail=maybe)",
            "rs(20,10,tail=maybe)",
            "rs(20,tail=off)",
        ] {
            let e = parse_fec(bad).unwrap_err().to_string();
            assert!(e.contains(bad) && e.contains("rs(K,M)"), "{e}");
        }
    }

    #[test]
    fn schemes_shrink_to_the_window() {
        assert_eq!(
            fit_to_window(Redundancy::RS, 16),
            Some(Scheme::ReedSolomon { k: 8, m: 8 })
        );
        assert_eq!(fit_to_window(Redundancy::RS, 64), Some(Redundancy::RS));
        assert_eq!(
            fit_to_window(Scheme::Xor { k: 5, depth: 10 }, 25),
            Some(Scheme::Xor { k: 3, depth: 10 })
        );
        assert_eq!(fit_to_window(Redundancy::RLC, 0), None);
        let Some(Scheme::Rlc { window, .. }) = fit_to_window(Redundancy::RLC, 8) else {
            panic!()
        };
        assert_eq!(window, 8);
    }
}
