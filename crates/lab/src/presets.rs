//! Link presets from DESIGN.md §4 and the papers.
//!
//! Each preset keeps the published range of every parameter (for experimental designs) and uses
//! its mid-point as the default; paper 003's use cases and the interop runner's link are single
//! points. The link is symmetric: each direction gets the rate, half the RTT as one-way delay,
//! a drop-tail queue (one BDP unless stated) and Bernoulli loss at the given rate.

use std::time::Duration;

use std::net::SocketAddr;

use qfec_sim::{LinkId, LinkSpec, LossSpec, Node, QueueLimit, Simulator, bdp_bytes};

/// Queue sizing rule of a preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueRule {
    /// One bandwidth-delay product (paper 000: "we adjust all buffers to be one BDP").
    Bdp,
    Packets(usize),
}

/// A closed parameter range `[lo, hi]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub lo: f64,
    pub hi: f64,
}

impl Range {
    pub const fn new(lo: f64, hi: f64) -> Self {
        Range { lo, hi }
    }
    pub const fn point(v: f64) -> Self {
        Range { lo: v, hi: v }
    }
    pub fn mid(&self) -> f64 {
        (self.lo + self.hi) / 2.0
    }
    /// The value at fraction `u` in [0, 1] of the range (for space-filling designs).
    pub fn at(&self, u: f64) -> f64 {
        self.lo + (self.hi - self.lo) * u.clamp(0.0, 1.0)
    }
}

/// A named network setting.
#[derive(Debug, Clone, PartialEq)]
pub struct Preset {
    pub name: &'static str,
    pub source: &'static str,
    /// Bottleneck rate, Mb/s.
    pub rate_mbps: Range,
    /// Round-trip propagation delay, ms.
    pub rtt_ms: Range,
    /// Random loss probability (0..1).
    pub loss: Range,
    pub queue: QueueRule,
    /// Bulk transfer size the paper uses with this setting.
    pub bulk_bytes: u64,
}

/// Paper 000 Table I, paper 003 §IV-B1, and the QUIC interop runner.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "wlan",
        source: "paper 000 Table I (NetType1, WLAN)",
        rate_mbps: Range::new(20.0, 30.0),
        rtt_ms: Range::new(20.0, 30.0),
        loss: Range::new(0.0, 0.05),
        queue: QueueRule::Bdp,
        bulk_bytes: 20_000_000,
    },
    Preset {
        name: "4g",
        source: "paper 000 Table I (NetType1, 4G)",
        rate_mbps: Range::new(15.0, 40.0),
        rtt_ms: Range::new(25.0, 40.0),
        loss: Range::new(0.0, 0.01),
        queue: QueueRule::Bdp,
        bulk_bytes: 20_000_000,
    },
    Preset {
        name: "3g",
        source: "paper 000 Table I (NetType2, 2G/3G)",
        rate_mbps: Range::new(5.0, 10.0),
        rtt_ms: Range::new(75.0, 100.0),
        loss: Range::new(0.0, 0.01),
        queue: QueueRule::Bdp,
        bulk_bytes: 20_000_000,
    },
    Preset {
        name: "satellite",
        source: "paper 000 Table I (NetType3, satellite)",
        rate_mbps: Range::new(1.0, 2.0),
        rtt_ms: Range::new(350.0, 700.0),
        loss: Range::new(0.05, 0.10),
        queue: QueueRule::Bdp,
        bulk_bytes: 5_000_000,
    },
    Preset {
        name: "da2gc",
        source: "paper 003 §IV-B1 (direct air-to-ground, Rula et al. averages)",
        rate_mbps: Range::point(0.468),
        rtt_ms: Range::point(262.0),
        loss: Range::point(0.033),
        queue: QueueRule::Bdp,
        bulk_bytes: 1_000_000,
    },
    Preset {
        name: "mss",
        source: "paper 003 §IV-B1 (mobile satellite service, Rula et al. averages)",
        rate_mbps: Range::point(1.89),
        rtt_ms: Range::point(761.0),
        loss: Range::point(0.06),
        queue: QueueRule::Bdp,
        bulk_bytes: 1_000_000,
    },
    Preset {
        name: "interop",
        source: "QUIC interop runner link (10 Mb/s, 15 ms one-way, 25-packet queue)",
        rate_mbps: Range::point(10.0),
        rtt_ms: Range::point(30.0),
        loss: Range::point(0.0),
        queue: QueueRule::Packets(25),
        bulk_bytes: 10_000_000,
    },
];

/// Gilbert-Elliott design ranges (p, r, k, h) and one-way delay, paper 002 Table 1.
pub const PAPER002_GE: GeDesign = GeDesign {
    p: Range::new(0.0, 0.01),
    r: Range::new(0.025, 0.5),
    k: Range::new(0.97, 1.0),
    h: Range::new(0.0, 0.4),
    owd_ms: Range::new(0.0, 100.0),
    rate_mbps: None,
};

/// Experimental-design ranges of paper 003 Table I (in-flight links).
pub const PAPER003_DESIGN: GeDesign = GeDesign {
    p: Range::new(0.01, 0.08),
    r: Range::new(0.08, 0.5),
    k: Range::new(0.98, 1.0),
    h: Range::new(0.0, 0.1),
    owd_ms: Range::new(100.0, 400.0),
    rate_mbps: Some(Range::new(0.3, 10.0)),
};

/// Ranges for Gilbert-Elliott experimental designs (papers' notation: k, h = delivery
/// probabilities in the good and bad state).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeDesign {
    pub p: Range,
    pub r: Range,
    pub k: Range,
    pub h: Range,
    pub owd_ms: Range,
    pub rate_mbps: Option<Range>,
}

/// The two directions of a path: `down` carries server -> client, `up` client -> server.
#[derive(Debug, Clone)]
pub struct LinkPair {
    pub down: LinkSpec,
    pub up: LinkSpec,
}

/// Default addresses for the two endpoints of a lab run.
pub fn server_addr() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], 443))
}

/// See [`server_addr`].
pub fn client_addr() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 2], 50_000))
}

impl LinkPair {
    /// Add both directions to `sim`: `down` for server -> client, `up` for client -> server.
    /// Returns (down, up) for reading the per-direction counters afterwards.
    pub fn install<N: Node>(
        &self,
        sim: &mut Simulator<N>,
        server: SocketAddr,
        client: SocketAddr,
    ) -> (LinkId, LinkId) {
        sim.connect(server, client, &self.down, &self.up)
    }
}

impl Preset {
    /// Look a preset up by name (case-insensitive); the error lists the valid names.
    pub fn from_name(name: &str) -> Result<&'static Preset, String> {
        PRESETS
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
                format!(
                    "unknown preset {name:?}; valid presets: {}",
                    names.join(", ")
                )
            })
    }

    pub fn rate_bps(&self) -> u64 {
        (self.rate_mbps.mid() * 1e6).round() as u64
    }

    pub fn rtt(&self) -> Duration {
        Duration::from_nanos((self.rtt_ms.mid() * 1e6).round() as u64)
    }

    /// Default loss: the mid-point of the range.
    pub fn default_loss(&self) -> f64 {
        self.loss.mid()
    }

    pub fn queue_limit(&self) -> QueueLimit {
        match self.queue {
            QueueRule::Bdp => QueueLimit::Bytes(bdp_bytes(self.rate_bps(), self.rtt()).max(1500)),
            QueueRule::Packets(n) => QueueLimit::Packets(n),
        }
    }

    /// Both directions at the mid-point, with Bernoulli loss `loss` (default: mid-range) on
    /// each direction.
    pub fn links(&self, loss: Option<f64>) -> LinkPair {
        let loss = loss.unwrap_or_else(|| self.default_loss());
        let one_way = self.rtt() / 2;
        let dir = |name: &str| {
            let mut l = LinkSpec::new(name, self.rate_bps(), one_way).queue(self.queue_limit());
            if loss > 0.0 {
                l = l.air_loss(LossSpec::Bernoulli { p: loss });
            }
            l
        };
        LinkPair {
            down: dir("down"),
            up: dir("up"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn midpoints_and_bdp() {
        let w = Preset::from_name("WLAN").unwrap();
        assert_eq!(w.rate_bps(), 25_000_000);
        assert_eq!(w.rtt(), Duration::from_millis(25));
        assert!((w.default_loss() - 0.025).abs() < 1e-12);
        assert_eq!(w.queue_limit(), QueueLimit::Bytes(78_125));
        let s = Preset::from_name("satellite").unwrap();
        assert_eq!(s.rtt(), Duration::from_millis(525));
        assert_eq!(s.bulk_bytes, 5_000_000);
        let d = Preset::from_name("da2gc").unwrap();
        assert_eq!(d.rate_bps(), 468_000);
        let i = Preset::from_name("interop").unwrap();
        let pair = i.links(Some(0.0));
        assert_eq!(pair.down.queue, QueueLimit::Packets(25));
        assert_eq!(pair.down.delay, Duration::from_millis(15));
        assert!(pair.down.air_loss.is_empty());
        let pair = w.links(Some(0.02));
        assert_eq!(pair.up.air_loss.len(), 1);
    }

    #[test]
    fn unknown_name_lists_valid_ones() {
        let e = Preset::from_name("lte").unwrap_err();
        assert!(
            e.contains("wlan, 4g, 3g, satellite, da2gc, mss, interop"),
            "{e}"
        );
    }
}
