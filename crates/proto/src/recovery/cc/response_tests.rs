//! Long-run average window under periodic loss against the analytic response functions:
//! Mathis for NewReno (sqrt(3/(2p)) segments) and RFC 9438 §5 for CUBIC
//! (max of the cubic and the Reno-friendly response). Round-based model with one ACK per
//! datagram, so this exercises the per-ACK growth arithmetic at high BDP.

use std::time::Duration;

use super::*;

const MDS: u64 = 1200;

/// Average window in segments over `rounds` RTTs after `warmup`, losing every `loss_every`-th
/// datagram.
fn average_window(mut cc: Box<dyn Controller>, rtt: Duration, loss_every: u64, rounds: u64) -> f64 {
    let mut est = RttEstimator::new(rtt);
    est.update(rtt, Duration::ZERO, Duration::ZERO, true);
    let warmup = rounds / 5;
    let (mut t, mut counter, mut sum) = (Instant::ZERO, 0u64, 0.0);
    for round in 0..rounds {
        let w = cc.window();
        let n = (w / MDS).max(1);
        let spacing = rtt / n as u32;
        for i in 0..n {
            let sent = t + spacing * i as u32;
            counter += 1;
            if counter % loss_every == 0 {
                // Detected by the ACKs of the next packets, about one RTT after sending.
                cc.on_congestion_event(sent + rtt, sent, false, MDS);
            } else {
                cc.on_ack(sent + rtt, sent, MDS, false, &est);
            }
        }
        if round >= warmup {
            sum += w as f64 / MDS as f64;
        }
        t += rtt;
    }
    sum / (rounds - warmup) as f64
}

fn cubic_response(rtt: f64, p: f64) -> f64 {
    let (c, beta): (f64, f64) = (0.4, 0.7);
    let cubic = (c * (3.0 + beta) / (4.0 * (1.0 - beta))).powf(0.25) * (rtt / p).powf(0.75);
    cubic.max(reno_response(p))
}

fn reno_response(p: f64) -> f64 {
    (1.5 / p).sqrt()
}

fn check(name: &str, got: f64, expected: f64, tolerance: f64) {
    let err = (got - expected).abs() / expected;
    assert!(
        err < tolerance,
        "{name}: average window {got:.1} vs {expected:.1} ({:.0}%)",
        err * 100.0
    );
}

#[test]
fn new_reno_follows_mathis() {
    for (p, rounds) in [(1e-2, 4000), (1e-3, 4000), (1e-4, 4000)] {
        let cc = NewRenoConfig::default().build(Instant::ZERO, MDS as u16);
        let got = average_window(cc, Duration::from_millis(100), (1.0 / p) as u64, rounds);
        check(&format!("newreno p={p}"), got, reno_response(p), 0.15);
    }
}

#[test]
fn cubic_follows_rfc9438_response() {
    for (p, rounds) in [(1e-2, 4000), (1e-3, 4000), (1e-4, 4000), (1e-5, 3000)] {
        let cc = CubicConfig::default().build(Instant::ZERO, MDS as u16);
        let got = average_window(cc, Duration::from_millis(100), (1.0 / p) as u64, rounds);
        check(&format!("cubic p={p}"), got, cubic_response(0.1, p), 0.15);
    }
}
