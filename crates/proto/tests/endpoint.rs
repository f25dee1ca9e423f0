//! Endpoint behaviours under load and with tokens (issue 13): half-open handshakes are
//! bounded and answered with Retry under a flood, tokens from NEW_TOKEN skip validation,
//! tokens the server cannot use count as none, and idle connections are not visited.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use qfec_proto::{ClientConfig, ClientCryptoConfig, ConnectionHandle, TransportConfig};
use qfec_testkit::{ALPN, Datagram, LinkSpec, Pair};

/// Counts the Retry packets the server sends.
fn count_retries(pair: &mut Pair) -> Rc<Cell<u32>> {
    let retries = Rc::new(Cell::new(0));
    let seen = retries.clone();
    pair.drop_hook = Some(Box::new(move |d: &Datagram<'_>| {
        // Long header, fixed bit, type 3.
        if !d.to_server && d.data.first().is_some_and(|b| b & 0xf0 == 0xf0) {
            seen.set(seen.get() + 1);
        }
        false
    }));
    retries
}

fn connect_with_token(pair: &mut Pair, token: Option<Vec<u8>>) -> ConnectionHandle {
    let mut cc = ClientConfig::new(ClientCryptoConfig::insecure(&[ALPN]));
    cc.token = token;
    pair.client
        .connect(pair.now, cc, pair.server_addr, "localhost")
        .unwrap()
}

fn confirmed(pair: &mut Pair, ch: ConnectionHandle) -> bool {
    pair.run_until(Duration::from_secs(5), |p| {
        while p.server.accept().is_some() {}
        p.client.connection(ch).unwrap().handshake_confirmed()
    })
}

fn retry_server(seed: u64) -> Pair {
    Pair::with_server(
        seed,
        TransportConfig::default(),
        LinkSpec::default(),
        LinkSpec::default(),
        |s| s.retry = true,
    )
}

#[test]
fn a_token_from_new_token_skips_the_retry() {
    // The first connection is validated by a Retry (checked by `new_token_server`).
    let (mut pair, retries, token) = new_token_server(41, Duration::from_secs(24 * 3600));
    let second = connect_with_token(&mut pair, Some(token));
    assert!(confirmed(&mut pair, second));
    assert_eq!(
        retries.get(),
        1,
        "the token proved the address: no second Retry"
    );
}

#[test]
fn a_token_the_server_cannot_use_counts_as_none() {
    // Without Retry: accepted as if it carried no token.
    let mut pair = Pair::new(
        42,
        TransportConfig::default(),
        LinkSpec::default(),
        LinkSpec::default(),
    );
    let ch = connect_with_token(&mut pair, Some(vec![0xab; 60]));
    assert!(
        confirmed(&mut pair, ch),
        "a stale token must not strand the client"
    );
    // With Retry: the server validates the address as for a client without a token.
    let mut pair = retry_server(43);
    let retries = count_retries(&mut pair);
    let ch = connect_with_token(&mut pair, Some(vec![0xcd; 60]));
    assert!(confirmed(&mut pair, ch));
    assert_eq!(retries.get(), 1);
}

#[test]
fn a_handshake_flood_is_bounded_and_answered_with_retry() {
    let mut pair = Pair::with_server(
        44,
        TransportConfig::default(),
        LinkSpec::default(),
        LinkSpec::default(),
        |s| {
            s.retry_above_half_open = 3;
            s.max_half_open = 5;
        },
    );
    let retries = count_retries(&mut pair);
    let clients: Vec<_> = (0..12)
        .map(|_| pair.connect(TransportConfig::default()))
        .collect();
    let mut most_half_open = 0;
    let ok = pair.run_until(Duration::from_secs(20), |p| {
        while p.server.accept().is_some() {}
        most_half_open = most_half_open.max(p.server.half_open_count());
        clients
            .iter()
            .all(|&h| p.client.connection(h).unwrap().handshake_confirmed())
    });
    assert!(ok, "every client gets through, Retry or not");
    assert!(
        most_half_open <= 5,
        "half-open handshakes reached {most_half_open}"
    );
    assert!(
        retries.get() >= 9,
        "beyond 3 handshakes in progress, new clients are asked to Retry ({} Retries)",
        retries.get()
    );
    assert_eq!(pair.server.half_open_count(), 0);
}

#[test]
fn only_connections_that_heard_something_are_reported_active() {
    let mut pair = Pair::new(
        45,
        TransportConfig::default(),
        LinkSpec::default(),
        LinkSpec::default(),
    );
    let clients: Vec<_> = (0..50)
        .map(|_| pair.connect(TransportConfig::default()))
        .collect();
    assert!(pair.run_until(Duration::from_secs(10), |p| {
        while p.server.accept().is_some() {}
        clients
            .iter()
            .all(|&h| p.client.connection(h).unwrap().handshake_confirmed())
    }));
    // Let every acknowledgement settle, then forget what was active.
    pair.run_until(Duration::from_secs(1), |_| false);
    let mut active = Vec::new();
    pair.server.drain_active(&mut active);
    active.clear();
    // One client pings; only its server connection has news.
    let c = pair.client.connection_mut(clients[7]).unwrap();
    c.ping();
    pair.run_until(Duration::from_millis(100), |_| false);
    pair.server.drain_active(&mut active);
    assert_eq!(active.len(), 1, "active: {active:?}");
    assert_eq!(pair.server.connection_count(), 50);
}

#[test]
fn an_expired_retry_token_is_answered_with_invalid_token() {
    // The Retry token outlives its 1 ms lifetime on a 40 ms round trip: the client, which
    // will not take a second Retry, must hear INVALID_TOKEN instead of waiting for a timeout.
    let link = LinkSpec {
        delay: Duration::from_millis(20),
        ..LinkSpec::default()
    };
    let mut pair = Pair::with_server(46, TransportConfig::default(), link.clone(), link, |s| {
        s.retry = true;
        s.retry_token_lifetime = Duration::from_millis(1);
    });
    let ch = pair.connect(TransportConfig::default());
    let start = pair.now;
    let closed = pair.run_until(Duration::from_secs(5), |p| {
        p.client.connection(ch).unwrap().error().is_some()
    });
    assert!(closed);
    let err = pair.client.connection(ch).unwrap().error().cloned();
    assert!(
        matches!(
            err,
            Some(qfec_proto::ConnectionError::ConnectionClosed { code: 0x0b, .. })
        ),
        "{err:?}"
    );
    assert!(pair.now.saturating_duration_since(start) < Duration::from_millis(500));
    assert!(
        pair.server.accept().is_none(),
        "the application never sees it"
    );
    // The endpoint frees the refused connection once it has drained.
    pair.run_until(Duration::from_secs(5), |_| false);
    assert_eq!(pair.server.connection_count(), 0);
    assert_eq!(pair.server.half_open_count(), 0);
}

/// Connects and lets the first Initial reach the server; once the server's Retry is on its
/// way, later client datagrams arrive from `moved_to` (the Retry token names the first
/// address).
fn retry_then_move(seed: u64, moved_to: &str) -> Option<qfec_proto::ConnectionError> {
    let mut pair = retry_server(seed);
    let retries = count_retries(&mut pair);
    let ch = pair.connect(TransportConfig::default());
    assert!(pair.run_until(Duration::from_secs(1), |_| retries.get() == 1));
    pair.client_addr = moved_to.parse().unwrap();
    pair.run_until(Duration::from_secs(5), |p| {
        while p.server.accept().is_some() {}
        let c = p.client.connection(ch).unwrap();
        c.error().is_some() || c.handshake_confirmed()
    });
    assert_eq!(retries.get(), 1, "the client takes one Retry only");
    assert!(
        pair.server.accept().is_none(),
        "the application never sees a connection for a misaddressed token"
    );
    pair.client.connection(ch).unwrap().error().cloned()
}

#[test]
fn a_retry_token_from_another_port_or_address_is_refused_with_invalid_token() {
    // The testkit's client sends from 10.0.0.1:5000.
    for moved_to in ["10.0.0.1:5001", "10.0.0.7:5000"] {
        let err = retry_then_move(47, moved_to);
        assert!(
            matches!(
                err,
                Some(qfec_proto::ConnectionError::ConnectionClosed { code: 0x0b, .. })
            ),
            "token presented from {moved_to}: {err:?}"
        );
    }
    // The control: from the address the token names, the handshake completes.
    assert_eq!(retry_then_move(47, "10.0.0.1:5000"), None);
}

/// A retry server whose first client connection received a NEW_TOKEN token; returns the
/// token. NEW_TOKEN tokens live `lifetime`.
fn new_token_server(seed: u64, lifetime: Duration) -> (Pair, Rc<Cell<u32>>, Vec<u8>) {
    let mut pair = Pair::with_server(
        seed,
        TransportConfig::default(),
        LinkSpec::default(),
        LinkSpec::default(),
        |s| {
            s.retry = true;
            s.new_token_lifetime = Some(lifetime);
        },
    );
    let retries = count_retries(&mut pair);
    let first = pair.connect(TransportConfig::default());
    assert!(confirmed(&mut pair, first));
    pair.run_until(Duration::from_millis(200), |_| false);
    let token = pair
        .client
        .connection(first)
        .unwrap()
        .new_token()
        .expect("the server offers a token after the handshake")
        .to_vec();
    assert_eq!(retries.get(), 1);
    (pair, retries, token)
}

#[test]
fn a_new_token_binds_the_ip_address() {
    // Another port of the same address: a client's next connection comes from a new port,
    // and the token still proves the address (no Retry).
    let (mut pair, retries, token) = new_token_server(48, Duration::from_secs(3600));
    pair.client_addr = "10.0.0.1:6000".parse().unwrap();
    let ch = connect_with_token(&mut pair, Some(token));
    assert!(confirmed(&mut pair, ch));
    assert_eq!(retries.get(), 1, "same IP address, other port: no Retry");
    // Another address: the token counts as none, so the server asks for a Retry, and the
    // client still gets through.
    let (mut pair, retries, token) = new_token_server(48, Duration::from_secs(3600));
    pair.client_addr = "10.0.0.9:5000".parse().unwrap();
    let ch = connect_with_token(&mut pair, Some(token));
    assert!(confirmed(&mut pair, ch));
    assert_eq!(retries.get(), 2, "another IP address: validated by a Retry");
}

#[test]
fn an_expired_new_token_counts_as_none() {
    let (mut pair, retries, token) = new_token_server(49, Duration::from_secs(2));
    // Still fresh after one second.
    pair.run_until(Duration::from_secs(1), |_| false);
    let ch = connect_with_token(&mut pair, Some(token.clone()));
    assert!(confirmed(&mut pair, ch));
    assert_eq!(retries.get(), 1, "a fresh token skips the Retry");
    // Expired two seconds later.
    pair.run_until(Duration::from_secs(2), |_| false);
    let ch = connect_with_token(&mut pair, Some(token));
    assert!(
        confirmed(&mut pair, ch),
        "an expired token must not strand the client"
    );
    assert_eq!(retries.get(), 2, "an expired token is validated by a Retry");
}
