//! Multipath QUIC (draft-ietf-quic-multipath-21) between two qfec endpoints over the
//! virtual-time harness: negotiation, opening and validating a second path, sharing a
//! transfer, abandoning a path mid-transfer, a path going dark, and the two schedulers.
//! Every transfer is checked byte for byte.

use std::net::SocketAddr;
use std::time::Duration;

use qfec_proto::connection::abandon_code;
use qfec_proto::{
    ConnectionHandle, MultipathConfig, PathError, PathId, PathState, Scheduler, TransportConfig,
};
use qfec_testkit::{Exchange, LinkSpec, Pair, payload};

fn multipath(scheduler: Scheduler) -> TransportConfig {
    TransportConfig {
        multipath: Some(MultipathConfig {
            max_path_id: 3,
            scheduler: scheduler.factory(),
        }),
        ..TransportConfig::default()
    }
}

fn link(delay_ms: u64, mbps: u64) -> LinkSpec {
    LinkSpec {
        delay: Duration::from_millis(delay_ms),
        rate: mbps * 1_000_000,
        ..LinkSpec::default()
    }
}

const SECOND: &str = "10.0.1.1:5001";

/// A pair whose client has a second address (`SECOND`) on a slower path; established.
fn established(
    seed: u64,
    client: TransportConfig,
    server: TransportConfig,
) -> (Pair, ConnectionHandle) {
    let mut pair = Pair::new(seed, server, link(10, 20), link(10, 20));
    pair.add_path(SECOND.parse().unwrap(), link(25, 10), link(25, 10));
    let ch = pair.connect(client);
    assert!(pair.run_until(Duration::from_secs(5), |p| {
        while p.server.accept().is_some() {}
        p.client.connection(ch).unwrap().handshake_confirmed()
    }));
    (pair, ch)
}

fn open_second(pair: &mut Pair, ch: ConnectionHandle) -> PathId {
    let now = pair.now;
    let server = pair.server_addr;
    let c = pair.client.connection_mut(ch).unwrap();
    c.open_path(now, Some(SECOND.parse().unwrap()), server)
        .expect("a path ID with connection IDs on both sides")
}

/// A transfer both ways on the established connection (its server side already accepted).
fn exchange(pair: &Pair, ch: ConnectionHandle, up: Vec<u8>, down: Vec<u8>) -> Exchange {
    let mut x = Exchange::new(ch, up, down);
    x.server = pair.server.handles().first().copied();
    x
}

fn path_state(pair: &Pair, ch: ConnectionHandle, id: PathId) -> Option<PathState> {
    let c = pair.client.connection(ch).unwrap();
    c.paths_info().iter().find(|p| p.id == id).map(|p| p.state)
}

#[test]
fn multipath_needs_both_sides() {
    for (client, server) in [
        (multipath(Scheduler::MinRtt), TransportConfig::default()),
        (TransportConfig::default(), multipath(Scheduler::MinRtt)),
    ] {
        let (mut pair, ch) = established(1, client, server);
        let now = pair.now;
        let server_addr = pair.server_addr;
        let c = pair.client.connection_mut(ch).unwrap();
        assert_eq!(
            c.open_path(now, Some(SECOND.parse().unwrap()), server_addr),
            Err(PathError::NotNegotiated)
        );
        assert_eq!(c.path_ids().count(), 1);
        // And plain QUIC still moves data.
        let mut x = exchange(&pair, ch, payload(200_000, 1), payload(200_000, 2));
        assert!(x.run(&mut pair, Duration::from_secs(20)), "{:?}", x.error);
        assert_eq!(x.flows[0].received, x.flows[1].data);
        assert_eq!(x.flows[1].received, x.flows[0].data);
    }
}

#[test]
fn a_second_path_is_validated_then_shares_the_transfer() {
    let (mut pair, ch) = established(
        2,
        multipath(Scheduler::MinRtt),
        multipath(Scheduler::MinRtt),
    );
    let id = open_second(&mut pair, ch);
    assert_eq!(id, PathId(1));
    assert_eq!(path_state(&pair, ch, id), Some(PathState::Validating));
    assert!(pair.run_until(Duration::from_secs(2), |p| {
        path_state(p, ch, id) == Some(PathState::Validated)
    }));
    // The server validates the client's new address too before sending it data.
    let server = pair.server.handles()[0];
    assert!(pair.run_until(Duration::from_secs(2), |p| {
        let s = p.server.connection(server).unwrap().paths_info();
        s.len() == 2 && s.iter().all(|p| p.state == PathState::Validated)
    }));
    let sinfo = pair.server.connection(server).unwrap().paths_info();
    let second: SocketAddr = SECOND.parse().unwrap();
    assert_eq!(sinfo[1].remote, second);

    let before = pair.link_bytes.clone();
    let down = payload(4_000_000, 3);
    let up = payload(1_000_000, 4);
    let mut x = exchange(&pair, ch, up, down);
    assert!(x.run(&mut pair, Duration::from_secs(60)), "{:?}", x.error);
    assert_eq!(x.flows[0].received, x.flows[1].data, "download intact");
    assert_eq!(x.flows[1].received, x.flows[0].data, "upload intact");
    // Both paths carried a real share of both directions.
    for (dir, name) in ["upload", "download"].into_iter().enumerate() {
        let main = pair.link_bytes[0][dir] - before[0][dir];
        let extra = pair.link_bytes[1][dir] - before[1][dir];
        assert!(
            extra > 200_000 && main > 200_000,
            "{name}: main {main} B, second {extra} B"
        );
    }
    let info = pair.client.connection(ch).unwrap().paths_info();
    assert!(info[1].bytes_received > 500_000, "{info:?}");
    // Each path keeps its own RTT estimate: the second path is slower.
    assert!(info[1].stats.min_rtt > info[0].stats.min_rtt, "{info:?}");
}

#[test]
fn abandoning_the_handshake_path_mid_transfer_loses_nothing() {
    let (mut pair, ch) = established(
        3,
        multipath(Scheduler::MinRtt),
        multipath(Scheduler::MinRtt),
    );
    let id = open_second(&mut pair, ch);
    assert!(pair.run_until(Duration::from_secs(2), |p| {
        path_state(p, ch, id) == Some(PathState::Validated)
    }));
    let down = payload(3_000_000, 5);
    let mut x = exchange(&pair, ch, Vec::new(), down.clone());
    let mut abandoned = false;
    let done = pair.run_until(Duration::from_secs(60), |p| {
        if !abandoned && x.flows[0].received.len() > 1_000_000 {
            let now = p.now;
            let c = p.client.connection_mut(ch).unwrap();
            c.close_path(now, PathId(0), abandon_code::APPLICATION_ABANDON_PATH)
                .unwrap();
            abandoned = true;
        }
        x.drive(p)
    });
    assert!(done && x.error.is_none(), "{:?}", x.error);
    assert!(abandoned);
    assert_eq!(x.flows[0].received, down);
    // Three PTOs later both sides dropped the path entirely.
    pair.run_until(Duration::from_secs(3), |_| false);
    let ids: Vec<PathId> = pair.client.connection(ch).unwrap().path_ids().collect();
    assert_eq!(ids, [PathId(1)]);
    let server = pair.server.handles()[0];
    let ids: Vec<PathId> = pair.server.connection(server).unwrap().path_ids().collect();
    assert_eq!(ids, [PathId(1)]);
    // The last path cannot be abandoned: that is closing the connection.
    let now = pair.now;
    let c = pair.client.connection_mut(ch).unwrap();
    assert_eq!(
        c.close_path(now, PathId(1), abandon_code::NO_ERROR),
        Err(PathError::LastPath(PathId(1)))
    );
    assert!(c.is_established());
}

#[test]
fn a_path_that_goes_dark_hands_its_data_to_the_other() {
    let (mut pair, ch) = established(
        4,
        multipath(Scheduler::MinRtt),
        multipath(Scheduler::MinRtt),
    );
    let id = open_second(&mut pair, ch);
    assert!(pair.run_until(Duration::from_secs(2), |p| {
        path_state(p, ch, id) == Some(PathState::Validated)
    }));
    // The main (faster) link goes dark for good 300 ms into the transfer.
    let from =
        pair.now - qfec_proto::Instant::from_nanos(1_000_000_000) + Duration::from_millis(300);
    for spec in [&mut pair.c2s, &mut pair.s2c] {
        spec.blackholes.push((from, Duration::from_secs(3600)));
    }
    let down = payload(3_000_000, 6);
    let mut x = exchange(&pair, ch, Vec::new(), down.clone());
    assert!(x.run(&mut pair, Duration::from_secs(60)), "{:?}", x.error);
    assert_eq!(x.flows[0].received, down);
    assert!(pair.link_bytes[1][1] > 1_500_000, "{:?}", pair.link_bytes);
}

#[test]
fn a_path_that_comes_back_carries_data_again() {
    let (mut pair, ch) = established(
        8,
        multipath(Scheduler::MinRtt),
        multipath(Scheduler::MinRtt),
    );
    let id = open_second(&mut pair, ch);
    assert!(pair.run_until(Duration::from_secs(2), |p| {
        path_state(p, ch, id) == Some(PathState::Validated)
    }));
    // The main link is dark from 300 ms to 2 s into the transfer, then works again.
    let elapsed = pair.now - qfec_proto::Instant::from_nanos(1_000_000_000);
    let (from, to) = (
        elapsed + Duration::from_millis(300),
        elapsed + Duration::from_secs(2),
    );
    for spec in [&mut pair.c2s, &mut pair.s2c] {
        spec.blackholes.push((from, to));
    }
    let start = pair.now;
    let down = payload(12_000_000, 9);
    let mut x = exchange(&pair, ch, Vec::new(), down.clone());
    let mut at_recovery = None;
    let done = pair.run_until(Duration::from_secs(60), |p| {
        if at_recovery.is_none() && p.now >= start + Duration::from_millis(2500) {
            at_recovery = Some(p.link_bytes[0][1]);
        }
        x.drive(p)
    });
    assert!(done && x.error.is_none(), "{:?}", x.error);
    assert_eq!(x.flows[0].received, down);
    let after = pair.link_bytes[0][1] - at_recovery.expect("the transfer outlasted the outage");
    assert!(after > 2_000_000, "main link after its outage: {after} B");
}

#[test]
fn the_backup_scheduler_keeps_data_on_one_path() {
    let (mut pair, ch) = established(
        5,
        multipath(Scheduler::Backup),
        multipath(Scheduler::Backup),
    );
    let id = open_second(&mut pair, ch);
    assert!(pair.run_until(Duration::from_secs(2), |p| {
        path_state(p, ch, id) == Some(PathState::Validated)
    }));
    let before = pair.link_bytes.clone();
    let down = payload(2_000_000, 7);
    let mut x = exchange(&pair, ch, Vec::new(), down.clone());
    assert!(x.run(&mut pair, Duration::from_secs(60)), "{:?}", x.error);
    assert_eq!(x.flows[0].received, down);
    let main = pair.link_bytes[0][1] - before[0][1];
    let extra = pair.link_bytes[1][1] - before[1][1];
    assert!(main > 2_000_000, "main {main}");
    assert!(
        extra < main / 50,
        "the backup path idles: main {main}, backup {extra}"
    );
}

#[test]
fn a_path_marked_backup_carries_data_only_when_the_other_fails() {
    let (mut pair, ch) = established(
        6,
        multipath(Scheduler::MinRtt),
        multipath(Scheduler::MinRtt),
    );
    let id = open_second(&mut pair, ch);
    assert!(pair.run_until(Duration::from_secs(2), |p| {
        path_state(p, ch, id) == Some(PathState::Validated)
    }));
    // The client asks the server to use the second path only as a backup.
    pair.client
        .connection_mut(ch)
        .unwrap()
        .set_path_backup(id, true)
        .unwrap();
    pair.run_until(Duration::from_millis(200), |_| false);
    let before = pair.link_bytes.clone();
    let down = payload(2_000_000, 8);
    let mut x = exchange(&pair, ch, Vec::new(), down.clone());
    assert!(x.run(&mut pair, Duration::from_secs(60)), "{:?}", x.error);
    assert_eq!(x.flows[0].received, down);
    let extra = pair.link_bytes[1][1] - before[1][1];
    assert!(extra < 50_000, "server sent {extra} B on the backup path");
}

#[test]
fn only_the_client_opens_paths_and_only_when_ids_allow() {
    let mut client = multipath(Scheduler::MinRtt);
    client.multipath.as_mut().unwrap().max_path_id = 1;
    let (mut pair, ch) = established(7, client, multipath(Scheduler::MinRtt));
    let server = pair.server.handles()[0];
    let now = pair.now;
    let addr = pair.client_addr;
    assert_eq!(
        pair.server
            .connection_mut(server)
            .unwrap()
            .open_path(now, None, addr),
        Err(PathError::NotClient)
    );
    // Connection IDs for path 1 arrive with the first 1-RTT flights.
    pair.run_until(Duration::from_millis(200), |_| false);
    assert_eq!(open_second(&mut pair, ch), PathId(1));
    // Path IDs 0 and 1 are all the client allowed: a third path is blocked.
    let now = pair.now;
    let server_addr = pair.server_addr;
    let c = pair.client.connection_mut(ch).unwrap();
    assert_eq!(
        c.open_path(now, Some("10.0.2.1:5002".parse().unwrap()), server_addr),
        Err(PathError::OwnPathIdLimit(1))
    );
}

/// A download of 300 kB and 400 DATAGRAMs of 200 bytes over two paths of equal rate that
/// each lose 5 % of the packets, independently: the distinct DATAGRAMs that arrived, all
/// that arrived (copies included), the server's packets that carried a copy, and the
/// download bytes each link carried.
fn lossy_download(seed: u64, scheduler: Scheduler) -> (usize, usize, u64, [u64; 2]) {
    let lossy = |delay_ms, mbps| LinkSpec {
        loss: 0.05,
        ..link(delay_ms, mbps)
    };
    let config = || TransportConfig {
        max_datagram_frame_size: Some(1200),
        ..multipath(scheduler)
    };
    let mut pair = Pair::new(seed, config(), lossy(10, 20), lossy(10, 20));
    pair.add_path(SECOND.parse().unwrap(), lossy(12, 20), lossy(12, 20));
    let ch = pair.connect(config());
    assert!(pair.run_until(Duration::from_secs(5), |p| {
        while p.server.accept().is_some() {}
        p.client.connection(ch).unwrap().handshake_confirmed()
    }));
    let id = open_second(&mut pair, ch);
    assert!(pair.run_until(Duration::from_secs(3), |p| {
        path_state(p, ch, id) == Some(PathState::Validated)
    }));
    let before = pair.link_bytes.clone();
    let down = payload(300_000, 11);
    let mut x = exchange(&pair, ch, Vec::new(), down.clone());
    x.flows[1].datagrams_out = (0..400u32)
        .map(|i| {
            let mut d = i.to_be_bytes().to_vec();
            d.resize(200, i as u8);
            d
        })
        .collect();
    assert!(x.run(&mut pair, Duration::from_secs(60)), "{:?}", x.error);
    assert_eq!(x.flows[0].received, down, "{scheduler}: download intact");
    // The last DATAGRAMs (and their copies) arrive.
    pair.run_until(Duration::from_secs(1), |p| {
        x.drive(p);
        false
    });
    let got = &x.flows[0].datagrams_in;
    let distinct: std::collections::BTreeSet<&Vec<u8>> = got.iter().collect();
    let s = pair.server.connection(x.server.unwrap()).unwrap().stats();
    let carried = [0, 1].map(|i| pair.link_bytes[i][1] - before[i][1]);
    assert!(
        s.replicas_sent > 0 || s.replicas_dropped == 0,
        "copies dropped without a replicating scheduler: {s:?}"
    );
    (distinct.len(), got.len(), s.replicas_sent, carried)
}

/// Every packet goes on both paths: a DATAGRAM is lost only when both copies are (0.25 %
/// here, 5 % on one path).
#[test]
fn the_redundant_scheduler_sends_every_packet_on_both_paths() {
    let (distinct, all, copies, carried) = lossy_download(12, Scheduler::Redundant);
    let (distinct_minrtt, all_minrtt, copies_minrtt, _) = lossy_download(12, Scheduler::MinRtt);
    assert_eq!((copies_minrtt, all_minrtt), (0, distinct_minrtt));
    assert!(distinct >= 396, "redundant: {distinct} of 400 DATAGRAMs");
    assert!(
        distinct_minrtt <= 390,
        "minrtt: {distinct_minrtt} of 400 DATAGRAMs"
    );
    assert!(all > 700, "copies arrived too: {all}");
    assert!(copies > 150, "{copies} packets carried a copy");
    // Each path sends copies as its own window allows: more than half of everything on each
    // here (a copy that waited beyond a window's worth of them was dropped).
    let whole = 300_000 + 400 * 200;
    assert!(
        carried.iter().all(|&b| b > whole * 6 / 10),
        "each link carried most of it: {carried:?}"
    );
}
