//! Endpoints remember what the path to a peer showed (issue 22): a connection that ends
//! leaves its path's loss pattern in its endpoint's memory, the next connection to or from
//! that address starts with it, and a server's NEW_TOKEN token carries it, so that a client
//! coming back to a restarted server (or another instance sharing the token key) brings it
//! along.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use qfec_proto::{
    ClientConfig, ClientCryptoConfig, ConnectionHandle, Endpoint, EndpointConfig, ServerConfig,
    TransportConfig,
};
use qfec_testkit::{ALPN, LinkSpec, Pair, payload, server_crypto};

fn lossy_pair(seed: u64, loss: f64) -> Pair {
    let link = |loss| LinkSpec {
        delay: Duration::from_millis(20),
        loss,
        ..LinkSpec::default()
    };
    Pair::new(seed, TransportConfig::default(), link(0.0), link(loss))
}

/// A 200 kB download on a new connection (with `token`), closed and drained on both sides;
/// returns the client's and the server's connection handles.
fn visit(pair: &mut Pair, token: Option<Vec<u8>>) -> (ConnectionHandle, ConnectionHandle) {
    let mut cc = ClientConfig::new(ClientCryptoConfig::insecure(&[ALPN]));
    cc.token = token;
    let ch = pair.connect_with(cc);
    let data = payload(200_000, 7);
    let (sh, done, got) = pair.download(ch, &data, Duration::from_secs(60));
    assert!(done && got == data, "the download arrives whole");
    let sh = sh.expect("accepted");
    let now = pair.now;
    pair.client
        .connection_mut(ch)
        .unwrap()
        .close(now, 0, b"bye");
    pair.run_until(Duration::from_secs(30), |p| {
        p.client.connection(ch).is_none_or(|c| c.is_drained())
            && p.server.connection(sh).is_none_or(|c| c.is_drained())
    });
    (ch, sh)
}

fn ip(addr: std::net::SocketAddr) -> IpAddr {
    addr.ip()
}

/// The NEW_TOKEN token client connection `ch` kept.
fn token_of(pair: &Pair, ch: ConnectionHandle) -> Vec<u8> {
    pair.client
        .connection(ch)
        .unwrap()
        .new_token()
        .expect("the server offered a token")
        .to_vec()
}

/// A server endpoint as `Pair` makes it, with `config` (a restart: same seed, same token
/// key, empty memory).
fn server_endpoint(config: EndpointConfig, seed: u64) -> Endpoint {
    let mut sc = ServerConfig::new(server_crypto());
    sc.transport = Arc::new(TransportConfig::default());
    Endpoint::new(Arc::new(config), Some(Arc::new(sc)), seed)
}

#[test]
fn the_next_connection_starts_from_what_the_path_showed() {
    let mut pair = lossy_pair(71, 0.05);
    let (ch, sh) = visit(&mut pair, None);
    let server_saw = pair.server.connection(sh).unwrap().path_stats().loss;
    assert!(
        server_saw.rate > 0.0,
        "the server saw losses: {server_saw:?}"
    );
    assert!(
        pair.server
            .connection(sh)
            .unwrap()
            .remembered_loss()
            .is_none(),
        "the first connection knew nothing"
    );
    let token = token_of(&pair, ch);
    let remembered = pair
        .server
        .remembered_loss(pair.now, ip(pair.client_addr))
        .expect("the server remembers the client's address");
    assert!((remembered.rate - server_saw.rate).abs() < 1e-9);
    assert!(
        pair.client
            .remembered_loss(pair.now, ip(pair.server_addr))
            .is_some(),
        "the client remembers the server's address"
    );

    // The next connection from that address starts with it, on both sides.
    let (ch2, sh2) = visit(&mut pair, Some(token.clone()));
    let prior = pair.server.connection(sh2).unwrap().remembered_loss();
    assert_eq!(prior.map(|p| p.rate), Some(remembered.rate));
    assert!(
        pair.client
            .connection(ch2)
            .unwrap()
            .remembered_loss()
            .is_some()
    );
    // Two connections' worth now, both lossy.
    let both = pair
        .server
        .remembered_loss(pair.now, ip(pair.client_addr))
        .unwrap();
    assert!(both.samples > remembered.samples && both.rate > 0.0);

    // A restarted server (same token key, empty memory) learns it from the token, which
    // the server refreshed as the connection learned its path.
    let token2 = token_of(&pair, ch2);
    assert_ne!(token2, token);
    pair.server = server_endpoint(EndpointConfig::default(), 71);
    assert!(
        pair.server
            .remembered_loss(pair.now, ip(pair.client_addr))
            .is_none()
    );
    let (_, sh3) = visit(&mut pair, Some(token2));
    let carried = pair
        .server
        .connection(sh3)
        .unwrap()
        .remembered_loss()
        .expect("the token carried the path's estimate");
    assert!(carried.rate > 0.0 && carried.samples >= 16.0, "{carried:?}");
    assert!(
        (carried.rate - both.rate).abs() < 0.5 * both.rate,
        "about what the server knew when it sealed the token: {carried:?} vs {both:?}"
    );
}

#[test]
fn a_clean_path_is_remembered_clean_and_nothing_without_a_handshake() {
    let mut pair = lossy_pair(72, 0.0);
    visit(&mut pair, None);
    let r = pair
        .server
        .remembered_loss(pair.now, ip(pair.client_addr))
        .unwrap();
    assert_eq!(r.rate, 0.0);
    assert!(r.samples > 0.0);

    // A client whose Initials never get an answer through (every server packet lost):
    // the server learns nothing of an address that did not prove itself.
    let mut pair = lossy_pair(73, 1.0);
    let ch = pair.connect(TransportConfig::default());
    pair.run_until(Duration::from_secs(3), |p| {
        while p.server.accept().is_some() {}
        false
    });
    let now = pair.now;
    if let Some(c) = pair.client.connection_mut(ch) {
        c.close(now, 0, b"gone");
    }
    pair.run_until(Duration::from_secs(60), |_| false);
    assert!(
        pair.server
            .remembered_loss(pair.now, ip(pair.client_addr))
            .is_none()
    );
}

#[test]
fn an_endpoint_without_memory_remembers_nothing_and_tokens_carry_nothing() {
    let mut pair = lossy_pair(74, 0.05);
    let forgetful = || EndpointConfig {
        path_memory_capacity: 0,
        ..EndpointConfig::default()
    };
    pair.server = server_endpoint(forgetful(), 74);
    pair.client = Endpoint::new(Arc::new(forgetful()), None, 74 ^ 0x5555);
    let (ch, _) = visit(&mut pair, None);
    assert!(
        pair.server
            .remembered_loss(pair.now, ip(pair.client_addr))
            .is_none()
    );
    let token = token_of(&pair, ch);
    // Even a server that remembers reads nothing from that token.
    pair.server = server_endpoint(EndpointConfig::default(), 74);
    let (ch2, sh2) = visit(&mut pair, Some(token));
    assert!(
        pair.server
            .connection(sh2)
            .unwrap()
            .remembered_loss()
            .is_none()
    );
    assert!(
        pair.client
            .connection(ch2)
            .unwrap()
            .remembered_loss()
            .is_none()
    );
}
