//! The data sender's half of draft-ietf-quic-ack-frequency: a policy decides what to ask of a
//! peer that advertised min_ack_delay; this module numbers the ACK_FREQUENCY requests, sends
//! the latest again when it is lost, tracks which max_ack_delay the peer uses (the PTO needs
//! the largest one it may be using, §7) and queues IMMEDIATE_ACK frames.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::ack::AckParams;
use crate::time::Instant;

/// What a data sender asks its peer about acknowledging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum AckFrequencyPolicy {
    /// Never send ACK_FREQUENCY or IMMEDIATE_ACK: the peer acknowledges as RFC 9000 says.
    #[default]
    None,
    /// Paper 001's ACK decimation ("Bursty QUIC"): after the first 100 packets, one ACK per
    /// 10 packets or after min(25 ms, min_rtt / 4).
    Bquic,
    /// Ours: every other packet in slow start; past it, an ACK per eighth of the window or per
    /// quarter of the smoothed RTT, whichever comes first, a reordering threshold
    /// equal to the loss-detection packet threshold, and IMMEDIATE_ACK when feedback cannot
    /// wait (a PTO probe, the first packet after a loss, the last packet before the sender
    /// runs out of data).
    Adaptive,
}

impl AckFrequencyPolicy {
    pub const ALL: [AckFrequencyPolicy; 3] = [
        AckFrequencyPolicy::None,
        AckFrequencyPolicy::Bquic,
        AckFrequencyPolicy::Adaptive,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AckFrequencyPolicy::None => "none",
            AckFrequencyPolicy::Bquic => "bquic",
            AckFrequencyPolicy::Adaptive => "adaptive",
        }
    }
}

impl fmt::Display for AckFrequencyPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Unknown ACK frequency policy name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseAckFrequencyPolicyError(pub String);

impl fmt::Display for ParseAckFrequencyPolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown ACK frequency policy {:?}: expected one of none, bquic, adaptive",
            self.0
        )
    }
}

impl std::error::Error for ParseAckFrequencyPolicyError {}

impl FromStr for AckFrequencyPolicy {
    type Err = ParseAckFrequencyPolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" | "off" => Ok(AckFrequencyPolicy::None),
            "bquic" => Ok(AckFrequencyPolicy::Bquic),
            "adaptive" => Ok(AckFrequencyPolicy::Adaptive),
            _ => Err(ParseAckFrequencyPolicyError(s.to_string())),
        }
    }
}

/// Paper 001: decimation starts after this many packets.
const BQUIC_AFTER_PACKETS: u64 = 100;
/// Paper 001: one ACK per this many packets.
const BQUIC_PACKETS_PER_ACK: u64 = 10;
/// Paper 001: and at most this long.
const BQUIC_MAX_DELAY: Duration = Duration::from_millis(25);
/// The adaptive policy never lets more packets than this go unacknowledged (an 802.11n
/// A-MPDU holds 64 MPDUs; more buys nothing and delays the sender's feedback).
const ADAPTIVE_MAX_THRESHOLD: u64 = 63;
/// The adaptive policy lets an eighth of the window go unacknowledged. While the window
/// limits the sender, a packet waits at the receiver for half the threshold's packets on
/// average, which lengthens the ACK clock by threshold / (2 x window) of an RTT: a quarter of
/// the window cost 2 % of throughput at 1 % loss on the `wlan` preset, an eighth costs none.
const ADAPTIVE_WINDOW_FRACTION: u64 = 8;
/// Requests are frames in flight; beyond this many unacknowledged ones, wait.
const MAX_IN_FLIGHT: usize = 4;

/// What the policy looks at, taken from the connection when it is consulted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PolicyInputs {
    pub now: Instant,
    pub smoothed_rtt: Duration,
    pub min_rtt: Duration,
    pub cwnd: u64,
    pub max_datagram_size: u64,
    pub in_slow_start: bool,
    /// Data-space packets sent so far.
    pub packets_sent: u64,
    /// The loss-detection packet threshold (RFC 9002 kPacketThreshold).
    pub packet_threshold: u64,
    /// What the peer advertised: its min_ack_delay and max_ack_delay.
    pub peer_min_ack_delay: Duration,
    pub peer_max_ack_delay: Duration,
}

/// The sender's ACK frequency state.
#[derive(Debug)]
pub(crate) struct AckFrequencySender {
    policy: AckFrequencyPolicy,
    next_seq: u64,
    /// The newest request the peer acknowledged: what it uses now.
    acked: Option<(u64, AckParams)>,
    /// Requests sent and not yet acknowledged or lost.
    in_flight: Vec<(u64, AckParams)>,
    /// The newest request, waiting for room in a packet.
    to_send: Option<(u64, AckParams)>,
    /// The newest request decided, whether sent or not.
    latest: Option<(u64, AckParams)>,
    last_decision: Option<Instant>,
    /// The next 1-RTT packet carries IMMEDIATE_ACK.
    immediate_pending: bool,
}

impl AckFrequencySender {
    pub fn new(policy: AckFrequencyPolicy) -> Self {
        AckFrequencySender {
            policy,
            next_seq: 0,
            acked: None,
            in_flight: Vec::new(),
            to_send: None,
            latest: None,
            last_decision: None,
            immediate_pending: false,
        }
    }

    /// Whether this sender ever asks anything of the peer (policy other than `none`).
    pub fn is_active(&self) -> bool {
        self.policy != AckFrequencyPolicy::None
    }

    /// The request the policy wants in force now; `None` keeps the peer's defaults.
    fn decide(&self, i: &PolicyInputs) -> Option<AckParams> {
        let floor = i.peer_min_ack_delay;
        match self.policy {
            AckFrequencyPolicy::None => None,
            AckFrequencyPolicy::Bquic => {
                (i.packets_sent >= BQUIC_AFTER_PACKETS).then(|| AckParams {
                    threshold: BQUIC_PACKETS_PER_ACK - 1,
                    max_ack_delay: BQUIC_MAX_DELAY.min(i.min_rtt / 4).max(floor),
                    reordering: 1,
                })
            }
            AckFrequencyPolicy::Adaptive => {
                if i.in_slow_start {
                    // Every other packet, as without the extension: slow start grows the
                    // window per ACK. Said explicitly only after asking for something else.
                    return self.latest.map(|_| AckParams {
                        threshold: 1,
                        max_ack_delay: i.peer_max_ack_delay.max(floor),
                        reordering: 1,
                    });
                }
                let window_packets = i.cwnd / i.max_datagram_size.max(1);
                Some(AckParams {
                    threshold: (window_packets / ADAPTIVE_WINDOW_FRACTION)
                        .saturating_sub(1)
                        .clamp(1, ADAPTIVE_MAX_THRESHOLD),
                    max_ack_delay: (i.smoothed_rtt / 4).max(floor),
                    reordering: i.packet_threshold.max(1),
                })
            }
        }
    }

    /// Consults the policy (after an ACK); a request that differs enough from the last one
    /// is queued, at most one per smoothed RTT.
    pub fn update(&mut self, i: &PolicyInputs) {
        if self.in_flight.len() >= MAX_IN_FLIGHT
            || self
                .last_decision
                .is_some_and(|t| i.now.saturating_duration_since(t) < i.smoothed_rtt)
        {
            return;
        }
        let Some(want) = self.decide(i) else {
            return;
        };
        if self.latest.is_some_and(|(_, p)| close_enough(p, want)) {
            return;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.latest = Some((seq, want));
        self.to_send = Some((seq, want));
        self.last_decision = Some(i.now);
    }

    /// The request to write in the next 1-RTT packet, if any.
    pub fn pending_request(&self) -> Option<(u64, AckParams)> {
        self.to_send
    }

    pub fn on_request_sent(&mut self, seq: u64) {
        if let Some((s, p)) = self.to_send.take_if(|(s, _)| *s == seq) {
            self.in_flight.push((s, p));
        }
    }

    pub fn on_request_acked(&mut self, seq: u64) {
        let Some(at) = self.in_flight.iter().position(|(s, _)| *s == seq) else {
            return;
        };
        let (s, p) = self.in_flight.remove(at);
        if self.acked.is_none_or(|(a, _)| s > a) {
            self.acked = Some((s, p));
        }
    }

    /// A packet with request `seq` was lost: the newest request is sent again.
    pub fn on_request_lost(&mut self, seq: u64) {
        self.in_flight.retain(|(s, _)| *s != seq);
        if self.latest.is_some_and(|(s, _)| s == seq) && self.acked.is_none_or(|(a, _)| a < seq) {
            self.to_send = self.latest;
        }
    }

    /// The max_ack_delay the peer may be using: the one it acknowledged (or advertised), or a
    /// larger one still in flight (draft §7).
    pub fn peer_max_ack_delay(&self, advertised: Duration) -> Duration {
        let current = self.acked.map_or(advertised, |(_, p)| p.max_ack_delay);
        self.in_flight
            .iter()
            .map(|(_, p)| p.max_ack_delay)
            .fold(current, Duration::max)
    }

    /// Feedback cannot wait (a PTO probe, a retransmission): the next packet asks for an
    /// immediate ACK. Only the adaptive policy does this.
    pub fn want_immediate_ack(&mut self) {
        if self.policy == AckFrequencyPolicy::Adaptive {
            self.immediate_pending = true;
        }
    }

    /// The sender is about to go idle: does its last packet ask for an immediate ACK?
    pub fn immediate_ack_on_tail(&self) -> bool {
        self.policy == AckFrequencyPolicy::Adaptive
    }

    pub fn immediate_ack_pending(&self) -> bool {
        self.immediate_pending
    }

    pub fn on_immediate_ack_sent(&mut self) {
        self.immediate_pending = false;
    }
}

/// Requests within a quarter of each other are not worth a frame.
fn close_enough(a: AckParams, b: AckParams) -> bool {
    let near = |x: u128, y: u128| x.abs_diff(y) * 4 <= x.max(y);
    a.reordering == b.reordering
        && near(u128::from(a.threshold), u128::from(b.threshold))
        && near(a.max_ack_delay.as_micros(), b.max_ack_delay.as_micros())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(now_ms: u64, cwnd_packets: u64, slow_start: bool, sent: u64) -> PolicyInputs {
        PolicyInputs {
            now: Instant::from_nanos(now_ms * 1_000_000),
            smoothed_rtt: Duration::from_millis(40),
            min_rtt: Duration::from_millis(20),
            cwnd: cwnd_packets * 1200,
            max_datagram_size: 1200,
            in_slow_start: slow_start,
            packets_sent: sent,
            packet_threshold: 3,
            peer_min_ack_delay: Duration::from_millis(1),
            peer_max_ack_delay: Duration::from_millis(25),
        }
    }

    #[test]
    fn bquic_decimates_after_100_packets() {
        let mut s = AckFrequencySender::new(AckFrequencyPolicy::Bquic);
        s.update(&inputs(0, 10, true, 99));
        assert!(s.pending_request().is_none());
        s.update(&inputs(0, 10, true, 100));
        let (seq, p) = s.pending_request().unwrap();
        assert_eq!(seq, 0);
        assert_eq!(p.threshold, 9);
        assert_eq!(p.max_ack_delay, Duration::from_millis(5), "min_rtt / 4");
        assert_eq!(p.reordering, 1);
    }

    #[test]
    fn adaptive_asks_for_an_eighth_of_the_window_past_slow_start_only() {
        let mut s = AckFrequencySender::new(AckFrequencyPolicy::Adaptive);
        s.update(&inputs(0, 100, true, 500));
        assert!(s.pending_request().is_none(), "slow start keeps defaults");
        s.update(&inputs(0, 100, false, 500));
        let (_, p) = s.pending_request().unwrap();
        assert_eq!(
            (p.threshold, p.max_ack_delay, p.reordering),
            (11, Duration::from_millis(10), 3)
        );
        s.on_request_sent(0);
        // Within one RTT nothing new; a small change is not worth a frame.
        s.update(&inputs(10, 20, false, 600));
        assert!(s.pending_request().is_none());
        s.update(&inputs(100, 105, false, 600));
        assert!(s.pending_request().is_none());
        // Back in slow start (persistent congestion): defaults again.
        s.update(&inputs(200, 4, true, 700));
        let (seq, p) = s.pending_request().unwrap();
        assert_eq!((seq, p.threshold, p.reordering), (1, 1, 1));
    }

    #[test]
    fn lost_request_is_sent_again_unless_superseded_and_pto_uses_the_largest_delay() {
        let mut s = AckFrequencySender::new(AckFrequencyPolicy::Adaptive);
        let adv = Duration::from_millis(25);
        s.update(&inputs(0, 100, false, 500));
        s.on_request_sent(0);
        assert_eq!(s.peer_max_ack_delay(adv), adv, "25 ms still possible");
        s.on_request_lost(0);
        assert_eq!(s.pending_request().map(|r| r.0), Some(0));
        s.on_request_sent(0);
        s.on_request_acked(0);
        assert_eq!(s.peer_max_ack_delay(adv), Duration::from_millis(10));
        // A newer request in flight with a larger delay counts until acknowledged.
        let mut i = inputs(500, 100, false, 600);
        i.smoothed_rtt = Duration::from_millis(400);
        s.update(&i);
        s.on_request_sent(1);
        assert_eq!(s.peer_max_ack_delay(adv), Duration::from_millis(100));
        // An older request lost after a newer one was decided is not sent again.
        s.on_request_lost(0);
        assert!(s.pending_request().is_none());
    }

    #[test]
    fn names_round_trip() {
        for p in AckFrequencyPolicy::ALL {
            assert_eq!(p.as_str().parse::<AckFrequencyPolicy>().unwrap(), p);
        }
        let e = "fast"
            .parse::<AckFrequencyPolicy>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("none, bquic, adaptive"), "{e}");
    }
}
