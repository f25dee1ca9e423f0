//! Each direction is negotiated on its own, and a peer without FEC gets plain QUIC.

mod common;

use common::{exchange, fec, link, plain, stats};
use qfec_fec::SchemeId;
use qfec_proto::RecoveredLossMode::Signal;

const ALL: &[SchemeId] = &SchemeId::ALL;

#[test]
fn fec_client_with_plain_server() {
    let (pair, x) = exchange(
        1,
        plain(),
        fec("rlc", ALL, Signal),
        link(10, 0.02),
        link(10, 0.02),
        300_000,
    );
    let c = stats(&pair, &x, true).unwrap();
    assert_eq!((c.source_symbols_sent, c.repair_symbols_sent), (0, 0));
    assert!(stats(&pair, &x, false).is_none());
}

#[test]
fn plain_client_with_fec_server() {
    let (pair, x) = exchange(
        2,
        fec("rs", ALL, Signal),
        plain(),
        link(10, 0.02),
        link(10, 0.02),
        300_000,
    );
    let s = stats(&pair, &x, false).unwrap();
    assert_eq!((s.source_symbols_sent, s.repair_symbols_sent), (0, 0));
    assert!(stats(&pair, &x, true).is_none());
}

#[test]
fn different_schemes_per_direction() {
    let (pair, x) = exchange(
        3,
        fec("rlc(16,4)", ALL, Signal),
        fec("rs(10,5)", ALL, Signal),
        link(10, 0.03),
        link(10, 0.03),
        400_000,
    );
    let c = stats(&pair, &x, true).unwrap();
    let s = stats(&pair, &x, false).unwrap();
    assert_eq!(c.sending, Some(SchemeId::ReedSolomon));
    assert_eq!(s.receiving, Some(SchemeId::ReedSolomon));
    assert_eq!(s.sending, Some(SchemeId::RlcGf256));
    assert_eq!(c.receiving, Some(SchemeId::RlcGf256));
    assert!(c.repair_symbols_sent > 0 && s.repair_symbols_sent > 0);
    assert!(
        c.symbols_recovered > 0 && s.symbols_recovered > 0,
        "{c:?} {s:?}"
    );
}

#[test]
fn sender_uses_only_what_the_receiver_decodes() {
    // The server decodes XOR only; the client wants to send RLC: it sends nothing, while
    // the server's XOR reaches the client, which decodes everything.
    let (pair, x) = exchange(
        4,
        fec("xor", &[SchemeId::Xor], Signal),
        fec("rlc", ALL, Signal),
        link(10, 0.02),
        link(10, 0.02),
        300_000,
    );
    let c = stats(&pair, &x, true).unwrap();
    let s = stats(&pair, &x, false).unwrap();
    assert_eq!(
        (c.sending, c.source_symbols_sent, c.repair_symbols_sent),
        (None, 0, 0)
    );
    assert_eq!(s.sending, Some(SchemeId::Xor));
    assert!(s.repair_symbols_sent > 0);
    // A receiver that decodes nothing gets no repair either.
    let (pair, x) = exchange(
        5,
        fec("rlc", ALL, Signal),
        fec("none", &[], Signal),
        link(10, 0.0),
        link(10, 0.0),
        50_000,
    );
    let s = stats(&pair, &x, false).unwrap();
    assert_eq!((s.source_symbols_sent, s.repair_symbols_sent), (0, 0));
}

#[test]
fn fec_window_from_the_receiver_reshapes_the_senders_code() {
    use qfec_fec::FecExtension;
    use qfec_testkit::{Exchange, Pair, payload};
    use std::time::Duration;

    let mut pair = Pair::new(6, fec("rs", ALL, Signal), link(10, 0.02), link(10, 0.02));
    let ch = pair.connect(fec("none", ALL, Signal));
    let mut x = Exchange::new(ch, b"get".to_vec(), payload(3_000_000, 6));
    let server_repairs = |p: &Pair, x: &Exchange| {
        let c = p.server.connection(x.server.unwrap()).unwrap();
        c.extension::<FecExtension>()
            .unwrap()
            .stats()
            .repair_symbols_sent
    };
    let set_window = |p: &mut Pair, x: &Exchange, w: u64| {
        let c = p.client.connection_mut(x.client).unwrap();
        c.extension_mut::<FecExtension>()
            .unwrap()
            .set_coding_window(w);
    };
    // A first part with the full window.
    assert!(!pair.run_until(Duration::from_millis(300), |p| x.drive(p)));
    let before = server_repairs(&pair, &x);
    assert!(before > 0);
    // Window 0: the server stops protecting (give the FEC_WINDOW and the repairs in flight
    // a moment).
    set_window(&mut pair, &x, 0);
    pair.run_until(Duration::from_millis(100), |p| x.drive(p));
    let stopped = server_repairs(&pair, &x);
    pair.run_until(Duration::from_millis(300), |p| x.drive(p));
    assert_eq!(server_repairs(&pair, &x), stopped, "repairs after window 0");
    // Window 16: protection resumes with Reed-Solomon shrunk to fit (k + m <= 16).
    set_window(&mut pair, &x, 16);
    assert!(x.run(&mut pair, Duration::from_secs(60)), "{:?}", x.error);
    assert!(server_repairs(&pair, &x) > stopped);
    common::assert_same(&x.flows[0].received, &x.flows[1].data, "download");
}

/// A transport decoding every scheme with coding window `window`, sending `send`.
fn windowed(send: &str, window: u64) -> qfec_proto::TransportConfig {
    let mut t = common::plain();
    let mut c = qfec_fec::FecConfig::new(qfec_fec::parse_fec(send).unwrap());
    c.coding_window = window;
    c.install(&mut t);
    t
}

/// Regression: the receiver sized its XOR decoder with k = window / depth while the sender
/// fits blocks of extent (k - 1) * depth + 1, so interleaved XOR at a window of 11-19 closed
/// the connection.
#[test]
fn interleaved_xor_fills_a_small_coding_window() {
    for window in [11, 15, 19] {
        let (pair, x) = exchange(
            7,
            windowed("xor(2,10)", 64),
            windowed("none", window),
            link(10, 0.03),
            link(10, 0.03),
            300_000,
        );
        let s = stats(&pair, &x, false).unwrap();
        assert!(s.repair_symbols_sent > 0, "{window}: {s:?}");
    }
}

/// Regression: a receiver that raised its coding window kept a decoder built for the old
/// one and closed the connection on the first wider repair.
#[test]
fn raising_the_coding_window_rebuilds_the_decoder() {
    use qfec_fec::FecExtension;
    use qfec_testkit::{Exchange, Pair, payload};
    use std::time::Duration;

    let mut pair = Pair::new(8, windowed("rlc", 64), link(10, 0.03), link(10, 0.03));
    let ch = pair.connect(windowed("none", 8));
    let mut x = Exchange::new(ch, b"get".to_vec(), payload(2_000_000, 8));
    assert!(!pair.run_until(Duration::from_millis(300), |p| x.drive(p)));
    let c = pair.client.connection_mut(x.client).unwrap();
    c.extension_mut::<FecExtension>()
        .unwrap()
        .set_coding_window(64);
    assert!(x.run(&mut pair, Duration::from_secs(60)), "{:?}", x.error);
    common::assert_same(&x.flows[0].received, &x.flows[1].data, "download");
    assert!(stats(&pair, &x, true).unwrap().symbols_recovered > 0);
}
