//! Shared helpers of the FEC tests: transport configurations and checked exchanges.
#![allow(dead_code)]

use std::time::Duration;

use qfec_fec::{FecConfig, FecExtension, FecStats, SchemeId};
use qfec_proto::{ConnectionHandle, RecoveredLossMode, TransportConfig};
use qfec_testkit::{Exchange, LinkSpec, Pair, payload};
use sha2::{Digest, Sha256};

/// A transport that sends `send` ("none" sends nothing) and decodes `decode`.
pub fn fec(send: &str, decode: &[SchemeId], mode: RecoveredLossMode) -> TransportConfig {
    let mut t = plain();
    let mut c = FecConfig::new(qfec_fec::parse_fec(send).unwrap());
    c.decode = decode.to_vec();
    c.mode = mode;
    c.install(&mut t);
    t
}

pub fn plain() -> TransportConfig {
    TransportConfig {
        max_datagram_frame_size: Some(1400),
        ..TransportConfig::default()
    }
}

/// The paper 003 DA2GC link: 0.468 Mb/s, 262 ms RTT.
pub fn da2gc() -> LinkSpec {
    LinkSpec {
        delay: Duration::from_millis(131),
        rate: 468_000,
        ..LinkSpec::default()
    }
}

/// A client's 8-byte request and the server's 1000-byte answer over `pair`'s connection
/// `ch`: how long after `start` the answer was whole (checked against what was sent), and
/// the exchange.
pub fn request_response(
    pair: &mut Pair,
    ch: ConnectionHandle,
    start: qfec_proto::Instant,
    seed: u64,
) -> (f64, Exchange) {
    request_response_of(pair, ch, start, seed, b"GET /1kB", 1000)
}

/// [`request_response`] with the request `request` and an answer of `len` bytes.
pub fn request_response_of(
    pair: &mut Pair,
    ch: ConnectionHandle,
    start: qfec_proto::Instant,
    seed: u64,
    request: &[u8],
    len: usize,
) -> (f64, Exchange) {
    let mut x = Exchange::new(ch, request.to_vec(), payload(len, seed));
    let mut done_at = None;
    let ok = pair.run_until(Duration::from_secs(30), |p| {
        let done = x.drive(p);
        if x.flows[0].complete && done_at.is_none() {
            done_at = Some(p.now);
        }
        done
    });
    assert!(ok && x.error.is_none(), "{:?}", x.error);
    assert_same(&x.flows[0].received, &x.flows[1].data, "response");
    ((done_at.unwrap() - start).as_secs_f64(), x)
}

pub fn link(delay_ms: u64, loss: f64) -> LinkSpec {
    LinkSpec {
        delay: Duration::from_millis(delay_ms),
        loss,
        ..LinkSpec::default()
    }
}

/// Runs an exchange of `len` bytes each way and checks both arrived identical.
pub fn exchange(
    seed: u64,
    server: TransportConfig,
    client: TransportConfig,
    c2s: LinkSpec,
    s2c: LinkSpec,
    len: usize,
) -> (Pair, Exchange) {
    let mut pair = Pair::new(seed, server, c2s, s2c);
    let ch = pair.connect(client);
    let mut x = Exchange::new(ch, payload(len, seed), payload(len, seed + 1));
    let ok = x.run(&mut pair, Duration::from_secs(120));
    assert!(ok, "exchange failed: {:?}", x.error);
    assert_same(&x.flows[1].received, &x.flows[0].data, "client -> server");
    assert_same(&x.flows[0].received, &x.flows[1].data, "server -> client");
    (pair, x)
}

pub fn assert_same(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    assert_eq!(
        Sha256::digest(got),
        Sha256::digest(want),
        "{what}: bytes differ"
    );
}

/// FEC counters of the client's (`client`) or the server's connection.
pub fn stats(pair: &Pair, x: &Exchange, client: bool) -> Option<FecStats> {
    let c = if client {
        pair.client.connection(x.client)?
    } else {
        pair.server.connection(x.server?)?
    };
    c.extension::<FecExtension>().map(|e| e.stats())
}

pub fn handle(x: &Exchange, client: bool) -> (bool, ConnectionHandle) {
    if client {
        (true, x.client)
    } else {
        (false, x.server.expect("server connection"))
    }
}
