//! Unit tests of the BBR state machine, driven through a small path model: one bottleneck
//! of a fixed rate with a FIFO queue, a fixed propagation delay, one ACK per packet, and the
//! real delivery-rate sampler between the path and the controller.

use std::collections::VecDeque;

use super::model::scale;
use super::*;
use crate::recovery::RttEstimator;
use crate::recovery::delivery::{DeliveryRate, PacketDelivery};

const MDS: u64 = 1200;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// A packet on the path: when its fate is known at the sender.
struct InFlight {
    at: Instant,
    lost: bool,
    p: PacketDelivery,
}

struct Path {
    now: Instant,
    cc: Bbr,
    dr: DeliveryRate,
    rtt: RttEstimator,
    /// Bottleneck rate, bytes per second.
    rate: u64,
    /// Round-trip propagation delay.
    prop: Duration,
    /// Drop-tail queue limit in bytes.
    queue_limit: Option<u64>,
    /// Lose the packets whose send index this returns true for.
    lose: Box<dyn Fn(u64) -> bool>,
    link_free: Instant,
    next_send: Instant,
    queue: VecDeque<InFlight>,
    bytes_in_flight: u64,
    sent: u64,
    /// Application-limited: send no more than this many packets.
    limit: Option<u64>,
    history: Vec<(Instant, State)>,
}

impl Path {
    fn new(rate: u64, prop: Duration) -> Path {
        Path {
            now: Instant::ZERO,
            cc: Bbr::new(BbrConfig::default(), MDS as u16, Instant::ZERO),
            dr: DeliveryRate::new(),
            rtt: RttEstimator::default(),
            rate,
            prop,
            queue_limit: None,
            lose: Box::new(|_| false),
            link_free: Instant::ZERO,
            next_send: Instant::ZERO,
            queue: VecDeque::new(),
            bytes_in_flight: 0,
            sent: 0,
            limit: None,
            history: vec![(Instant::ZERO, State::Startup)],
        }
    }

    fn bdp(&self) -> u64 {
        (self.rate as f64 * self.prop.as_secs_f64()) as u64
    }

    fn send(&mut self) {
        let size = MDS;
        self.bytes_in_flight += size;
        let p = self.dr.on_sent(self.now, size, self.bytes_in_flight);
        self.cc.on_sent(self.now, size, self.bytes_in_flight);
        let start = self.link_free.max(self.now);
        let queued =
            (start.saturating_duration_since(self.now).as_secs_f64() * self.rate as f64) as u64;
        let mut lost = (self.lose)(self.sent);
        if self.queue_limit.is_some_and(|l| queued + size > l) {
            lost = true;
        } else {
            self.link_free = start + Duration::from_secs_f64(size as f64 / self.rate as f64);
        }
        // A loss is noticed about when its acknowledgement would have come.
        let at = self.link_free.max(self.now) + self.prop;
        self.queue.push_back(InFlight { at, lost, p });
        self.sent += 1;
        if let Some(rate) = self.cc.pacing_rate() {
            self.next_send = self.now + Duration::from_secs_f64(size as f64 / rate as f64);
        }
    }

    fn ack_due(&mut self) {
        while self.queue.front().is_some_and(|f| f.at <= self.now) {
            let f = self.queue.pop_front().unwrap();
            self.bytes_in_flight -= f.p.size();
            if f.lost {
                let loss = self.dr.on_lost(&f.p);
                self.cc.on_packet_lost(self.now, &loss);
                self.cc
                    .on_congestion_event(self.now, f.p.send_time(), false, f.p.size());
                continue;
            }
            let sample = self.now.saturating_duration_since(f.p.send_time());
            self.rtt
                .update(sample, Duration::ZERO, Duration::ZERO, true);
            self.cc
                .on_ack(self.now, f.p.send_time(), f.p.size(), false, &self.rtt);
            self.dr.on_delivered(self.now, &f.p);
            let rs = self
                .dr
                .take_sample(self.now, self.rtt.min(), self.bytes_in_flight)
                .unwrap();
            self.cc.on_rate_sample(self.now, &rs);
            if self.cc.holds_rate_samples_app_limited() {
                self.dr.mark_app_limited(self.bytes_in_flight);
            }
            if self.history.last().unwrap().1 != self.cc.state {
                self.history.push((self.now, self.cc.state));
            }
        }
    }

    /// Runs the path until `until`.
    fn run(&mut self, until: Instant) {
        while self.now < until {
            self.ack_due();
            let may_send = self.limit.is_none_or(|l| self.sent < l);
            if may_send
                && self.bytes_in_flight + MDS <= self.cc.window()
                && self.now >= self.next_send
            {
                self.send();
                continue;
            }
            if !may_send && self.bytes_in_flight + MDS <= self.cc.window() {
                self.dr.mark_app_limited(self.bytes_in_flight);
            }
            let mut next = until;
            if let Some(f) = self.queue.front() {
                next = next.min(f.at);
            }
            if may_send && self.bytes_in_flight + MDS <= self.cc.window() {
                next = next.min(self.next_send);
            }
            self.now = next.max(self.now + Duration::from_nanos(1));
        }
    }

    fn entered(&self, state: State) -> Vec<Instant> {
        self.history
            .iter()
            .filter(|(_, s)| *s == state)
            .map(|(t, _)| *t)
            .collect()
    }
}

fn at(ms: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(ms)
}

#[test]
fn startup_exits_on_plateau_and_drains_to_the_bdp() {
    // 10 Mb/s, 40 ms: BDP 50 kB.
    let mut p = Path::new(1_250_000, ms(40));
    p.run(at(2000));
    let drain = p.entered(State::Drain);
    assert_eq!(drain.len(), 1, "{:?}", p.history);
    assert!(p.cc.full_bw_reached);
    // Bandwidth found within 2 % (the draft's first example test case).
    let err = (p.cc.max_bw as f64 - 1_250_000.0).abs() / 1_250_000.0;
    assert!(err < 0.02, "max_bw {}", p.cc.max_bw);
    assert_eq!(
        p.cc.min_rtt,
        Some(ms(40)).map(|d| d + Duration::from_nanos(960_000))
    );
    // Doubling from 10 packets to a 42-packet BDP, then three rounds without growth.
    assert!(
        (6..=12).contains(&p.cc.drain_start_round),
        "left Startup in round {}",
        p.cc.drain_start_round
    );
    // Drain ends once inflight is down to the BDP, within a few rounds.
    let (left, next) = p.history[2];
    assert!(
        left > drain[0] && left - drain[0] < ms(4 * 41),
        "{:?}",
        p.history
    );
    assert!(matches!(next, State::ProbeBwDown | State::ProbeBwCruise));
    assert!(p.cc.in_probe_bw());
    assert!(!p.cc.in_slow_start());
    // ssthresh reports the BDP estimate once out of Startup.
    let ssthresh = p.cc.ssthresh();
    assert!(
        ssthresh >= p.bdp() && ssthresh < p.bdp() + 4 * MDS,
        "{ssthresh}"
    );
}

#[test]
fn probe_bw_cycles_through_its_phases() {
    let mut p = Path::new(1_250_000, ms(40));
    p.run(at(4500));
    let states: Vec<State> = p.history.iter().map(|(_, s)| *s).collect();
    // Drain -> (DOWN, at once) CRUISE -> REFILL (one round) -> UP -> DOWN -> CRUISE ...
    use State::*;
    assert_eq!(
        states,
        [
            Startup,
            Drain,
            ProbeBwCruise,
            ProbeBwRefill,
            ProbeBwUp,
            ProbeBwDown,
            ProbeBwCruise,
            ProbeBwRefill,
            ProbeBwUp
        ],
        "{:?}",
        p.history
    );
    let t: Vec<Instant> = p.history.iter().map(|(t, _)| *t).collect();
    let round = ms(41);
    // Drain went through DOWN, which finds inflight at the BDP and cruises.
    assert_eq!(p.cc.cycle_count, 2);
    // The first wait between probes: fewer rounds than 2 s here, the BDP in packets (42).
    assert!(t[3] - t[2] > round * 40 && t[3] - t[2] < round * 44);
    // REFILL lasts one round; UP ends after three rounds without growth (full_bw_now).
    assert!(t[4] - t[3] >= round && t[4] - t[3] < round * 2);
    assert!(t[5] - t[4] >= round * 3 && t[5] - t[4] < round * 5);
    // DOWN drains the queue UP built, then cruises.
    assert!(t[6] > t[5]);
    // Nothing was lost: no long-term bound was set.
    assert_eq!(p.cc.inflight_longterm, UNBOUNDED);
}

#[test]
fn probe_rtt_after_five_seconds_without_a_lower_rtt() {
    let mut p = Path::new(1_250_000, ms(40));
    p.run(at(7000));
    let entered = p.entered(State::ProbeRtt);
    assert_eq!(entered.len(), 1, "{:?}", p.history);
    // min_rtt was last lowered early in Startup; ProbeRTT follows 5 s later.
    assert!(
        entered[0] > at(5000) && entered[0] < at(5300),
        "{entered:?}"
    );
    let i = p
        .history
        .iter()
        .position(|(_, s)| *s == State::ProbeRtt)
        .unwrap();
    let (t_exit, next) = p.history[i + 1];
    // 200 ms at the reduced window plus the round it takes to get there.
    assert!(t_exit - entered[0] >= ms(200) && t_exit - entered[0] < ms(400));
    assert_eq!(
        next,
        State::ProbeBwCruise,
        "back to ProbeBW, pipe known full"
    );
    // Inside ProbeRTT the window was cut to half the BDP.
    let mut q = Path::new(1_250_000, ms(40));
    q.run(entered[0] + ms(100));
    assert_eq!(q.cc.state, State::ProbeRtt);
    assert!(q.cc.window() <= q.cc.probe_rtt_cwnd());
    assert!(q.cc.window() <= q.bdp() / 2 + 2 * MDS, "{}", q.cc.window());
    assert!(q.cc.holds_rate_samples_app_limited());
}

#[test]
fn application_limited_startup_does_not_exit() {
    // 20 packets only: Startup never sees its pipe fill, whatever the time.
    let mut p = Path::new(1_250_000, ms(40));
    p.limit = Some(20);
    p.run(at(3000));
    assert_eq!(p.cc.state, State::Startup, "{:?}", p.history);
}

#[test]
fn loss_above_two_percent_while_probing_sets_inflight_longterm() {
    let mut p = Path::new(1_250_000, ms(40));
    p.run(at(4500));
    // Drive to the first ProbeBW_UP of the next cycle.
    while p.cc.state != State::ProbeBwUp {
        let t = p.now + ms(1);
        p.run(t);
    }
    assert!(p.cc.is_bw_probe_sample);
    let tx_in_flight = 60_000;
    // 3 % of what was in flight when the packet left was lost since.
    let loss = LossSample {
        bytes: MDS,
        tx_in_flight,
        lost: 1800,
        is_app_limited: false,
        total_delivered: p.dr.delivered(),
    };
    let now = p.now;
    p.cc.on_packet_lost(now, &loss);
    assert_eq!(p.cc.state, State::ProbeBwDown, "the probe stops");
    assert!(p.cc.prev_probe_too_high);
    // Where the loss rate crossed 2 %: (0.02 * 58800 - 600) / 0.98 = 587.8 bytes into it.
    let at_loss = 58_800 + 587;
    let floor = scale(p.cc.target_inflight(), BETA);
    assert_eq!(p.cc.inflight_longterm, at_loss.max(floor));
    // Loss at 1.5 % is tolerated.
    let mut q = Path::new(1_250_000, ms(40));
    q.run(at(4500));
    while q.cc.state != State::ProbeBwUp {
        let t = q.now + ms(1);
        q.run(t);
    }
    let now = q.now;
    q.cc.on_packet_lost(now, &LossSample { lost: 900, ..loss });
    assert_eq!(q.cc.state, State::ProbeBwUp);
    assert_eq!(q.cc.inflight_longterm, UNBOUNDED);
}

#[test]
fn loss_in_cruise_lowers_the_short_term_model_by_at_most_beta() {
    // 1 loss in 30 packets once in ProbeBW (3.3 %, more than LossThresh).
    let mut p = Path::new(1_250_000, ms(40));
    p.lose = Box::new(|i| i > 2500 && i % 30 == 0);
    p.run(at(3000));
    let (mut rounds, mut bounded) = (0, 0);
    let mut last_round = p.cc.round_count;
    let mut prev = (UNBOUNDED, UNBOUNDED);
    while rounds < 40 {
        let t = p.now + ms(1);
        p.run(t);
        let cur = (p.cc.bw_shortterm, p.cc.inflight_shortterm);
        if !matches!(p.cc.state, State::ProbeBwDown | State::ProbeBwCruise) {
            prev = (UNBOUNDED, UNBOUNDED);
            continue;
        }
        if cur.0 != UNBOUNDED {
            bounded += 1;
            assert!(p.cc.window() <= cur.1.max(4 * MDS));
        }
        if prev.0 != UNBOUNDED {
            // Once per round at most, and never by more than BBR.Beta.
            assert!(
                cur.0 as f64 >= prev.0 as f64 * BETA - 1.0,
                "{prev:?} -> {cur:?}"
            );
            assert!(
                cur.1 as f64 >= prev.1 as f64 * BETA - 1.0,
                "{prev:?} -> {cur:?}"
            );
        }
        prev = cur;
        if p.cc.round_count != last_round {
            last_round = p.cc.round_count;
            rounds += 1;
        }
    }
    assert!(bounded > 0, "loss in DOWN/CRUISE set the short-term bounds");
    assert!(p.cc.window() >= 4 * MDS);
}

#[test]
fn startup_exits_on_heavy_loss() {
    // Every 10th packet lost from the start: far above 2 % per round, on a path whose
    // bandwidth Startup is far from reaching.
    let mut p = Path::new(12_500_000, ms(40));
    p.lose = Box::new(|i| i % 10 == 5);
    while p.cc.state == State::Startup && p.now < at(1500) {
        let t = p.now + ms(1);
        p.run(t);
    }
    assert_eq!(p.cc.state, State::Drain);
    assert!(p.cc.full_bw_reached);
    // The loss exit, not the plateau: it sets a long-term bound and can be undone.
    assert!(!p.cc.full_bw_now);
    assert_eq!(p.cc.undo_state, Some(State::Startup));
    assert!(p.cc.inflight_longterm < UNBOUNDED);
    assert!(p.cc.max_bw < 12_500_000 / 2);
}

#[test]
fn window_never_below_four_packets() {
    let mut cc = Bbr::new(BbrConfig::default(), MDS as u16, Instant::ZERO);
    cc.on_congestion_event(at(100), at(10), true, 10 * MDS);
    assert_eq!(cc.window(), 4 * MDS);
    // Every loss bound collapsed: still four packets.
    cc.inflight_shortterm = 0;
    cc.inflight_longterm = 0;
    cc.state = State::ProbeBwDown;
    cc.full_bw_reached = true;
    let rs = RateSample {
        newly_acked: MDS,
        ..RateSample::default()
    };
    cc.on_rate_sample(at(200), &rs);
    assert_eq!(cc.window(), 4 * MDS);
    cc.on_mtu_update(1500);
    assert_eq!(cc.window(), 4 * 1500);
}

#[test]
fn spurious_loss_undoes_the_end_of_a_probe() {
    let mut p = Path::new(1_250_000, ms(40));
    p.run(at(4500));
    while p.cc.state != State::ProbeBwUp {
        let t = p.now + ms(1);
        p.run(t);
    }
    let now = p.now;
    let loss = LossSample {
        bytes: MDS,
        tx_in_flight: 60_000,
        lost: 3000,
        is_app_limited: false,
        total_delivered: p.dr.delivered(),
    };
    p.cc.on_packet_lost(now, &loss);
    p.cc.on_congestion_event(now, now, false, MDS);
    assert_eq!(p.cc.state, State::ProbeBwDown);
    assert!(p.cc.inflight_longterm < UNBOUNDED);
    p.cc.on_spurious_congestion_event();
    // Back to probing, with the bounds from before the loss.
    assert_eq!(p.cc.state, State::ProbeBwRefill);
    assert_eq!(p.cc.inflight_longterm, UNBOUNDED);
    assert!(!p.cc.in_recovery);
}

#[test]
fn deterministic_probe_wait() {
    let mut a = Bbr::new(BbrConfig::default(), 1200, at(5));
    let mut b = Bbr::new(BbrConfig::default(), 1200, at(5));
    let mut c = Bbr::new(BbrConfig::default(), 1200, at(6));
    let draw = |x: &mut Bbr| {
        x.start_probe_bw_down(at(10));
        (x.bw_probe_wait, x.rounds_since_probe_up)
    };
    let (da, db, dc) = (draw(&mut a), draw(&mut b), draw(&mut c));
    assert_eq!(da, db);
    assert_ne!(da, dc);
    for _ in 0..100 {
        let (wait, rounds) = draw(&mut a);
        assert!(wait >= Duration::from_secs(2) && wait <= Duration::from_secs(3));
        assert!(rounds <= 1);
    }
}
