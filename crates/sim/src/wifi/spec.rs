//! Configuration of a WLAN channel and of the stations that share it.

use std::fmt;
use std::time::Duration;

use super::phy::{Band, HtRate, LegacyRate};
use crate::loss::LossSpec;

/// MAC header of a QoS data MPDU with HT Control (30 bytes) plus the FCS (4).
pub const MAC_OVERHEAD_BYTES: usize = 34;
/// LLC/SNAP header in front of the IP packet.
pub const LLC_SNAP_BYTES: usize = 8;
/// IPv4 (20) and UDP (8) headers: simulator packets are UDP payloads.
pub const IP_UDP_BYTES: usize = 28;
/// A-MPDU subframe delimiter.
pub const DELIMITER_BYTES: usize = 4;
/// ACK frame (with FCS).
pub const ACK_BYTES: usize = 14;
/// Compressed Block ACK frame (with FCS).
pub const BLOCK_ACK_BYTES: usize = 32;
/// Block ACK window and A-MPDU limit of 802.11n: 64 MPDUs.
pub const MAX_AMPDU_MPDUS: u16 = 64;
/// Largest HT A-MPDU (maximum A-MPDU length exponent 3).
pub const MAX_AMPDU_BYTES: u32 = 65_535;
/// Longest HT-mixed PPDU: the L-SIG length field (4095 bytes at 6 Mb/s) spoofs at most
/// 5.484 ms.
pub const MAX_HT_PPDU: Duration = Duration::from_micros(5_484);
/// PHY-RX-START delay of an OFDM receiver (18.4.4): the wait for a response's preamble.
const RX_START_DELAY_NS: u64 = 25_000;

/// On-air size of the MPDU carrying a UDP payload of `udp_payload` bytes.
pub const fn mpdu_bytes(udp_payload: usize) -> usize {
    udp_payload + IP_UDP_BYTES + LLC_SNAP_BYTES + MAC_OVERHEAD_BYTES
}

/// Size of the A-MPDU subframe carrying that MPDU: delimiter, MPDU, padding to 4 bytes (the
/// last subframe of an A-MPDU is not padded).
pub const fn subframe_bytes(udp_payload: usize) -> usize {
    (DELIMITER_BYTES + mpdu_bytes(udp_payload)).next_multiple_of(4)
}

/// A wrong WLAN setting.
#[derive(Debug, Clone, PartialEq)]
pub enum WifiSpecError {
    Mcs(u8),
    ControlRate(u32),
    Aifsn(u8),
    ContentionWindow {
        cw_min: u16,
        cw_max: u16,
    },
    AggregationMpdus(u16),
    AggregationBytes(u32),
    AggregationPpdu(Duration),
    MpduError(f64),
    /// Two stations name the same channel with different channel settings.
    ChannelMismatch(String),
}

impl fmt::Display for WifiSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WifiSpecError::Mcs(m) => write!(
                f,
                "MCS {m} is not an 802.11n equal-modulation MCS: use 0-31 (8 per spatial stream)"
            ),
            WifiSpecError::ControlRate(r) => write!(
                f,
                "{r} Mb/s is not a legacy OFDM rate: use 6, 9, 12, 18, 24, 36, 48 or 54"
            ),
            WifiSpecError::Aifsn(a) => write!(f, "AIFSN {a} is out of range: use 1-15"),
            WifiSpecError::ContentionWindow { cw_min, cw_max } => write!(
                f,
                "contention window {cw_min}-{cw_max}: CWmin and CWmax must be 2^k - 1 (1..=32767) with CWmin <= CWmax"
            ),
            WifiSpecError::AggregationMpdus(n) => write!(
                f,
                "{n} MPDUs per A-MPDU: use 1-{MAX_AMPDU_MPDUS} (the Block ACK window)"
            ),
            WifiSpecError::AggregationBytes(n) => write!(
                f,
                "{n}-byte A-MPDUs: use up to {MAX_AMPDU_BYTES} bytes (802.11n), at least one MPDU"
            ),
            WifiSpecError::AggregationPpdu(d) => write!(
                f,
                "{d:?} PPDUs: use a positive limit up to {MAX_HT_PPDU:?} (HT-mixed L-SIG limit)"
            ),
            WifiSpecError::MpduError(p) => write!(
                f,
                "MPDU error rate {p}: use 0 <= p < 1 (at 1 nothing ever gets through)"
            ),
            WifiSpecError::ChannelMismatch(name) => write!(
                f,
                "stations of channel {name:?} disagree on the channel's settings (band, control rate)"
            ),
        }
    }
}

impl std::error::Error for WifiSpecError {}

/// What the stations of one channel share. Stations whose [`WifiChannel::name`] is equal share
/// the channel (their settings here must be equal too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WifiChannel {
    /// Joins stations to one channel; also labels the channel's stages.
    pub name: String,
    pub band: Band,
    /// Rate of the ACK and Block ACK responses.
    pub control_rate: LegacyRate,
}

impl WifiChannel {
    pub fn new(name: impl Into<String>, band: Band) -> Self {
        WifiChannel {
            name: name.into(),
            band,
            control_rate: LegacyRate::basic(),
        }
    }
}

/// EDCA access parameters of a station. The default is best effort, which equals DCF:
/// AIFSN 2 (AIFS = DIFS), CWmin 15, CWmax 1023.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    pub aifsn: u8,
    pub cw_min: u16,
    pub cw_max: u16,
}

impl Default for Access {
    fn default() -> Self {
        Access {
            aifsn: 2,
            cw_min: 15,
            cw_max: 1023,
        }
    }
}

/// A-MPDU limits. A station that wins the channel sends what it has queued, up to all three.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aggregation {
    /// MPDUs per A-MPDU, also the Block ACK window: MPDUs sent but not yet released (waiting
    /// for a retransmission ahead of them) count against it.
    pub max_mpdus: u16,
    /// A-MPDU length in bytes.
    pub max_bytes: u32,
    /// PPDU air time.
    pub max_ppdu: Duration,
}

impl Default for Aggregation {
    /// 802.11n's limits: 64 MPDUs, 65,535 bytes, 5.484 ms.
    fn default() -> Self {
        Aggregation {
            max_mpdus: MAX_AMPDU_MPDUS,
            max_bytes: MAX_AMPDU_BYTES,
            max_ppdu: MAX_HT_PPDU,
        }
    }
}

/// One station of a WLAN channel: the serializer of a link direction
/// ([`crate::Serializer::Wifi`]). The direction's drop-tail queue is the station's MAC queue
/// (MPDUs already sent and waiting in the Block ACK window are outside it, as in a driver's
/// hardware queue); its air loss, corruption and delay stages follow the medium.
#[derive(Debug, Clone)]
pub struct WifiStation {
    pub channel: WifiChannel,
    pub phy: HtRate,
    pub access: Access,
    /// Retransmissions of an MPDU before it is discarded (802.11's long retry limit): an MPDU
    /// is sent at most `retry_limit + 1` times.
    pub retry_limit: u32,
    /// None: one MPDU per channel access, answered by an ACK. Some: A-MPDUs answered by a
    /// Block ACK.
    pub aggregation: Option<Aggregation>,
    /// Error model applied to each MPDU transmission that did not collide; a lost MPDU is
    /// retransmitted by the MAC.
    pub mpdu_error: LossSpec,
}

impl WifiStation {
    /// A best-effort station with 802.11n aggregation, retry limit 7 and no MPDU errors.
    pub fn new(channel: WifiChannel, phy: HtRate) -> Self {
        WifiStation {
            channel,
            phy,
            access: Access::default(),
            retry_limit: 7,
            aggregation: Some(Aggregation::default()),
            mpdu_error: LossSpec::None,
        }
    }

    pub fn aggregation(mut self, a: Option<Aggregation>) -> Self {
        self.aggregation = a;
        self
    }

    pub fn access(mut self, a: Access) -> Self {
        self.access = a;
        self
    }

    pub fn retry_limit(mut self, r: u32) -> Self {
        self.retry_limit = r;
        self
    }

    /// Independent MPDU errors with probability `p` (0: none).
    pub fn mpdu_error_rate(mut self, p: f64) -> Self {
        self.mpdu_error = if p > 0.0 {
            LossSpec::Bernoulli { p }
        } else {
            LossSpec::None
        };
        self
    }

    /// Check every setting against the standard's ranges.
    pub fn validate(&self) -> Result<(), WifiSpecError> {
        let a = self.access;
        if !(1..=15).contains(&a.aifsn) {
            return Err(WifiSpecError::Aifsn(a.aifsn));
        }
        let pow2m1 = |x: u16| x > 0 && x < 32768 && (x + 1).is_power_of_two();
        if !pow2m1(a.cw_min) || !pow2m1(a.cw_max) || a.cw_min > a.cw_max {
            return Err(WifiSpecError::ContentionWindow {
                cw_min: a.cw_min,
                cw_max: a.cw_max,
            });
        }
        if let Some(g) = self.aggregation {
            if g.max_mpdus == 0 || g.max_mpdus > MAX_AMPDU_MPDUS {
                return Err(WifiSpecError::AggregationMpdus(g.max_mpdus));
            }
            if g.max_bytes > MAX_AMPDU_BYTES || (g.max_bytes as usize) < mpdu_bytes(0) {
                return Err(WifiSpecError::AggregationBytes(g.max_bytes));
            }
            if g.max_ppdu.is_zero() || g.max_ppdu > MAX_HT_PPDU {
                return Err(WifiSpecError::AggregationPpdu(g.max_ppdu));
            }
        }
        if let LossSpec::Bernoulli { p } = self.mpdu_error
            && !(0.0..1.0).contains(&p)
        {
            return Err(WifiSpecError::MpduError(p));
        }
        Ok(())
    }

    /// AIFS = SIFS + AIFSN x slot.
    pub fn aifs_ns(&self) -> u64 {
        let b = self.channel.band;
        b.sifs_ns() + u64::from(self.access.aifsn) * b.slot_ns()
    }

    /// Air time of the PPDU carrying a PSDU of `psdu_bytes`.
    pub fn ppdu_ns(&self, psdu_bytes: usize) -> u64 {
        self.phy.ppdu_ns(psdu_bytes, self.channel.band)
    }

    /// Air time of the response: Block ACK with aggregation, ACK without.
    pub fn response_ns(&self) -> u64 {
        let bytes = if self.aggregation.is_some() {
            BLOCK_ACK_BYTES
        } else {
            ACK_BYTES
        };
        self.channel.control_rate.ppdu_ns(bytes, self.channel.band)
    }

    /// How long a sender waits after its PPDU for a response that does not come:
    /// SIFS + slot + PHY-RX-START delay (9.3.2.8). Every station resumes contention after it
    /// (EIFS is not modelled).
    pub fn response_timeout_ns(&self) -> u64 {
        let b = self.channel.band;
        b.sifs_ns() + b.slot_ns() + RX_START_DELAY_NS
    }
}
