//! UDP flows through the emulator between two namespaces it creates: delay, loss and rate
//! as asked, and the same drop decisions as the simulator for the same seed.
//!
//! Wall-clock bounds come from the spread measured on the 2-core build machine (2026-11-25):
//! 30 runs of this file, 20 idle and 10 with both cores kept busy by two other processes.
//! Each test prints what it bounds as `measure NAME VALUE`; to measure again:
//! `for i in $(seq 20); do cargo test --release -p qfec-emu --test udp -- --nocapture; done
//! 2>&1 | grep ^measure`. Each bound below says how far it lies from the worst run, in
//! standard deviations of the loaded runs: a test fails by chance only if a run lands that far
//! beyond everything seen, which an outlier of the host's scheduling (a vCPU preempted for
//! milliseconds) moves by less than the margins, since the bounds are on medians and
//! fractions, not on single packets.

use std::net::{SocketAddr, UdpSocket};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use qfec_emu::{EmuConfig, EmuError, EmuStats, Emulator, LEFT_ADDR, LinkPair, RIGHT_ADDR};
use qfec_sim::{LinkSpec, LossSpec, QueueLimit};

mod common;
use common::simulated_deliveries;

const PORT: u16 = 9000;

/// One emulator at a time: on a two-core machine three emulators and their senders and
/// receivers in parallel would measure the scheduler, not the emulator.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Start an emulator, or None (with the reason printed) when the machine cannot run one.
fn emulator(down: LinkSpec) -> Option<Emulator> {
    emulator_with(down, qfec_emu::DEFAULT_MAX_IN_FLIGHT)
}

fn emulator_with(down: LinkSpec, max_in_flight: u64) -> Option<Emulator> {
    let up = LinkSpec::new("up", 0, down.delay);
    let config = EmuConfig {
        links: LinkPair { down, up },
        extra_paths: Vec::new(),
        seed: 7,
        spin: qfec_emu::DEFAULT_SPIN,
        max_in_flight,
    };
    match Emulator::start(config) {
        Ok(e) => Some(e),
        Err(EmuError::Unavailable(why)) => {
            common::skip(&why);
            None
        }
        Err(e) => panic!("emulator: {e}"),
    }
}

/// One received datagram: its sequence number, when it arrived, its one-way delay.
struct Rx {
    seq: u64,
    at: Duration,
    owd: Duration,
}

/// Send `count` datagrams of `payload` bytes from the left namespace to the right one,
/// `burst` at a time every `interval`; each carries its sequence number and send time
/// (both namespaces read the same monotonic clock). Returns what arrived, in order.
fn flow(emu: &Emulator, count: u64, payload: usize, burst: u64, interval: Duration) -> Vec<Rx> {
    let base = Instant::now();
    let (ready_tx, ready_rx) = mpsc::channel();
    std::thread::scope(|scope| {
        let receiver = scope.spawn(move || {
            emu.right()
                .enter_current_thread()
                .expect("enter the right namespace");
            let sock = UdpSocket::bind(SocketAddr::from((RIGHT_ADDR, PORT))).expect("bind right");
            sock.set_read_timeout(Some(Duration::from_millis(1500)))
                .expect("timeout");
            ready_tx.send(()).expect("ready");
            let mut got = Vec::new();
            let mut buf = [0u8; 2048];
            // Until 1.5 s of silence after the first packet (five times the longest outage a
            // test makes), 200 ms once the last one arrived, or 5 s before any.
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                match sock.recv(&mut buf) {
                    Ok(n) if n >= 16 => {
                        let at = base.elapsed();
                        let seq = u64::from_be_bytes(buf[..8].try_into().expect("8"));
                        let sent = Duration::from_nanos(u64::from_be_bytes(
                            buf[8..16].try_into().expect("8"),
                        ));
                        got.push(Rx {
                            seq,
                            at,
                            owd: at - sent,
                        });
                        if seq + 1 == count {
                            // Reordered stragglers come within the link's jitter.
                            sock.set_read_timeout(Some(Duration::from_millis(200)))
                                .expect("timeout");
                        }
                    }
                    Ok(_) => {}
                    Err(_) if !got.is_empty() || Instant::now() > deadline => return got,
                    Err(_) => {}
                }
            }
        });
        ready_rx.recv().expect("receiver ready");
        let sender = scope.spawn(move || {
            emu.left()
                .enter_current_thread()
                .expect("enter the left namespace");
            let sock = UdpSocket::bind(SocketAddr::from((LEFT_ADDR, 0))).expect("bind left");
            let mut pkt = vec![0u8; payload];
            let start = Instant::now();
            for seq in 0..count {
                if seq % burst == 0 {
                    let at = start + interval * (seq / burst) as u32;
                    if let Some(d) = at.checked_duration_since(Instant::now()) {
                        std::thread::sleep(d);
                    }
                }
                pkt[..8].copy_from_slice(&seq.to_be_bytes());
                let sent = base.elapsed().as_nanos() as u64;
                pkt[8..16].copy_from_slice(&sent.to_be_bytes());
                sock.send_to(&pkt, SocketAddr::from((RIGHT_ADDR, PORT)))
                    .expect("send");
            }
        });
        sender.join().expect("sender");
        receiver.join().expect("receiver")
    })
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn report(what: &str, stats: &EmuStats) {
    let l = &stats.lateness;
    eprintln!(
        "{what}: timing error p50 {:?} p90 {:?} p99 {:?} max {:?} over {} packets; down {:?}",
        l.percentile(0.5),
        l.percentile(0.9),
        l.percentile(0.99),
        l.max(),
        l.count(),
        stats.down
    );
}

#[test]
fn delay_and_bernoulli_loss_as_asked() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let delay = Duration::from_millis(20);
    let p = 0.05;
    let link = LinkSpec::new("down", 0, delay).air_loss(LossSpec::Bernoulli { p });
    let Some(emu) = emulator(link) else { return };
    let n = 2000u64;
    let got = flow(&emu, n, 200, 1, Duration::from_millis(1));
    let stats = emu.stop().expect("stop");
    report("bernoulli", &stats);

    // Loss: within the 99 % normal approximation of the binomial interval.
    let lost = n - got.len() as u64;
    let (mean, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
    assert!(
        (lost as f64 - mean).abs() <= 2.576 * sd,
        "lost {lost} of {n}, expected {mean} +- {:.1}",
        2.576 * sd
    );
    assert_eq!(stats.down.offered_packets, n, "only our packets cross");
    assert_eq!(stats.down.dropped_air, lost);

    // Delay: never early; the median within 0.5 ms (measured: 37-81 us over the 20 ms, sd
    // 12 us loaded; the bound is 35 sd beyond the worst run). The tail is the machine's: on
    // this two-vCPU virtual machine a sleeping thread wakes up to 10 ms late now and then,
    // so p99 is only printed, and three quarters of the packets must be within 2 ms
    // (measured: at least 93.5 %, sd 1.7 % loaded: 11 sd beyond the worst run). The timing
    // error's median under 1 ms (measured 22-34 us).
    let mut owd: Vec<Duration> = got.iter().map(|r| r.owd).collect();
    owd.sort();
    let (min, p50, p99) = (owd[0], percentile(&owd, 0.5), percentile(&owd, 0.99));
    eprintln!(
        "one-way delay: min {min:?} p50 {p50:?} p90 {:?} p99 {p99:?}",
        percentile(&owd, 0.9)
    );
    eprintln!("measure owd_p50_us {}", p50.as_micros());
    eprintln!(
        "measure lateness_p50_us {}",
        stats.lateness.percentile(0.5).as_micros()
    );
    assert!(min >= delay, "early: {min:?}");
    assert!(p50 <= delay + Duration::from_micros(500), "p50 {p50:?}");
    let close = owd
        .iter()
        .filter(|&&d| d <= delay + Duration::from_millis(2))
        .count();
    eprintln!("measure close_2ms {}", close as f64 / owd.len() as f64);
    assert!(
        close * 4 >= owd.len() * 3,
        "{close} of {} within 2 ms",
        owd.len()
    );
    assert!(stats.lateness.percentile(0.5) < Duration::from_millis(1));
    assert_eq!(stats.lateness.count(), got.len() as u64);
}

#[test]
fn gilbert_elliott_and_drop_list_drop_what_the_simulator_drops() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Bursts (mean 1 / r = 3.3 packets, 3.2 % of packets) on the air, and named packets at
    // ingress: the emulator must drop exactly the packets the simulator drops.
    let link = LinkSpec::new("down", 0, Duration::from_millis(5))
        .ingress_loss(LossSpec::DropList {
            indices: vec![0, 5, 6, 7, 300],
        })
        .air_loss(LossSpec::GilbertElliott {
            p: 0.01,
            r: 0.3,
            h: 0.0,
            k: 1.0,
        });
    let n = 1000;
    let expected = simulated_deliveries(&link, 7, n, Duration::from_millis(1));
    let Some(emu) = emulator(link) else { return };
    let got = flow(&emu, n, 200, 1, Duration::from_millis(1));
    let stats = emu.stop().expect("stop");
    report("gilbert-elliott", &stats);
    let seqs: Vec<u64> = got.iter().map(|r| r.seq).collect();
    for i in [0, 5, 6, 7, 300] {
        assert!(!seqs.contains(&i), "packet {i} should be dropped");
    }
    assert_eq!(stats.down.dropped_ingress, 5);
    assert!(stats.down.dropped_air > 0, "no burst in {n} packets");
    assert_eq!(seqs, expected, "emulator and simulator disagree");
}

/// Offer 1428-byte IP packets, ten every `interval`, to `link` (whose queue must fill),
/// and measure the rate of the arrivals once it has: the serializer is then busy throughout,
/// so arrivals are spaced by the link's rate. None when the machine cannot emulate.
fn saturated_rate(what: &str, link: LinkSpec, interval: Duration) -> Option<f64> {
    let emu = emulator(link)?;
    let (payload, ip) = (1400usize, 1428u64);
    let got = flow(&emu, 1500, payload, 10, interval);
    let stats = emu.stop().expect("stop");
    report(what, &stats);
    // Skip the first packets: the queue starts empty and the bursts' gaps show until
    // it has filled.
    let steady: Vec<&Rx> = got.iter().skip(200).collect();
    let (first, last) = (steady[0].at, steady[steady.len() - 1].at);
    let bits = (steady.len() as u64 - 1) * ip * 8;
    let measured = bits as f64 / (last - first).as_secs_f64();
    eprintln!(
        "{what}: {:.3} Mb/s over {} packets, {} dropped at the queue",
        measured / 1e6,
        steady.len(),
        stats.down.dropped_queue
    );
    eprintln!("measure {what}_ratio {}", measured);
    assert!(stats.down.dropped_queue > 0, "the queue never filled");
    Some(measured)
}

#[test]
fn rate_limit_as_asked() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 10 Mb/s with a 100-packet queue, offered 12 Mb/s (10 packets per 9.52 ms).
    let rate = 10_000_000f64;
    let link = LinkSpec::new("down", rate as u64, Duration::from_millis(5))
        .queue(QueueLimit::Packets(100));
    let Some(measured) = saturated_rate("rate", link, Duration::from_micros(9520)) else {
        return;
    };
    // Measured within 0.04 % of the rate (sd 0.008 % loaded): the 2 % bound is 240 sd away.
    assert!(
        (measured / rate - 1.0).abs() < 0.02,
        "measured {measured} b/s for {rate}"
    );
}

#[test]
fn a_delivery_trace_paces_in_real_time() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A mahimahi trace with one 1500-byte opportunity per millisecond (12 Mb/s), offered
    // 15 Mb/s (10 packets per 7.6 ms): the opportunities run in real time.
    let trace = qfec_sim::DeliveryTrace::from_ms((1..=100).collect()).expect("trace");
    let rate = trace.mean_rate_bps();
    let link = LinkSpec::new("down", 0, Duration::from_millis(5))
        .trace(std::sync::Arc::new(trace))
        .queue(QueueLimit::Packets(100));
    let Some(measured) = saturated_rate("trace", link, Duration::from_micros(7600)) else {
        return;
    };
    // Measured within 0.03 % of the trace's rate (sd 0.007 % loaded).
    assert!(
        (measured / rate - 1.0).abs() < 0.02,
        "measured {measured} b/s for {rate}"
    );
}

#[test]
fn schedules_run_in_real_time() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A blackhole from 300 ms to 600 ms after the emulator starts: the packets sent then,
    // one per millisecond, vanish in one run.
    let at = |ms: u64| qfec_sim::Instant::from_nanos(ms * 1_000_000);
    let link = LinkSpec::new("down", 0, Duration::from_millis(5))
        .change(at(300), qfec_sim::LinkChange::Blackhole(true))
        .change(at(600), qfec_sim::LinkChange::Blackhole(false));
    let Some(emu) = emulator(link) else { return };
    let n = 900;
    let got = flow(&emu, n, 200, 1, Duration::from_millis(1));
    let stats = emu.stop().expect("stop");
    report("schedule", &stats);
    let seqs: Vec<u64> = got.iter().map(|r| r.seq).collect();
    let missing: Vec<u64> = (0..n).filter(|s| !seqs.contains(s)).collect();
    let (first, last) = (missing[0], missing[missing.len() - 1]);
    eprintln!("blackholed packets {first}..={last}");
    eprintln!("measure blackholed {}", missing.len());
    assert_eq!(
        missing.len() as u64,
        last - first + 1,
        "one contiguous outage"
    );
    assert_eq!(stats.down.dropped_blackhole, missing.len() as u64);
    // 300 ms of packets; the sender's sleeps may stretch the spacing a little (measured: 300
    // in all 30 runs; the sender sends late packets at once, so only a preemption of more
    // than 30 ms at one edge of the outage could move the count out of the range).
    assert!((270..=305).contains(&missing.len()), "{}", missing.len());
}

#[test]
fn an_unlimited_queue_is_bounded_by_max_in_flight() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 1 Mb/s with no queue limit, 400 packets at once: the link holds 50, the emulator
    // drops the rest as it reads them, and every packet read is accounted for.
    let link = LinkSpec::new("down", 1_000_000, Duration::from_millis(1));
    let Some(emu) = emulator_with(link, 50) else {
        return;
    };
    let got = flow(&emu, 400, 200, 400, Duration::from_millis(1));
    let stats = emu.stop().expect("stop");
    report("overload", &stats);
    eprintln!(
        "read {}, delivered {}, overload {:?}",
        stats.read_left,
        got.len(),
        stats.dropped_overload
    );
    assert!(stats.dropped_overload[0] > 0, "never over 50 in flight");
    assert!(got.len() >= 50, "{}", got.len());
    assert_eq!(stats.down.dropped(), 0);
    assert_eq!(
        stats.read_left,
        got.len() as u64 + stats.dropped_overload[0]
    );
    assert!(stats.down.max_queue_packets <= 50);
}

#[test]
fn jitter_spreads_the_delay_and_reorders_only_when_allowed() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (delay, max) = (Duration::from_millis(20), Duration::from_millis(5));
    for reorder in [true, false] {
        let link = LinkSpec::new("down", 0, delay).jitter(qfec_sim::Jitter::Uniform(max), reorder);
        let Some(emu) = emulator(link) else { return };
        let got = flow(&emu, 500, 200, 1, Duration::from_millis(1));
        let stats = emu.stop().expect("stop");
        report("jitter", &stats);
        let late_in_order = got.windows(2).filter(|w| w[1].seq < w[0].seq).count();
        let mut owd: Vec<Duration> = got.iter().map(|r| r.owd).collect();
        owd.sort();
        let (p10, p50, p90) = (
            percentile(&owd, 0.1),
            percentile(&owd, 0.5),
            percentile(&owd, 0.9),
        );
        eprintln!(
            "reorder {reorder}: min {:?} p10 {p10:?} p50 {p50:?} p90 {p90:?}, {late_in_order} out of order",
            owd[0]
        );
        eprintln!("measure jitter_{reorder}_p50_us {}", p50.as_micros());
        eprintln!(
            "measure jitter_{reorder}_spread_us {}",
            (p90 - p10).as_micros()
        );
        eprintln!("measure jitter_{reorder}_reordered {late_in_order}");
        assert_eq!(got.len(), 500);
        assert!(owd[0] >= delay - max, "early: {:?}", owd[0]);
        assert!(p90 - p10 >= Duration::from_millis(3), "no spread");
        if reorder {
            // Uniform in [15, 25] ms: median 20 ms, plus the machine's own delay. Measured:
            // 19.82-20.29 ms, sd 0.14 ms loaded: the bounds are 6 sd below and 15 sd above
            // the extremes. Jitter added only upwards would give 25 ms.
            assert!(p50 >= Duration::from_millis(19), "{p50:?}");
            assert!(p50 <= Duration::from_micros(22_500), "{p50:?}");
            assert!(late_in_order > 50, "only {late_in_order} reordered");
        } else {
            assert_eq!(late_in_order, 0, "reordered without allow_reorder");
        }
    }
}
