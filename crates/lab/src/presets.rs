//! Link presets from DESIGN.md §4 and the papers.
//!
//! Each preset keeps the published range of every parameter (for experimental designs) and uses
//! its mid-point as the default; paper 003's use cases and the interop runner's link are single
//! points. The link is symmetric: each direction gets the rate, half the RTT as one-way delay,
//! a drop-tail queue (one BDP unless stated) and Bernoulli loss at the given rate.
//!
//! A WLAN preset ([`Preset::wlan`], paper 001's `wlan-n`) is a wired path of the given RTT
//! whose last hop is one 802.11n channel shared by the access point (downlink) and the client
//! (uplink), see [`Wlan`]: its rate is the PHY rate and its loss the MPDU error rate, which
//! the MAC's retransmissions hide from the transport.

use std::fmt;
use std::time::Duration;

use std::net::SocketAddr;

use qfec_sim::wifi::{
    Aggregation, Band, ChannelWidth, HtRate, MAX_AMPDU_BYTES, MAX_AMPDU_MPDUS, MAX_HT_PPDU,
    WifiChannel, WifiSpecError, WifiStation,
};
use qfec_sim::{LinkId, LinkSpec, LossSpec, Node, QueueLimit, Serializer, Simulator, bdp_bytes};

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
    /// The last hop is a WLAN: `rate_mbps` is its PHY rate, `loss` its MPDU error rate,
    /// `rtt_ms` the wired round trip, `queue` each station's MAC queue.
    pub wlan: Option<Wlan>,
}

/// An 802.11n hop between the wired path and the client: the server's packets reach the
/// access point over the wire and wait in its MAC queue (the `down` direction's station); the
/// client's packets wait in its own station's queue (`up`); both contend for one channel.
/// With several flows, all clients share the one client station.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Wlan {
    pub band: Band,
    /// HT MCS 0-31.
    pub mcs: u8,
    pub width: ChannelWidth,
    pub short_gi: bool,
    /// None: one MPDU per channel access.
    pub aggregation: Option<Aggregation>,
    /// MAC retransmissions of an MPDU before it is dropped.
    pub retry_limit: u32,
    /// The access point's MAC queue (downlink).
    pub ap_queue: QueueLimit,
    /// The client's MAC queue (uplink).
    pub client_queue: QueueLimit,
}

/// The channel name both stations of a lab WLAN join.
const WLAN_CHANNEL: &str = "wlan";

impl Wlan {
    /// Paper 001's lab (Table III: a Raspberry Pi 3 reaches 42-52 Mb/s of QUIC goodput). The
    /// paper gives no MCS; the Pi 3's radio is a one-stream 2.4 GHz 802.11n chip, whose top
    /// rate is MCS 7 at 20 MHz: 65 Mb/s with the long guard interval, where saturated
    /// 1500-byte UDP reaches about 60 Mb/s with full A-MPDUs. Queues of 1000 packets: Linux's
    /// default transmit queue length, which OpenWrt access points keep.
    pub const PAPER001: Wlan = Wlan {
        band: Band::Ghz2_4,
        mcs: 7,
        width: ChannelWidth::Mhz20,
        short_gi: false,
        aggregation: Some(Aggregation {
            max_mpdus: MAX_AMPDU_MPDUS,
            max_bytes: MAX_AMPDU_BYTES,
            max_ppdu: MAX_HT_PPDU,
        }),
        retry_limit: 7,
        ap_queue: QueueLimit::Packets(1000),
        client_queue: QueueLimit::Packets(1000),
    };

    /// The PHY rate.
    pub fn rate(&self) -> Result<HtRate, WifiSpecError> {
        HtRate::new(self.mcs, self.width, self.short_gi)
    }

    /// One station of this WLAN with MPDU error rate `mpdu_error`, checked.
    pub fn station(&self, mpdu_error: f64) -> Result<WifiStation, WifiSpecError> {
        let st = WifiStation::new(WifiChannel::new(WLAN_CHANNEL, self.band), self.rate()?)
            .aggregation(self.aggregation)
            .retry_limit(self.retry_limit)
            .mpdu_error_rate(mpdu_error);
        st.validate()?;
        Ok(st)
    }

    /// Both directions: the access point's station down, the client's up, each followed by
    /// the wired one-way delay `wired`.
    pub fn links(&self, wired: Duration, mpdu_error: f64) -> Result<LinkPair, WifiSpecError> {
        let st = self.station(mpdu_error)?;
        let dir = |name: &str, queue: QueueLimit| {
            let mut l = LinkSpec::new(name, 0, wired).queue(queue);
            l.serializer = Serializer::Wifi(st.clone());
            l
        };
        Ok(LinkPair {
            down: dir("down", self.ap_queue),
            up: dir("up", self.client_queue),
        })
    }
}

impl fmt::Display for Wlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "802.11n {} MCS {} {} MHz {} GI, ",
            self.band,
            self.mcs,
            self.width.mhz(),
            if self.short_gi { "short" } else { "long" }
        )?;
        match self.aggregation {
            Some(a) => write!(f, "A-MPDU {} MPDUs / {} B", a.max_mpdus, a.max_bytes)?,
            None => f.write_str("no aggregation")?,
        }
        write!(f, ", retry limit {}", self.retry_limit)
    }
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
        wlan: None,
    },
    Preset {
        name: "4g",
        source: "paper 000 Table I (NetType1, 4G)",
        rate_mbps: Range::new(15.0, 40.0),
        rtt_ms: Range::new(25.0, 40.0),
        loss: Range::new(0.0, 0.01),
        queue: QueueRule::Bdp,
        bulk_bytes: 20_000_000,
        wlan: None,
    },
    Preset {
        name: "3g",
        source: "paper 000 Table I (NetType2, 2G/3G)",
        rate_mbps: Range::new(5.0, 10.0),
        rtt_ms: Range::new(75.0, 100.0),
        loss: Range::new(0.0, 0.01),
        queue: QueueRule::Bdp,
        bulk_bytes: 20_000_000,
        wlan: None,
    },
    Preset {
        name: "satellite",
        source: "paper 000 Table I (NetType3, satellite)",
        rate_mbps: Range::new(1.0, 2.0),
        rtt_ms: Range::new(350.0, 700.0),
        loss: Range::new(0.05, 0.10),
        queue: QueueRule::Bdp,
        bulk_bytes: 5_000_000,
        wlan: None,
    },
    Preset {
        name: "da2gc",
        source: "paper 003 §IV-B1 (direct air-to-ground, Rula et al. averages)",
        rate_mbps: Range::point(0.468),
        rtt_ms: Range::point(262.0),
        loss: Range::point(0.033),
        queue: QueueRule::Bdp,
        bulk_bytes: 1_000_000,
        wlan: None,
    },
    Preset {
        name: "mss",
        source: "paper 003 §IV-B1 (mobile satellite service, Rula et al. averages)",
        rate_mbps: Range::point(1.89),
        rtt_ms: Range::point(761.0),
        loss: Range::point(0.06),
        queue: QueueRule::Bdp,
        bulk_bytes: 1_000_000,
        wlan: None,
    },
    Preset {
        name: "interop",
        source: "QUIC interop runner link (10 Mb/s, 15 ms one-way, 25-packet queue)",
        rate_mbps: Range::point(10.0),
        rtt_ms: Range::point(30.0),
        loss: Range::point(0.0),
        queue: QueueRule::Packets(25),
        bulk_bytes: 10_000_000,
        wlan: None,
    },
    Preset {
        name: "wlan-n",
        source: "paper 001 §IV (802.11n lab, one station)",
        // PHY rate of MCS 7, 20 MHz, long GI (see `Wlan::PAPER001`).
        rate_mbps: Range::point(65.0),
        // Paper 001: "an average RTT in the range of 6 ms to 10 ms"; here the wired part.
        rtt_ms: Range::new(6.0, 10.0),
        // MPDU error rate before MAC retries: seven retries leave ~0 residual loss, as the
        // paper's lab measured.
        loss: Range::new(0.0, 0.10),
        queue: QueueRule::Packets(1000),
        // Paper 001's bulk transfer: a 10 MB image.
        bulk_bytes: 10_000_000,
        wlan: Some(Wlan::PAPER001),
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
    /// Both directions at `rate_bps` with half of `rtt` each way, a one-BDP drop-tail queue,
    /// and Bernoulli loss `loss` on the air (none at 0).
    pub fn symmetric(rate_bps: u64, rtt: Duration, loss: f64) -> LinkPair {
        let dir = |name: &str| LinkSpec::new(name, rate_bps, rtt / 2).queue_bdp(rtt);
        LinkPair {
            down: dir("down"),
            up: dir("up"),
        }
        .with_loss(loss)
    }

    /// The same links with random loss `p` on both directions: the MPDU error rate of WLAN
    /// stations, Bernoulli loss on the air elsewhere.
    pub fn with_loss(&self, p: f64) -> LinkPair {
        let mut out = self.clone();
        for d in [&mut out.down, &mut out.up] {
            match &mut d.serializer {
                Serializer::Wifi(st) => {
                    *st = st.clone().mpdu_error_rate(p);
                }
                _ => {
                    d.air_loss = if p > 0.0 {
                        vec![LossSpec::Bernoulli { p }]
                    } else {
                        Vec::new()
                    };
                }
            }
        }
        out
    }

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
                let near = PRESETS
                    .iter()
                    .map(|p| (edit_distance(&name.to_ascii_lowercase(), p.name), p.name))
                    .filter(|(d, _)| *d <= 2)
                    .min();
                format!(
                    "unknown preset {name:?}{}; valid presets: {}",
                    near.map_or(String::new(), |(_, n)| format!(" (did you mean {n:?}?)")),
                    names.join(", ")
                )
            })
    }

    /// A preset per path of a name like `wlan+4g`: the first path's, then one per further
    /// path (multipath runs). A plain name is one path.
    pub fn paths_from_name(name: &str) -> Result<(&'static Preset, Vec<&'static Preset>), String> {
        let mut parts = name.split('+').map(str::trim);
        let first = Preset::from_name(parts.next().unwrap_or_default())?;
        let more = parts
            .map(Preset::from_name)
            .collect::<Result<Vec<_>, _>>()?;
        if more.len() >= crate::scenario::MAX_PATHS {
            return Err(format!(
                "{name:?}: at most {} paths",
                crate::scenario::MAX_PATHS
            ));
        }
        if let Some(w) = more.iter().find(|p| p.wlan.is_some()) {
            return Err(format!(
                "{name:?}: {} is a WLAN, which can only be the first path",
                w.name
            ));
        }
        Ok((first, more))
    }

    /// The further paths' links of a name like `wlan+4g` (none for a plain name), at each
    /// preset's default loss; see [`crate::scenario::preset_path`].
    pub fn extra_paths_of(name: &str) -> Result<Vec<LinkPair>, String> {
        let (_, more) = Preset::paths_from_name(name)?;
        more.iter()
            .enumerate()
            .map(|(i, p)| crate::scenario::preset_path(p, None, i + 1))
            .collect()
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
    /// each direction; for a WLAN preset, `loss` is the MPDU error rate.
    pub fn links(&self, loss: Option<f64>) -> LinkPair {
        let loss = loss.unwrap_or_else(|| self.default_loss());
        let one_way = self.rtt() / 2;
        if let Some(w) = &self.wlan {
            return w
                .links(one_way, loss)
                .expect("built-in WLAN presets are valid");
        }
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

/// Levenshtein distance, counting a swap of two neighbours as one edit ("wlna" is one from
/// "wlan"): for did-you-mean hints.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
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
            e.contains("wlan, 4g, 3g, satellite, da2gc, mss, interop, wlan-n"),
            "{e}"
        );
    }

    #[test]
    fn wlan_preset_builds_one_channel_with_two_stations() {
        let p = Preset::from_name("wlan-n").unwrap();
        let w = p.wlan.unwrap();
        assert!((w.rate().unwrap().rate_bps() - p.rate_bps() as f64).abs() < 1.0);
        assert_eq!(p.rtt(), Duration::from_millis(8));
        let pair = p.links(None);
        for (d, queue) in [(&pair.down, w.ap_queue), (&pair.up, w.client_queue)] {
            let Serializer::Wifi(st) = &d.serializer else {
                panic!("not a WLAN station: {:?}", d.serializer);
            };
            assert_eq!(st.channel.name, WLAN_CHANNEL);
            assert_eq!(st.retry_limit, 7);
            assert!(matches!(st.mpdu_error, LossSpec::Bernoulli { p } if (p - 0.05).abs() < 1e-12));
            assert_eq!(d.delay, Duration::from_millis(4));
            assert_eq!(d.queue, queue);
            assert!(d.air_loss.is_empty());
        }
        let clean = pair.with_loss(0.0);
        let Serializer::Wifi(st) = &clean.down.serializer else {
            unreachable!()
        };
        assert!(matches!(st.mpdu_error, LossSpec::None));
        assert!(clean.down.air_loss.is_empty());
        let wired = Preset::from_name("wlan")
            .unwrap()
            .links(Some(0.0))
            .with_loss(0.02);
        assert_eq!(wired.up.air_loss.len(), 1);
    }
}
