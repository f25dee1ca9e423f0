//! FEC recovers lost packets: the tail of a short download, losses hidden from or signalled to
//! congestion control, every scheme.

mod common;

use std::time::Duration;

use common::{da2gc, exchange, fec, link, plain};
use qfec_fec::SchemeId;
use qfec_proto::{RecoveredLossMode, TransportConfig};
use qfec_testkit::{Datagram, Exchange, LinkSpec, Pair, payload};

/// A 1 kB download whose only data packet is dropped; returns when it completed (seconds
/// after the connection started) and the server's FEC counters.
fn tail_download(
    server: TransportConfig,
    client: TransportConfig,
) -> (f64, Option<qfec_fec::FecStats>) {
    let mut pair = Pair::new(7, server, da2gc(), da2gc());
    let start = pair.now;
    let ch = pair.connect(client);
    let mut dropped = 0;
    // The server's 1-RTT datagram carrying the 1000 response bytes (with HANDSHAKE_DONE and
    // connection IDs): short header, 1-1.4 kB (repair packets fill a full-size datagram).
    pair.drop_hook = Some(Box::new(move |d: &Datagram<'_>| {
        let hit =
            !d.to_server && d.is_short() && (1000..1400).contains(&d.data.len()) && dropped == 0;
        dropped += usize::from(hit);
        hit
    }));
    let (t, x) = common::request_response(&mut pair, ch, start, 7);
    // Let the acknowledgements (and recovery reports) reach the server.
    pair.run_until(Duration::from_secs(2), |_| false);
    (t, common::stats(&pair, &x, false))
}

#[test]
fn lost_tail_of_a_short_download_is_recovered_about_an_rtt_sooner() {
    let all = &SchemeId::ALL;
    let (plain_t, _) = tail_download(plain(), plain());
    // `adaptive` has seen no loss of its own here: its prior protects the first flight.
    for scheme in ["rlc", "rs", "xor", "adaptive"] {
        let (fec_t, s) = tail_download(
            fec(scheme, all, RecoveredLossMode::Signal),
            fec("none", all, RecoveredLossMode::Signal),
        );
        let s = s.unwrap();
        assert_eq!(s.peer_recovered, 1, "{scheme}: {s:?}");
        // One RTT is 262 ms; without FEC the tail waits for a probe timeout.
        assert!(
            fec_t + 0.262 <= plain_t,
            "{scheme}: {fec_t:.3} s with FEC, {plain_t:.3} s without"
        );
    }
}

/// Without a prior, `adaptive` protects nothing before the connection saw a loss: the lost
/// tail waits for a probe timeout, as in plain QUIC.
#[test]
fn adaptive_without_a_prior_leaves_the_first_flight_unprotected() {
    let all = &SchemeId::ALL;
    let (plain_t, _) = tail_download(plain(), plain());
    let (t, s) = tail_download(
        fec("adaptive(prior=0)", all, RecoveredLossMode::Signal),
        fec("none", all, RecoveredLossMode::Signal),
    );
    let s = s.unwrap();
    assert_eq!((s.repair_symbols_sent, s.peer_recovered), (0, 0), "{s:?}");
    assert!((t - plain_t).abs() < 0.05, "{t:.3} s, plain {plain_t:.3} s");
}

/// A 50 kB download over paper 003's MSS link (1.89 Mb/s, 761 ms RTT) with the server's
/// `drop`-th full-size 1-RTT datagram dropped (none with 0): when it completed, seconds after
/// the connection started, and the server's FEC counters.
fn short_download(
    server: TransportConfig,
    client: TransportConfig,
    drop: usize,
) -> (f64, Option<qfec_fec::FecStats>) {
    let mss = LinkSpec {
        delay: Duration::from_micros(380_500),
        rate: 1_890_000,
        ..LinkSpec::default()
    };
    let mut pair = Pair::new(5, server, mss.clone(), mss);
    let start = pair.now;
    let ch = pair.connect(client);
    let mut seen = 0;
    pair.drop_hook = Some(Box::new(move |d: &Datagram<'_>| {
        if !d.to_server && d.is_short() && d.data.len() > 1300 {
            seen += 1;
            return seen == drop;
        }
        false
    }));
    let (t, x) = common::request_response_of(&mut pair, ch, start, 5, b"GET /50kB", 50_000);
    (t, common::stats(&pair, &x, false))
}

/// A loss in the first flight of a short download, declared while the window is still
/// near its initial size, ends slow start: the 50 kB then take a round trip more. `adaptive`
/// ends that flight with a repair, the peer recovers the loss as the flight arrives, and in
/// its default mode the reduction is undone (the flight's own queue is no standing queue):
/// the download takes the time of a loss-free one.
#[test]
fn a_loss_in_the_first_flight_of_a_short_download_costs_no_round_trip() {
    let all = &SchemeId::ALL;
    let adaptive = || {
        let server = fec("adaptive", all, RecoveredLossMode::Differentiate);
        (server, fec("none", all, RecoveredLossMode::Differentiate))
    };
    let (clean, _) = short_download(plain(), plain(), 0);
    let (plain_t, _) = short_download(plain(), plain(), 2);
    let (s, c) = adaptive();
    let (clean_fec, _) = short_download(s, c, 0);
    let (s, c) = adaptive();
    let (fec_t, stats) = short_download(s, c, 2);
    let stats = stats.unwrap();
    assert!(stats.peer_recovered >= 1, "{stats:?}");
    // A round trip is 761 ms.
    assert!(
        plain_t >= clean + 0.7,
        "plain: {plain_t:.3} s, clean {clean:.3} s"
    );
    assert!(
        fec_t <= clean_fec + 0.25,
        "adaptive: {fec_t:.3} s, clean {clean_fec:.3} s"
    );
}

/// A bulk download with one data packet dropped in mid-flight, which RLC (a repair every two
/// source symbols) recovers before loss detection would declare it lost.
fn one_loss(mode: RecoveredLossMode) -> qfec_proto::ConnectionStats {
    one_loss_on(mode, link(20, 0.0))
}

fn one_loss_on(mode: RecoveredLossMode, down: LinkSpec) -> qfec_proto::ConnectionStats {
    let mut pair = Pair::new(11, fec("rlc", &SchemeId::ALL, mode), link(20, 0.0), down);
    let ch = pair.connect(fec("none", &SchemeId::ALL, mode));
    let mut seen = 0;
    pair.drop_hook = Some(Box::new(move |d: &Datagram<'_>| {
        // The 100th full-size 1-RTT datagram from the server.
        if !d.to_server && d.is_short() && d.data.len() > 1300 {
            seen += 1;
            return seen == 100;
        }
        false
    }));
    let mut x = Exchange::new(ch, b"GET".to_vec(), payload(1_000_000, 11));
    assert!(x.run(&mut pair, Duration::from_secs(30)), "{:?}", x.error);
    common::assert_same(&x.flows[0].received, &x.flows[1].data, "download");
    let sh = x.server.unwrap();
    let c = pair.server.connection(sh).unwrap();
    assert_eq!(common::stats(&pair, &x, false).unwrap().peer_recovered, 1);
    // Regression: a packet the peer recovered was lost on the wire all the same, and the
    // path's loss pattern (what the real-time repair and the multipath schedulers read)
    // counts it; it counted only the losses loss detection declared.
    let loss = c.path_stats().loss;
    assert!(loss.rate > 0.0 && loss.samples > 500.0, "{loss:?}");
    c.stats()
}

#[test]
fn signal_reduces_the_window_on_a_recovered_loss_and_mask_does_not() {
    let signal = one_loss(RecoveredLossMode::Signal);
    let mask = one_loss(RecoveredLossMode::Mask);
    for s in [&signal, &mask] {
        assert_eq!(s.packets_recovered_by_peer, 1, "{s:?}");
        assert_eq!((s.packets_lost, s.packets_retransmitted), (0, 0), "{s:?}");
    }
    assert_eq!(signal.congestion_events, 1, "{signal:?}");
    assert_eq!(mask.congestion_events, 0, "{mask:?}");
}

/// `differentiate` masks a loss recovered while the path shows no queue (100 Mb/s: slow
/// start has not filled the pipe by the 100th packet) and signals one recovered while a
/// queue stands (5 Mb/s: by then the window is several times the 25 kB pipe).
#[test]
fn differentiate_signals_a_recovered_loss_only_at_a_standing_queue() {
    let mode = RecoveredLossMode::Differentiate;
    let open = one_loss_on(mode, link(20, 0.0));
    let queued = one_loss_on(
        mode,
        LinkSpec {
            rate: 5_000_000,
            ..link(20, 0.0)
        },
    );
    for s in [&open, &queued] {
        assert_eq!(s.packets_recovered_by_peer, 1, "{s:?}");
        assert_eq!((s.packets_lost, s.packets_retransmitted), (0, 0), "{s:?}");
    }
    assert_eq!(open.congestion_events, 0, "{open:?}");
    assert_eq!(queued.congestion_events, 1, "{queued:?}");
}

/// Every scheme, at Bernoulli losses and over a Gilbert-Elliott-like bursty link: identical
/// bytes both ways, symbols recovered, fewer retransmissions than without FEC.
#[test]
fn every_scheme_recovers_losses_with_fewer_retransmissions() {
    let all = &SchemeId::ALL;
    for loss in [0.0, 0.02, 0.05, 0.10] {
        let retx = |server: TransportConfig, client: TransportConfig| {
            let mut total = (0, 0);
            for seed in 1..=3 {
                let (pair, x) = exchange(
                    seed,
                    server.clone(),
                    client.clone(),
                    link(15, loss),
                    link(15, loss),
                    200_000,
                );
                let s = pair.server.connection(x.server.unwrap()).unwrap().stats();
                let c = pair.client.connection(x.client).unwrap().stats();
                total.0 += s.packets_retransmitted + c.packets_retransmitted;
                total.1 += common::stats(&pair, &x, true).map_or(0, |f| f.symbols_recovered)
                    + common::stats(&pair, &x, false).map_or(0, |f| f.symbols_recovered);
            }
            total
        };
        let (base, _) = retx(plain(), plain());
        for scheme in ["xor", "rs", "rlc", "rlc(20,2,gf2)"] {
            let t = fec(scheme, all, RecoveredLossMode::Signal);
            let (r, recovered) = retx(t.clone(), t);
            if loss > 0.0 {
                assert!(recovered > 0, "{scheme} at {loss}: nothing recovered");
                assert!(
                    r < base,
                    "{scheme} at {loss}: {r} retransmissions, {base} without FEC"
                );
            }
        }
    }
}

/// PMTU discovery grows the path's datagrams under a running code: the sender starts a code
/// whose symbols fill the larger packets, and the receiver keeps the larger source symbols
/// that arrive before that code's first repair for the decoder the repair makes. (Regression:
/// the receiver once closed the connection on a source symbol larger than its decoder's,
/// "source symbol larger than the symbol size".)
#[test]
fn fec_symbols_follow_pmtu_discovery() {
    for scheme in ["adaptive", "rlc", "rs", "rquic"] {
        let pmtud = |mut t: TransportConfig| {
            t.mtu_discovery = Some(qfec_proto::MtuDiscoveryConfig {
                upper_bound: 4000,
                raise_interval: Duration::from_secs(600),
            });
            t
        };
        let all = &SchemeId::ALL;
        let server = pmtud(fec(scheme, all, RecoveredLossMode::Mask));
        let client = pmtud(fec(scheme, all, RecoveredLossMode::Mask));
        let (pair, x) = exchange(
            31,
            server,
            client,
            link(20, 0.03),
            link(20, 0.03),
            3_000_000,
        );
        let s = pair.server.connection(x.server.unwrap()).unwrap();
        assert!(
            s.path_stats().mtu > 3000,
            "{scheme}: {}",
            s.path_stats().mtu
        );
        let st = common::stats(&pair, &x, true).unwrap();
        assert!(st.symbols_recovered > 0, "{scheme}: {st:?}");
        let sender = common::stats(&pair, &x, false).unwrap();
        assert!(
            sender.symbol_size.is_some_and(|s| s > 3000),
            "{scheme}: the server's symbols follow its datagrams: {sender:?}"
        );
    }
}
