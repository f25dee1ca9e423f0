//! `adaptive`: repair only where this connection's losses make it pay.
//!
//! Fixed redundancy costs its full rate on every path, and on a lossless or slow path that
//! cost is all there is (paper 003, Fig. 8). This controller starts with no repair and adds
//! it as losses show up, using only what the sender sees.
//!
//! **Loss estimate.** Before each packet it could protect, the controller reads the sender's
//! counters: packets sent, packets declared lost (less those that arrived after all), and
//! packets the peer recovered before loss detection fired (lost on the wire all the same).
//! A loss seen while the path shows a standing queue (the core's rule,
//! `qfec_proto::recovery::rtt::standing_queue`: the latest RTT a quarter of the way from the
//! minimum RTT to the largest RTT seen, and at least an eighth of the minimum above it, a
//! wider noise margin than congestion control's 1/32: a channel loss taken for a queue's
//! only costs repair, not fairness) is taken for a congestion drop and does not count as
//! channel loss: FEC cannot beat a full queue, and congestion control must see those losses
//! anyway. The channel loss rate is the rest over all packets, after a prior worth 50
//! packets at the prior loss rate ([`AdaptiveConfig::prior_loss`], 2 % unless set: one loss
//! in the prior's 50 packets), with a memory of a few thousand packets. Handshake losses
//! count.
//!
//! **A path the endpoint knows.** When the endpoint remembers the path to the peer's
//! address (earlier connections' losses, `qfec_proto::path_memory`; a server also learns it
//! from the client's NEW_TOKEN token), its packets join the prior as if seen before this
//! connection (500 at most): a dozen clean packets leave the prior near 2 %, a path
//! remembered clean over hundreds of packets gets no code at all. It stays a prior: only a
//! channel loss of the connection's own brings repair within the flow or lifts the tail
//! repair's cap by the window's room (remembered losses may have been a queue's, and on a
//! slow path repair within a short flow costs more than it saves). A prior of 0 stays 0.
//!
//! **A short flow is protected from its first packet.** Until the connection has measured
//! its path, the prior speaks: the code is on from the first 1-RTT packet, so that the tail
//! of a flow of a few packets, which loss detection could only repair after a probe timeout,
//! gets repair right after its last data packet. Only the flight that ends the data joins
//! the code (what the application has left to send fits in the congestion window), so the
//! packets before it keep their full size (a source symbol must fit a REPAIR frame, which
//! costs about 1.5 % of each packet). The same holds whenever repair goes to the tail only
//! (no repair within the flow, below), except that a flow on a path with channel loss is
//! protected whole for its first 64 packets (the tail repair's window spans all of it,
//! losses of the flight before the last included). The tail repair is sized from the
//! estimate (as below) and, while only the prior speaks, never exceeds what the congestion
//! window still allows, so it goes out in the same round trip and delays no data. After about 150 loss-free packets the estimate falls below
//! 0.5 %, the rate below which no repair is sent within a flow, and the code is dropped: a
//! long flow on a clean path is then plain QUIC, byte for byte, after its handshake. A
//! congestion drop ends the prior's say as well (the path is congested, not lossy). The first channel loss brings the
//! code back for good.
//!
//! **The first flight of a short flow** (at most 64 packets of data, more than the window
//! lets out now) joins the code too, and its last place in the window goes to a repair. A
//! loss in it is declared at the flight's first acknowledgments, when the window is still
//! near its initial size, and ends slow start: on paper 003's MSS link (761 ms RTT) a 50 kB
//! download then takes a fourth round trip. With the repair the peer recovers the loss as
//! the flight arrives, and in `mask` and `differentiate` modes (only: in `signal` mode the
//! reduction stands) the reduction is undone
//! (`qfec_proto::recovery::rtt::RttEstimator::standing_queue`: the flight's own queue at a
//! slow link is no standing queue). Longer flows keep their first flight unprotected: their
//! slow start overshoots a one-BDP queue on fast paths, and which packets that drops turns on
//! the one packet the repair moves (see `SHORT_FLOW_PACKETS`).
//!
//! **The handshake.** Before any 1-RTT packet, a lost ClientHello or server flight waits for
//! a probe timeout of a connection that has no RTT sample: a second (3 x 333 ms), more than
//! the whole of a short download on most paths. So the prior also sizes copies of each
//! endpoint's first flight ([`handshake_copies`]; the connection sends them
//! `HANDSHAKE_COPY_GAP` after the flight, within congestion control and the
//! anti-amplification limit, and stops once the peer acknowledges anything): the fewest (at
//! most 2) that leave less than a 1 % chance that a packet of the flight is lost with all
//! its copies, none on a path remembered clean. At the 2 % prior that is one copy. A server
//! copies only for a client that enabled FEC.
//!
//! **Where repair pays.** A repair symbol costs a packet's worth of sending; a loss it
//! repairs saves the retransmission, the wait for loss detection (an RTT at least, a probe
//! timeout at the tail) and, in `mask` mode, the congestion-window cut.
//! - *The tail.* When the application runs out of data, the packets still in flight can only
//!   be repaired by retransmission after a timeout. Repair sent after the last data packet
//!   delays no data, so it only costs bytes, as long as it does not share a link-layer
//!   aggregate with the data (an 802.11 A-MPDU is delivered whole, so two repairs in it
//!   delayed a 10 kB file on `wlan-n` by 2 %): it waits an eighth of the minimum RTT, at most
//!   5 ms, unless what it covers has a deadline. The tail gets the fewest repairs m (0 to 3) that
//!   leave less than a 1 % chance of more than m losses among the in-flight packets and the
//!   repairs. Before the connection saw a channel loss of its own, m is capped by the room
//!   left in the congestion window (the prior alone does not hold data back). m is 0 while
//!   the smoothed RTT shows a standing queue (the repair would queue behind the data, or be
//!   dropped with it).
//! - *After a message with a deadline* (real-time DATAGRAMs). Nothing but repair arrives in
//!   time, so the code stays on for the rest of the connection once such data is seen, and
//!   the repair after each message is sized on a two-state channel (a good state, a bad
//!   state that loses every packet) fitted to the loss rate, the path's mean loss burst and
//!   the share of its losses that came alone beyond what its longer runs explain
//!   ([`qfec_proto::recovery::LossEstimate::isolated`]; the good state loses those): the
//!   fewest m (at most 16) that leave less than 0.1 % chance of more than m losses among the
//!   message's packets and the m repairs after them, which bursts would take together. The
//!   burst length starts from a prior of 2 packets worth 3 bursts. Under congestion control
//!   m stays within what the window lets out now (at least one), so repair never delays the
//!   next message. An 8-packet message gets 2 repairs at 1 % independent loss, 6 when the
//!   losses come in bursts of 2 packets, 16 (the most) in bursts of 8; at 4.6 % loss with a
//!   mean run of 1.37 packets, 6 if no loss is isolated, more than 8 if 55 % are.
//! - *Within the flow.* In `mask` mode a recovered loss costs neither a retransmission nor a
//!   window cut, which is worth more than the repair: one repair per 1 / (3 p) source symbols
//!   over a window of three intervals (so that two losses close together are still
//!   repaired), when the loss rate p is at least 0.5 % and the connection saw a channel loss
//!   (the prior alone adds no repair at the code's cadence, only the first flight's, above).
//!   The same in `differentiate` mode, where a loss recovered without a standing queue is
//!   masked. In `signal` mode a recovered loss still halves the window, so repair inside a
//!   long flow only adds bytes: none is sent.
//!
//! The code is RLC over GF(2^8): it repairs any loss pattern its window allows, and its
//! repairs interleave with the data, so recovery comes after a few packets, before packet-
//! threshold loss detection would fire for the same loss. A change of interval takes effect
//! at most once per RTT.

use std::time::Duration;

use qfec_erasure::{Field, Scheme};
use qfec_proto::recovery::rtt::standing_queue;
use qfec_proto::{Instant, PathStats, RecoveredLossMode};

use super::{RedundancyController, RedundancyCx, fit_to_window};

/// Packets the prior is worth.
const PRIOR_PACKETS: f64 = 50.0;
/// Packets of a remembered estimate counted at most: the connection's own losses soon speak.
const REMEMBERED_MAX_PACKETS: f64 = 500.0;
/// Estimated loss rate below which, with no channel loss seen, the code is dropped.
const CODE_MIN_LOSS: f64 = MID_FLOW_MIN_LOSS;
/// Packets remembered: beyond, old counts are halved.
const MEMORY_PACKETS: f64 = 4000.0;
/// Loss rate below which no repair is sent within a flow.
const MID_FLOW_MIN_LOSS: f64 = 0.005;
/// Repair symbols per expected loss within a flow.
const MID_FLOW_REPAIRS_PER_LOSS: f64 = 3.0;
/// Largest tail repair.
const MAX_TAIL_REPAIRS: u32 = 3;
/// Mean loss burst (packets) assumed before the path has shown its own.
const PRIOR_BURST: f64 = 2.0;
/// Loss bursts the burst-length prior is worth.
const PRIOR_BURSTS: f64 = 3.0;
/// Largest repair after a message with a deadline.
const MAX_DEADLINE_REPAIRS: u32 = 16;
/// Chance of an unrepairable message the repair after it aims below.
const DEADLINE_TARGET: f64 = 1e-3;
/// Chance of an unrepaired tail the tail repair aims below.
const TAIL_TARGET: f64 = 0.01;
/// The tail repair waits this fraction of the minimum RTT (at most `TAIL_GAP_MAX`) after
/// the last data packet, so that it does not ride in the same link-layer aggregate.
const TAIL_GAP_RTT_DIVISOR: u32 = 8;
/// Longest wait of the tail repair: an 802.11n PPDU's longest airtime (aPPDUMaxTime, 10 ms)
/// halved.
const TAIL_GAP_MAX: Duration = Duration::from_millis(5);
/// Interval meaning "no repair at the code's own cadence".
const NO_CADENCE: u16 = u16::MAX;
/// Longest flow (packets of data) whose first flight ends with a repair.
const SHORT_FLOW_PACKETS: u64 = 64;
/// Repairs that end a first flight the flow goes on past. One: at the 2 % prior a flight of
/// ten loses two packets or more in 1.6 % of flows, and on a slow link each repair delays
/// the rest of the flow by a packet's time (a second one made DA2GC's 50 kB downloads slower
/// on average than plain QUIC's).
const FIRST_FLIGHT_REPAIRS: u64 = 1;

/// Settings of [`Adaptive`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdaptiveConfig {
    /// Loss rate assumed before the connection has measured its own, in parts per 10,000
    /// (`adaptive(prior=2%)`). 0: no repair at all until the first channel loss.
    pub prior_loss: u16,
}

impl AdaptiveConfig {
    /// The default prior: 2 %, one loss in the prior's 50 packets.
    pub const DEFAULT_PRIOR_LOSS: u16 = 200;

    /// The prior as a fraction.
    pub fn prior(&self) -> f64 {
        f64::from(self.prior_loss) / 10_000.0
    }
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig {
            prior_loss: Self::DEFAULT_PRIOR_LOSS,
        }
    }
}

/// Channel loss seen by the sender: losses not explained by a queue, over all packets, after
/// a prior of `PRIOR_PACKETS` packets at loss rate `prior`.
#[derive(Debug, Clone)]
pub(crate) struct LossEstimate {
    delivered: f64,
    channel_lost: f64,
    congestion_lost: f64,
    prior: f64,
    /// Packets the prior is worth.
    prior_packets: f64,
}

/// No prior loss (a prior of 0 worth the usual packets).
impl Default for LossEstimate {
    fn default() -> Self {
        LossEstimate::with_prior(0.0)
    }
}

impl LossEstimate {
    pub fn with_prior(prior: f64) -> LossEstimate {
        LossEstimate {
            delivered: 0.0,
            channel_lost: 0.0,
            congestion_lost: 0.0,
            prior,
            prior_packets: PRIOR_PACKETS,
        }
    }

    /// Adds what the endpoint remembers of the path (earlier connections' losses) to the
    /// prior, as packets seen before this connection: a few clean packets do not prove a
    /// path clean, a long history outweighs the prior (at most `REMEMBERED_MAX_PACKETS`
    /// count). A prior of 0 stays 0: it asks for no repair before a loss of the
    /// connection's own.
    pub fn remember(&mut self, loss: qfec_proto::recovery::LossEstimate) {
        if self.prior <= 0.0
            || loss.samples.is_nan()
            || loss.samples <= 0.0
            || !loss.rate.is_finite()
        {
            return;
        }
        let samples = loss.samples.min(REMEMBERED_MAX_PACKETS);
        let lost = loss.rate.clamp(0.0, 1.0) * samples;
        self.prior = (self.prior * self.prior_packets + lost) / (self.prior_packets + samples);
        self.prior_packets += samples;
    }

    pub fn delivered(&mut self, n: f64) {
        self.delivered += n;
        self.forget();
    }

    pub fn lost(&mut self, n: f64, congestion: bool) {
        if congestion {
            self.congestion_lost += n;
        } else {
            self.channel_lost += n;
        }
        self.forget();
    }

    fn forget(&mut self) {
        if self.delivered + self.channel_lost + self.congestion_lost > MEMORY_PACKETS {
            self.delivered /= 2.0;
            self.channel_lost /= 2.0;
            self.congestion_lost /= 2.0;
        }
    }

    /// Channel loss rate.
    pub fn rate(&self) -> f64 {
        let all = self.delivered + self.channel_lost + self.congestion_lost;
        (self.channel_lost + self.prior * self.prior_packets) / (all + self.prior_packets)
    }

    /// Whether the connection saw a channel loss of its own.
    pub fn any(&self) -> bool {
        self.channel_lost > 0.0
    }

    /// Whether repair may pay: a channel loss was seen, or the prior still speaks (no
    /// congestion drop seen either: a path that only drops at a full queue needs no repair,
    /// and protected packets, a little smaller, would split the retransmissions).
    pub fn protect(&self) -> bool {
        self.any()
            || (self.prior > 0.0 && self.congestion_lost == 0.0 && self.rate() >= CODE_MIN_LOSS)
    }
}

/// Whether a loss now is a queue's: the core's [`standing_queue`] with an eighth of the
/// minimum RTT as noise margin.
pub(crate) fn queue_drop(latest: Duration, min: Duration, max: Duration) -> bool {
    standing_queue(latest, min, max, min / 8)
}

/// Source symbols per repair within a flow at loss rate `p` (`NO_CADENCE`: none).
pub(crate) fn mid_flow_interval(p: f64, mode: RecoveredLossMode) -> u16 {
    if !mode.may_mask() || p < MID_FLOW_MIN_LOSS {
        return NO_CADENCE;
    }
    (1.0 / (MID_FLOW_REPAIRS_PER_LOSS * p))
        .round()
        .clamp(2.0, 64.0) as u16
}

/// RLC window for an interval: three intervals, 8 to 64 symbols.
fn window_for(interval: u16) -> u16 {
    if interval == NO_CADENCE {
        64
    } else {
        (3 * interval).clamp(8, 64)
    }
}

/// P(X > m) for X ~ Binomial(n, p).
fn binomial_tail(n: u64, p: f64, m: u64) -> f64 {
    let mut term = (1.0 - p).powi(n as i32); // P(X = 0)
    let mut cdf = term;
    for k in 0..m.min(n) {
        term *= (n - k) as f64 / (k + 1) as f64 * p / (1.0 - p);
        cdf += term;
    }
    (1.0 - cdf).max(0.0)
}

/// Repairs for a tail of `in_flight` packets at loss rate `p` (none unless `protect`).
pub(crate) fn tail_repairs(in_flight: u64, p: f64, protect: bool) -> u32 {
    if !protect || in_flight == 0 || p <= 0.0 {
        return 0;
    }
    for m in 1..=MAX_TAIL_REPAIRS {
        if binomial_tail(in_flight + u64::from(m), p, u64::from(m)) < TAIL_TARGET {
            return m;
        }
    }
    MAX_TAIL_REPAIRS
}

/// Copies of an endpoint's first handshake flight of `packets` packets (see
/// [`Redundancy::handshake_copies`](super::Redundancy::handshake_copies)): the fewest, at most
/// `max`, that leave less than `TAIL_TARGET` chance that some packet of the flight is lost
/// with all its copies, at the loss rate the prior and the endpoint's memory of the path give
/// (none below `CODE_MIN_LOSS`: a path remembered clean gets none).
pub(crate) fn handshake_copies(
    config: &AdaptiveConfig,
    remembered: Option<qfec_proto::recovery::LossEstimate>,
    packets: u64,
    max: u8,
) -> u8 {
    let mut loss = LossEstimate::with_prior(config.prior());
    if let Some(l) = remembered {
        loss.remember(l);
    }
    let p = loss.rate();
    if packets == 0 || p < CODE_MIN_LOSS {
        return 0;
    }
    // P(some packet lost with its m copies) = 1 - (1 - p^(m+1))^packets.
    let fails = |m: u8| 1.0 - (1.0 - p.powi(i32::from(m) + 1)).powi(packets.min(64) as i32);
    (0..=max).find(|&m| fails(m) < TAIL_TARGET).unwrap_or(max)
}

/// P(more than `m` of `n` consecutive packets lost), from its stationary state, on a channel
/// whose bursts make `bursty` of the packets lost, in runs of `burst` on average, and whose
/// packets outside them are lost on their own with probability `single` (a Gilbert-Elliott
/// channel with h = 0 and k = 1 - `single`; with `single` 0 the Gilbert channel).
fn mixed_tail(n: usize, bursty: f64, burst: f64, single: f64, m: usize) -> f64 {
    if n <= m {
        return 0.0;
    }
    let rate = bursty.clamp(0.0, 0.999);
    let e = single.clamp(0.0, 0.999);
    let r = 1.0 / burst.max(1.0);
    let q = (rate * r / (1.0 - rate)).min(1.0);
    // Probability of k losses so far, ending in the good and in the bad state.
    let (mut g, mut b) = (vec![0.0; n + 1], vec![0.0; n + 1]);
    g[0] = (1.0 - rate) * (1.0 - e);
    g[1] = (1.0 - rate) * e;
    b[1] = rate;
    for i in 1..n {
        for k in (0..=i).rev() {
            let (gk, bk) = (g[k], b[k]);
            // Into the good state (from either), lost there with probability e.
            let good = gk * (1.0 - q) + bk * r;
            g[k] = good * (1.0 - e);
            g[k + 1] += good * e;
            b[k + 1] += gk * q + bk * (1.0 - r);
            b[k] -= bk;
        }
    }
    (m + 1..=n)
        .map(|k| g[k] + b[k])
        .sum::<f64>()
        .clamp(0.0, 1.0)
}

/// Repair symbols after a message of `n` packets with a deadline: the fewest m that leave
/// less than `DEADLINE_TARGET` chance of more than m losses among its packets and the repairs
/// that follow them, on the channel of the measured loss rate and mean loss run `burst`, of
/// whose losses `isolated` came alone beside the bursts
/// ([`qfec_proto::recovery::LossEstimate::isolated`]): bursts then make the other losses, in
/// runs longer than the mean of all runs, and the good state loses too.
fn deadline_repairs(n: u64, rate: f64, burst: f64, isolated: f64) -> u32 {
    if n == 0 || rate <= 0.0 {
        return 0;
    }
    let rate = rate.min(0.999);
    let isolated = isolated.clamp(0.0, 1.0);
    let single = rate * isolated;
    let bursty = rate - single;
    // Runs per packet: every isolated loss is one, the bursts make the rest.
    let bursty_runs = (rate / burst.max(1.0) - single).max(1e-9);
    let bursty_mean = (bursty / bursty_runs).max(1.0);
    // Per packet outside the bursts.
    let e = single / (1.0 - bursty);
    (1..=MAX_DEADLINE_REPAIRS)
        .find(|&m| {
            let n = n as usize + m as usize;
            mixed_tail(n, bursty, bursty_mean, e, m as usize) < DEADLINE_TARGET
        })
        .unwrap_or(MAX_DEADLINE_REPAIRS)
}

/// The path's mean loss burst, after a prior of `PRIOR_BURSTS` bursts of `PRIOR_BURST`
/// packets: a connection that has seen few losses does not take them for single ones.
fn burst_with_prior(loss: qfec_proto::recovery::LossEstimate) -> f64 {
    let lost = loss.rate * loss.samples;
    let bursts = lost / loss.mean_burst.max(1.0);
    (lost + PRIOR_BURST * PRIOR_BURSTS) / (bursts + PRIOR_BURSTS)
}

/// The sender's counters when last read.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    sent: u64,
    /// Declared lost and not found spurious, plus recovered by the peer in time.
    lost: u64,
}

/// Our controller; see the module docs.
#[derive(Debug, Clone)]
pub struct Adaptive {
    loss: LossEstimate,
    seen: Counters,
    /// Interval of the code in use.
    interval: Option<u16>,
    /// Interval to use when the code is next built.
    wanted: u16,
    last_change: Option<Instant>,
    /// Protected data with deadlines was seen (real-time DATAGRAMs).
    deadlines: bool,
    /// The endpoint's memory of the path was read (at the first look at the connection).
    primed: bool,
}

impl Adaptive {
    pub fn new(config: AdaptiveConfig) -> Adaptive {
        Adaptive {
            loss: LossEstimate::with_prior(config.prior()),
            seen: Counters::default(),
            interval: None,
            wanted: NO_CADENCE,
            last_change: None,
            deadlines: false,
            primed: false,
        }
    }

    /// The channel loss rate estimated so far.
    pub fn loss_rate(&self) -> f64 {
        self.loss.rate()
    }

    /// Counts what happened since the counters were last read.
    fn observe(&mut self, cx: &RedundancyCx<'_, '_>) {
        if !self.primed {
            self.primed = true;
            // What earlier connections on this path measured joins the configured prior.
            if let Some(l) = cx.remembered_loss() {
                self.loss.remember(l);
            }
        }
        let s = cx.stats();
        let p = cx.path();
        let now = Counters {
            sent: s.packets_sent,
            lost: s.packets_lost.saturating_sub(s.spurious_losses) + s.packets_recovered_by_peer,
        };
        let lost = now.lost.saturating_sub(self.seen.lost);
        let sent = now.sent.saturating_sub(self.seen.sent);
        if lost > 0 {
            let queue = queue_drop(p.latest_rtt, p.min_rtt, p.max_rtt);
            self.loss.lost(lost as f64, queue);
        }
        self.loss.delivered(sent.saturating_sub(lost) as f64);
        self.seen = Counters {
            sent: now.sent,
            lost: now.lost.max(self.seen.lost),
        };
    }

    /// Whether a code is wanted: for data with deadlines always (nothing else repairs it in
    /// time), else while the loss estimate says so.
    fn protects(&self) -> bool {
        self.deadlines || self.loss.protect()
    }

    /// Whether the packet being sent belongs to the first flight of a short flow that goes
    /// on past it: no 1-RTT packet of the path acknowledged or lost yet, the prior (or a
    /// loss) asking for repair, no deadline, recoveries that may be masked (the repair pays
    /// by undoing the reduction the loss brought: in `signal` mode it stands, and the
    /// repair only took a data packet's place), more data than the window's room, and no
    /// more than `SHORT_FLOW_PACKETS` (a longer flow's slow start overshoots a one-BDP queue on
    /// fast paths, and which packets that drops, the file's last or not, turns on the one
    /// packet the repair moves: on WLAN without loss, 300 and 350 kB downloads took 2.7 and
    /// 4.9 % longer with it, 400 kB 1.8 % less).
    fn first_flight(&self, cx: &RedundancyCx<'_, '_>) -> Option<PathStats> {
        // Cheap tests first: this is asked twice for every packet, and after the first
        // flight the path's loss estimate alone answers.
        if self.deadlines
            || !cx.mode.may_mask()
            || !self.loss.protect()
            || cx.path_loss().samples > 0.0
        {
            return None;
        }
        let path = cx.path();
        let pending = cx.app_pending_bytes();
        (pending > path.cwnd.saturating_sub(path.bytes_in_flight)
            && pending.div_ceil(cx.packet_size().max(1)) <= SHORT_FLOW_PACKETS)
            .then_some(path)
    }

    /// The interval of the code wanted now; `None`: no code. Repair at the code's cadence
    /// needs a channel loss of the connection's own, not the prior alone.
    fn want(&self, mode: RecoveredLossMode) -> Option<u16> {
        if !self.protects() {
            None
        } else if self.loss.any() {
            Some(mid_flow_interval(self.loss.rate(), mode))
        } else {
            Some(NO_CADENCE)
        }
    }
}

impl RedundancyController for Adaptive {
    fn name(&self) -> &'static str {
        "adaptive"
    }

    fn scheme(&mut self, max_span: u64) -> Option<Scheme> {
        if !self.protects() {
            self.interval = None;
            return None;
        }
        let s = fit_to_window(
            Scheme::Rlc {
                window: window_for(self.wanted),
                density: 15,
                field: Field::Gf256,
                interval: self.wanted,
                repairs: 1,
            },
            max_span,
        );
        self.interval = s.map(|_| self.wanted);
        s
    }

    fn rescheme(&mut self, cx: &RedundancyCx<'_, '_>) -> bool {
        self.observe(cx);
        let now = cx.now();
        if self
            .last_change
            .is_some_and(|t| now.saturating_duration_since(t) < cx.path().rtt)
        {
            return false;
        }
        let want = self.want(cx.mode);
        let changed = match (self.interval, want) {
            (None, None) => false,
            (None, Some(_)) | (Some(_), None) => true,
            // Only changes of a quarter or more are worth a new code.
            (Some(cur), Some(want)) => match (cur == NO_CADENCE, want == NO_CADENCE) {
                (true, true) => false,
                (true, false) | (false, true) => true,
                (false, false) => cur.abs_diff(want) * 4 >= cur,
            },
        };
        if changed {
            if let Some(w) = want {
                self.wanted = w;
            }
            self.last_change = Some(now);
        }
        changed
    }

    fn protect_packet(&mut self, cx: &RedundancyCx<'_, '_>) -> bool {
        if self.interval.is_some_and(|i| i != NO_CADENCE) {
            // Repair within the flow covers every packet.
            return true;
        }
        if self.first_flight(cx).is_some() {
            // Its last packet is a repair (`protect_now`).
            return true;
        }
        if self.loss.any() && cx.stats().packets_sent < u64::from(window_for(NO_CADENCE)) {
            // A short flow on a lossy path is protected whole: a tail repair's window spans
            // all of it, including losses of the flight before the last not yet detected.
            return true;
        }
        // Only the tail gets repair: protect the flight that ends the data the application
        // has now (what is left fits in the window), not the packets before it, which are
        // acknowledged or retransmitted before any tail repair is sent.
        let path = cx.path();
        cx.app_pending_bytes() <= path.cwnd.saturating_sub(path.bytes_in_flight)
    }

    fn protect_now(&mut self, cx: &RedundancyCx<'_, '_>) -> u32 {
        // The first flight's last places in the window go to repair. The packet just built
        // is not in flight yet.
        let Some(path) = self.first_flight(cx) else {
            return 0;
        };
        let size = path.mtu.max(1) as u64;
        let room = path.cwnd.saturating_sub(path.bytes_in_flight + size) / size;
        if room == FIRST_FLIGHT_REPAIRS {
            FIRST_FLIGHT_REPAIRS as u32
        } else {
            0
        }
    }

    fn protect_tail(&mut self, cx: &RedundancyCx<'_, '_>) -> u32 {
        self.observe(cx);
        let path = cx.path();
        if queue_drop(path.rtt, path.min_rtt, path.max_rtt) {
            // A standing queue (the smoothed RTT: a latest sample may carry the peer's ACK
            // delay): a repair would wait behind the retransmissions it races, or be dropped
            // by the same full queue.
            return 0;
        }
        if cx.deadline.is_some() {
            // Real-time data: no retransmission will come in time, so the repair right after
            // the message is all it gets. The code stays for the rest of the connection.
            self.deadlines = true;
            let burst = burst_with_prior(path.loss);
            let n = cx.unprotected.clamp(1, 64);
            let m = deadline_repairs(n, self.loss.rate(), burst, path.loss.isolated);
            // Within what the congestion window lets out now: a repair held back would
            // delay the next message.
            let room = path.cwnd.saturating_sub(path.bytes_in_flight) / cx.packet_size().max(1);
            return m.min(u32::try_from(room).unwrap_or(u32::MAX)).max(1);
        }
        let size = cx.packet_size().max(1);
        let in_flight = path.bytes_in_flight.div_ceil(size) + 1;
        let n = in_flight.min(u64::from(window_for(self.interval.unwrap_or(NO_CADENCE))));
        let m = tail_repairs(n, self.loss.rate(), self.loss.protect());
        if self.loss.any() {
            // Measured loss: a repair the window holds back still goes out with the first
            // acknowledgements, well before the probe timeout a lost tail waits for.
            return m;
        }
        // Only the prior speaks: no more than the window lets out in this round trip.
        let room = path.cwnd.saturating_sub(path.bytes_in_flight + size) / size;
        m.min(u32::try_from(room).unwrap_or(u32::MAX))
    }

    fn tail_gap(&self, cx: &RedundancyCx<'_, '_>) -> Duration {
        (cx.path().min_rtt / TAIL_GAP_RTT_DIVISOR).min(TAIL_GAP_MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_copies_follow_the_prior_and_the_remembered_path() {
        let cfg = |prior_loss| AdaptiveConfig { prior_loss };
        let remembered = |rate, samples| qfec_proto::recovery::LossEstimate {
            rate,
            mean_burst: 1.0,
            samples,
            isolated: 0.0,
        };
        // The default 2 %: one copy of a one-packet flight (2 % > 1 %, 0.04 % < 1 %).
        assert_eq!(handshake_copies(&AdaptiveConfig::default(), None, 1, 2), 1);
        // No prior, or a prior below the code's floor: none.
        assert_eq!(handshake_copies(&cfg(0), None, 1, 2), 0);
        assert_eq!(handshake_copies(&cfg(40), None, 1, 2), 0);
        // A lossy prior asks for two, within the cap.
        assert_eq!(handshake_copies(&cfg(1500), None, 1, 2), 2);
        assert_eq!(handshake_copies(&cfg(1500), None, 1, 1), 1);
        // A path remembered clean over hundreds of packets: none.
        assert_eq!(
            handshake_copies(
                &AdaptiveConfig::default(),
                Some(remembered(0.0, 500.0)),
                1,
                2
            ),
            0
        );
        // A path remembered lossy: as its loss says.
        assert_eq!(
            handshake_copies(&cfg(0), Some(remembered(0.2, 500.0)), 4, 2),
            0,
            "a prior of 0 stays 0"
        );
        assert_eq!(
            handshake_copies(
                &AdaptiveConfig::default(),
                Some(remembered(0.2, 500.0)),
                4,
                2
            ),
            2
        );
    }

    #[test]
    fn no_loss_no_repair() {
        let mut e = LossEstimate::with_prior(0.0);
        e.delivered(10_000.0);
        assert_eq!(e.rate(), 0.0);
        assert_eq!(tail_repairs(20, e.rate(), e.any()), 0);
        assert_eq!(
            mid_flow_interval(e.rate(), RecoveredLossMode::Mask),
            NO_CADENCE
        );
    }

    #[test]
    fn a_remembered_path_joins_the_prior_as_packets_seen_before() {
        let seen = |rate: f64, samples: f64| qfec_proto::recovery::LossEstimate {
            rate,
            mean_burst: 1.0,
            samples,
            isolated: 0.0,
        };
        let prior = AdaptiveConfig::default().prior();
        // A dozen clean packets barely move the 2 % prior; one loss among them raises it.
        let mut e = LossEstimate::with_prior(prior);
        e.remember(seen(0.0, 12.0));
        assert!((e.rate() - 1.0 / 62.0).abs() < 1e-12, "{}", e.rate());
        assert!(e.protect());
        let mut e = LossEstimate::with_prior(prior);
        e.remember(seen(1.0 / 12.0, 12.0));
        assert!((e.rate() - 2.0 / 62.0).abs() < 1e-12);
        // A path seen clean over hundreds of packets needs no code; 500 count at most.
        let mut e = LossEstimate::with_prior(prior);
        e.remember(seen(0.0, 5000.0));
        assert!((e.rate() - 1.0 / 550.0).abs() < 1e-12);
        assert!(!e.protect());
        // A lossy history stays a prior: the connection's own losses are what lift it.
        let mut e = LossEstimate::with_prior(prior);
        e.remember(seen(0.06, 400.0));
        assert!((e.rate() - 25.0 / 450.0).abs() < 1e-12);
        assert!(e.protect() && !e.any());
        // Nothing behind it, or nonsense: the prior is left as it was.
        for bad in [seen(0.5, 0.0), seen(f64::NAN, 10.0), seen(0.5, f64::NAN)] {
            let mut e = LossEstimate::with_prior(prior);
            e.remember(bad);
            assert_eq!(e.rate(), prior);
        }
    }

    #[test]
    fn the_prior_speaks_until_the_connection_measured_its_path() {
        let mut e = LossEstimate::with_prior(AdaptiveConfig::default().prior());
        assert!((e.rate() - 0.02).abs() < 1e-12);
        assert!(e.protect() && !e.any());
        // The first flight of a short flow: 8 packets in flight, 2 % assumed.
        assert_eq!(tail_repairs(9, e.rate(), e.protect()), 2);
        // 150 loss-free packets bring the estimate to 0.5 %: still protected; one more, not.
        e.delivered(150.0);
        assert!(e.protect());
        e.delivered(1.0);
        assert!(!e.protect() && e.rate() < MID_FLOW_MIN_LOSS);
        // A congestion drop ends the prior's say; a channel loss of its own protects for good.
        let mut q = LossEstimate::with_prior(0.02);
        q.lost(1.0, true);
        assert!(!q.protect());
        e.lost(1.0, false);
        e.delivered(100_000.0);
        assert!(e.protect());
        // Without a prior nothing is protected before a loss.
        let none = LossEstimate::with_prior(0.0);
        assert!(!none.protect() && none.rate() == 0.0);
    }

    #[test]
    fn queue_drops_are_not_channel_loss() {
        let ms = Duration::from_millis;
        // A queue that once added 240 ms: 70 ms of it marks a congestion drop.
        assert!(queue_drop(ms(371), ms(300), ms(540)));
        assert!(!queue_drop(ms(350), ms(300), ms(540)));
        // No queue seen yet: an RTT an eighth above the minimum is noise.
        assert!(!queue_drop(ms(28), ms(25), ms(28)));
        assert!(queue_drop(ms(29), ms(25), ms(29)));
        let mut e = LossEstimate::default();
        e.delivered(950.0);
        e.lost(50.0, true);
        assert_eq!(e.rate(), 0.0);
        e.lost(50.0, false);
        assert!((e.rate() - 50.0 / 1100.0).abs() < 1e-12);
    }

    #[test]
    fn one_early_loss_is_not_a_high_rate() {
        let mut e = LossEstimate::default();
        e.delivered(7.0);
        e.lost(1.0, false);
        assert!(e.rate() < 0.02, "{}", e.rate());
    }

    #[test]
    fn the_estimate_follows_a_changed_rate() {
        let mut e = LossEstimate::default();
        for i in 0..20_000 {
            e.lost(1.0, false);
            e.delivered(if i < 10_000 { 9.0 } else { 99.0 });
        }
        assert!((e.rate() - 0.01).abs() < 0.003, "{}", e.rate());
    }

    #[test]
    fn mid_flow_repair_in_mask_mode_follows_the_loss_rate() {
        let m = RecoveredLossMode::Mask;
        assert_eq!(mid_flow_interval(0.06, m), 6);
        assert_eq!(mid_flow_interval(0.033, m), 10);
        assert_eq!(mid_flow_interval(0.01, m), 33);
        assert_eq!(mid_flow_interval(0.004, m), NO_CADENCE);
        assert_eq!(mid_flow_interval(0.3, m), 2);
        assert_eq!(
            mid_flow_interval(0.06, RecoveredLossMode::Signal),
            NO_CADENCE
        );
        assert_eq!(window_for(6), 18);
        assert_eq!(window_for(2), 8);
        assert_eq!(window_for(50), 64);
    }

    #[test]
    fn tail_repair_covers_the_likely_losses() {
        // 10 packets at 1 %: P(more than 1 of 11 lost) = 0.0052 < 1 %.
        assert_eq!(tail_repairs(10, 0.01, true), 1);
        // 20 packets at 6 %: one repair leaves 0.35, two 0.13, three 0.04: capped at 3.
        assert_eq!(tail_repairs(20, 0.06, true), 3);
        // 3 packets at 3 %: P(more than 1 of 4 lost) = 0.0052.
        assert_eq!(tail_repairs(3, 0.03, true), 1);
        assert!((binomial_tail(4, 0.5, 1) - 11.0 / 16.0).abs() < 1e-12);
        assert_eq!(binomial_tail(3, 0.2, 3), 0.0);
    }

    #[test]
    fn the_tail_is_binomial_without_bursts_and_exact_on_small_cases() {
        // Mean burst 1 / (1 - p) at rate p: each state moves to the bad one with
        // probability p, so losses are independent (a Bernoulli channel's runs).
        for (n, p, m) in [(10, 0.05, 1), (20, 0.2, 3), (9, 0.02, 2)] {
            let g = mixed_tail(n, p, 1.0 / (1.0 - p), 0.0, m);
            let b = binomial_tail(n as u64, p, m as u64);
            assert!((g - b).abs() < 1e-12, "n {n} p {p} m {m}: {g} vs {b}");
        }
        // Two packets, rate 0.1, mean burst 2 (r = 0.5, q = 1/18): both lost with
        // 0.1 * 0.5.
        assert!((mixed_tail(2, 0.1, 2.0, 0.0, 1) - 0.05).abs() < 1e-12);
        assert_eq!(mixed_tail(3, 0.5, 4.0, 0.0, 3), 0.0);
    }

    #[test]
    fn a_message_with_a_deadline_gets_more_repair_on_a_bursty_path() {
        // 8 packets at 1 % loss: independent losses need 2 repairs, bursts of 2 packets 6,
        // bursts of 8 the most there is.
        assert_eq!(deadline_repairs(8, 0.01, 1.0 / 0.99, 0.0), 2);
        assert_eq!(deadline_repairs(8, 0.01, 2.0, 0.0), 6);
        assert_eq!(deadline_repairs(8, 0.01, 8.0, 0.0), MAX_DEADLINE_REPAIRS);
        assert_eq!(deadline_repairs(8, 0.4, 40.0, 0.0), MAX_DEADLINE_REPAIRS);
        assert_eq!(deadline_repairs(0, 0.01, 2.0, 0.0), 0);
        // Before the path has shown bursts of its own, the prior's 2 packets speak; with
        // many measured single losses, the measurement does.
        let fresh = qfec_proto::recovery::LossEstimate {
            rate: 0.0,
            mean_burst: 1.0,
            samples: 0.0,
            isolated: 0.0,
        };
        assert!((burst_with_prior(fresh) - PRIOR_BURST).abs() < 1e-12);
        let measured = qfec_proto::recovery::LossEstimate {
            rate: 0.02,
            mean_burst: 1.0,
            samples: 10_000.0,
            isolated: 0.0,
        };
        assert!(burst_with_prior(measured) < 1.02);
    }

    /// Paper 002's channels whose good state loses too (k < 1): most runs are single losses,
    /// so the mean run is short, yet the bursts are long. Measured on its design point 12
    /// (p 0.0045, r 0.19, k 0.971, h 0.22): 4.6 % loss, mean run 1.37 packets, 55 % of the
    /// losses isolated. Fitted as a two-state Gilbert channel an 8-packet message gets 6
    /// repairs, with which that channel fails one message in 100 rather than 1,000; with the
    /// isolated share the bursts are seen as the longer runs they are.
    #[test]
    fn isolated_losses_beside_bursts_ask_for_more_repair() {
        let gilbert = deadline_repairs(8, 0.046, 1.37, 0.0);
        let mixed = deadline_repairs(8, 0.046, 1.37, 0.55);
        assert_eq!(gilbert, 6);
        assert!(mixed >= 9, "{mixed}");
        // Independent losses only: the binomial tail.
        let e: f64 = 0.1;
        assert!((mixed_tail(2, 0.0, 1.0, e, 0) - (1.0 - (1.0 - e).powi(2))).abs() < 1e-12);
        assert!((mixed_tail(2, 0.0, 1.0, e, 1) - e * e).abs() < 1e-12);
    }
}
