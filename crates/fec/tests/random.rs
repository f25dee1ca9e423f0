//! No loss or reordering pattern makes FEC corrupt, lose or duplicate what the application
//! receives: stream bytes arrive whole and exact, datagrams at most once and unaltered.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use proptest::prelude::*;
use qfec_fec::SchemeId;
use qfec_proto::RecoveredLossMode;
use qfec_testkit::{Exchange, LinkSpec, Pair, payload};

const SCHEMES: [&str; 9] = [
    "xor",
    "xor(4,3)",
    "rs",
    "rs(6,2)",
    "rlc",
    "rlc(12,3,gf2)",
    "rquic",
    "rquic(ss=off)",
    "adaptive",
];

/// Datagram `i` of a side: its index, then bytes derived from it.
fn datagram(side: u8, i: u32) -> Vec<u8> {
    let mut d = vec![side];
    d.extend_from_slice(&i.to_be_bytes());
    d.extend(payload(
        200 + (i as usize % 700),
        u64::from(i) * 2 + u64::from(side),
    ));
    d
}

fn check_datagrams(got: &[Vec<u8>], side: u8, sent: u32) -> Result<(), TestCaseError> {
    let mut seen = HashSet::new();
    for d in got {
        prop_assert!(d.len() >= 5 && d[0] == side, "foreign datagram");
        let i = u32::from_be_bytes([d[1], d[2], d[3], d[4]]);
        prop_assert!(i < sent, "datagram {} never sent", i);
        prop_assert_eq!(d, &datagram(side, i), "datagram {} altered", i);
        prop_assert!(seen.insert(i), "datagram {} delivered twice", i);
    }
    Ok(())
}

/// One exchange of streams both ways and datagrams both ways over a lossy, jittery link.
fn exchange_is_exact(
    seed: u64,
    loss: f64,
    jitter_ms: u64,
    server_scheme: &str,
    client_scheme: &str,
    mask: bool,
) -> Result<(), TestCaseError> {
    let mode = if mask {
        RecoveredLossMode::Mask
    } else {
        RecoveredLossMode::Signal
    };
    let link = LinkSpec {
        delay: Duration::from_millis(10),
        jitter: Duration::from_millis(jitter_ms),
        loss,
        ..LinkSpec::default()
    };
    let mut pair = Pair::new(
        seed,
        common::fec(server_scheme, &SchemeId::ALL, mode),
        link.clone(),
        link,
    );
    let ch = pair.connect(common::fec(client_scheme, &SchemeId::ALL, mode));
    let mut x = Exchange::new(ch, payload(60_000, seed), payload(150_000, seed + 1));
    const N: u32 = 150;
    x.flows[0].datagrams_out = (0..N).map(|i| datagram(0, i)).collect();
    x.flows[1].datagrams_out = (0..N).map(|i| datagram(1, i)).collect();
    let ok = x.run(&mut pair, Duration::from_secs(300));
    prop_assert!(ok, "exchange failed: {:?}", x.error);
    common::assert_same(&x.flows[1].received, &x.flows[0].data, "client -> server");
    common::assert_same(&x.flows[0].received, &x.flows[1].data, "server -> client");
    // Datagrams that were still in flight when the streams completed may be missing.
    check_datagrams(&x.flows[1].datagrams_in, 0, N)?;
    check_datagrams(&x.flows[0].datagrams_in, 1, N)?;
    Ok(())
}

proptest! {
    // A fixed seed: the same 64 cases on every machine and run, as every random choice here
    // takes a seed (change the number to draw other cases).
    #![proptest_config(ProptestConfig {
        rng_seed: proptest::test_runner::RngSeed::Fixed(27),
        ..ProptestConfig::with_cases(64)
    })]
    #[test]
    fn no_loss_pattern_corrupts_loses_or_duplicates(
        seed in 1u64..1_000_000,
        loss in 0.0f64..0.25,
        jitter_ms in 0u64..30,
        server_scheme in prop::sample::select(SCHEMES.to_vec()),
        client_scheme in prop::sample::select(SCHEMES.to_vec()),
        mask in any::<bool>(),
    ) {
        exchange_is_exact(seed, loss, jitter_ms, server_scheme, client_scheme, mask)?;
    }
}

/// Regression: at 19.5 % loss each way the client's handshake probes backed off past the idle
/// timeout, so the connection died without completing its handshake.
#[test]
fn handshake_survives_heavy_loss() {
    exchange_is_exact(183_218, 0.195_142_103_399_411_32, 27, "xor", "xor", false).unwrap();
}

/// Regression, found by CI's random cases: at 18.5 % loss each way the client lost its
/// ClientHello in four PTOs in a row while the second probe of each carried a bare PING; the
/// server got one such PING (no ClientHello), and the client's idle timeout (30 s) came before
/// its next probe. A second probe now repeats the CRYPTO data.
#[test]
fn xor_both_ways_at_18_percent_loss_completes() {
    exchange_is_exact(772133, 0.18518873046114603, 1, "xor", "xor", false).unwrap();
}
