//! Path MTU discovery in virtual time (DPLPMTUD, RFC 8899, RFC 9000 §14.3): probes find the
//! largest datagram a link carries, up to the configured bound and the peer's
//! max_udp_payload_size; a lost probe is no congestion signal; a path whose MTU shrinks
//! under the connection (a black hole) falls back to 1200 bytes, and the download goes on.

use std::time::Duration;

use qfec_proto::{ConnectionHandle, Dir, MtuDiscoveryConfig, TransportConfig};
use qfec_testkit::{LinkSpec, Pair, payload};

fn transport(upper: u16) -> TransportConfig {
    TransportConfig {
        mtu_discovery: Some(MtuDiscoveryConfig {
            upper_bound: upper,
            raise_interval: Duration::from_secs(600),
        }),
        ..TransportConfig::default()
    }
}

fn link(mtu: Option<usize>) -> LinkSpec {
    LinkSpec {
        delay: Duration::from_millis(15),
        rate: 50_000_000,
        mtu,
        ..LinkSpec::default()
    }
}

/// Connects, then downloads `size` bytes from the server; returns the pair, both handles
/// and whether the download finished within `within`.
fn download(
    mut pair: Pair,
    transport: TransportConfig,
    size: usize,
    within: Duration,
) -> (Pair, ConnectionHandle, ConnectionHandle, bool) {
    let ch = pair.connect(transport);
    let data = payload(size, 9);
    let (sh, done, got) = pair.download(ch, &data, within);
    if done {
        let first = got.iter().zip(&data).position(|(a, b)| a != b);
        assert!(
            got == data,
            "the download arrived corrupted: {} of {} bytes, first difference at {first:?}",
            got.len(),
            data.len()
        );
    }
    (pair, ch, sh.unwrap(), done)
}

#[test]
fn probes_find_the_largest_datagram_the_link_carries() {
    // The link carries 4000-byte datagrams; the endpoints would go up to 9000.
    let t = transport(9000);
    let pair = Pair::new(1, t.clone(), link(Some(4000)), link(Some(4000)));
    let (mut pair, ch, sh, done) = download(pair, t, 3_000_000, Duration::from_secs(30));
    assert!(done);
    // The search goes on after the download (probes need no data): three lost probes of a
    // size before halving.
    pair.run_until(Duration::from_secs(20), |_| false);
    for (name, c) in [
        ("server", pair.server.connection(sh).unwrap()),
        ("client", pair.client.connection(ch).unwrap()),
    ] {
        let mtu = c.path_stats().mtu;
        assert!((3980..=4000).contains(&mtu), "{name}: {mtu}");
        let s = c.stats();
        assert!(s.pmtu_probes_sent > 0, "{name}: {s:?}");
        // Lost probes (9000, then halves above 4000) are not losses to congestion control.
        assert_eq!(s.congestion_events, 0, "{name}: {s:?}");
        assert_eq!(s.pmtu_black_holes, 0);
    }
    // Most of the download went in datagrams larger than the 1452 bytes it started with
    // (the search took part of it: each size lost three probes before the next halving).
    let server = pair.server.connection(sh).unwrap().stats();
    let mean = server.udp_tx_bytes / server.udp_tx_datagrams;
    assert!(mean > 2000, "mean datagram {mean} B");
}

#[test]
fn the_peers_max_udp_payload_size_bounds_the_search() {
    // The client accepts at most 2000-byte datagrams (its max_udp_payload_size: its own
    // search bound); the link would carry anything.
    let server = transport(9000);
    let client = transport(2000);
    let pair = Pair::new(2, server, link(None), link(None));
    let (pair, _, sh, done) = download(pair, client, 1_000_000, Duration::from_secs(30));
    assert!(done);
    assert_eq!(pair.server.connection(sh).unwrap().path_stats().mtu, 2000);
}

#[test]
fn without_discovery_every_datagram_keeps_the_configured_size() {
    let t = TransportConfig::default();
    let pair = Pair::new(3, t.clone(), link(None), link(None));
    let (pair, _, sh, done) = download(pair, t, 1_000_000, Duration::from_secs(30));
    assert!(done);
    let s = pair.server.connection(sh).unwrap();
    assert_eq!(s.path_stats().mtu, 1452);
    assert_eq!(s.stats().pmtu_probes_sent, 0);
}

/// The route changes under a connection that found 4000 bytes: from then on the link
/// carries at most 1400. Large packets stop arriving, the black hole is detected, the path
/// goes back to 1200 bytes, and the download finishes.
#[test]
fn a_black_hole_falls_back_to_1200_bytes_and_the_download_finishes() {
    let t = transport(4000);
    let mut pair = Pair::new(4, t.clone(), link(None), link(None));
    let ch = pair.connect(t);
    let mut sh = None;
    pair.run_until(Duration::from_secs(5), |p| {
        while let Some(h) = p.server.accept() {
            sh = Some(h);
        }
        sh.is_some_and(|h| p.server.connection(h).unwrap().path_stats().mtu == 4000)
    });
    let sh = sh.unwrap();
    assert_eq!(pair.server.connection(sh).unwrap().path_stats().mtu, 4000);
    let data = payload(3_000_000, 4);
    let s = pair.server.connection_mut(sh).unwrap();
    let id = s.open_stream(Dir::Uni).unwrap();
    s.write(id, &data).unwrap();
    s.finish(id).unwrap();
    pair.run_until(Duration::from_millis(100), |_| false);
    // The route changes.
    pair.s2c.mtu = Some(1400);
    pair.c2s.mtu = Some(1400);
    let (done, got) = pair.read_uni(ch, Duration::from_secs(60));
    let s = pair.server.connection(sh).unwrap();
    assert!(
        done,
        "download stalled: {} bytes, {:?}",
        got.len(),
        s.stats()
    );
    assert!(got == data);
    assert!(s.stats().pmtu_black_holes >= 1, "{:?}", s.stats());
    assert!(s.path_stats().mtu <= 1400, "{}", s.path_stats().mtu);
}

/// A client that moves to a new address searches the new path's MTU afresh (RFC 9000
/// §14.3): it sends at its starting size again, then probes up to what the path carries.
#[test]
fn a_migrated_client_searches_the_new_paths_mtu_again() {
    let t = transport(4000);
    let mut pair = Pair::new(6, t.clone(), link(None), link(None));
    let ch = pair.connect(t);
    let ok = pair.run_until(Duration::from_secs(5), |p| {
        while p.server.accept().is_some() {}
        p.client.connection(ch).unwrap().path_stats().mtu == 4000
    });
    assert!(ok, "the first path's MTU was not found");
    let changes = pair.client.connection(ch).unwrap().stats().path_mtu_changes;
    let new: std::net::SocketAddr = "10.0.0.1:6000".parse().unwrap();
    pair.client_addr = new;
    let now = pair.now;
    pair.client
        .connection_mut(ch)
        .unwrap()
        .migrate(now, new)
        .unwrap();
    assert_eq!(pair.client.connection(ch).unwrap().path_stats().mtu, 1452);
    let ok = pair.run_until(Duration::from_secs(5), |p| {
        p.client.connection(ch).unwrap().path_stats().mtu == 4000
    });
    assert!(ok, "the new path's MTU was not found");
    assert!(pair.client.connection(ch).unwrap().stats().path_mtu_changes > changes);
}
