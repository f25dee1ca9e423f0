//! Real-time DATAGRAMs under FEC: a recovered DATAGRAM reaches the application once and in
//! time, and no repair is sent for DATAGRAMs whose deadline has passed.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use common::{fec, link};
use qfec_fec::{FecExtension, FecStats, SchemeId};
use qfec_proto::{ConnectionHandle, Instant, RecoveredLossMode, TransportConfig};
use qfec_testkit::{Datagram, Pair};

const ALL: &[SchemeId] = &SchemeId::ALL;

/// Datagram `i` of a test: its index, then filler.
fn datagram(i: u8) -> Bytes {
    let mut d = vec![i; 1000];
    d[0] = i;
    Bytes::from(d)
}

fn fec_stats(pair: &Pair, client: ConnectionHandle) -> FecStats {
    pair.client
        .connection(client)
        .and_then(|c| c.extension::<FecExtension>())
        .map(|e| e.stats())
        .expect("client FEC extension")
}

/// Connects and waits until the handshake is over on both sides; the server's handle.
fn established(pair: &mut Pair, client: ConnectionHandle) -> ConnectionHandle {
    let mut server = None;
    let ok = pair.run_until(Duration::from_secs(5), |p| {
        if server.is_none() {
            server = p.server.accept();
        }
        server.is_some()
            && p.client
                .connection(client)
                .is_some_and(|c| c.is_established())
    });
    assert!(ok, "handshake did not complete");
    // Let the last handshake acknowledgements settle.
    pair.run_until(Duration::from_millis(500), |_| false);
    server.unwrap()
}

#[test]
fn a_recovered_datagram_is_delivered_once_and_in_time() {
    // The client sends four 1000-byte DATAGRAMs protected by RS(4,2); the link drops the
    // second. The server recovers it from the repairs, before its deadline.
    let owd = Duration::from_millis(40);
    let mut pair = Pair::new(
        3,
        fec("none", ALL, RecoveredLossMode::Signal),
        link(40, 0.0),
        link(40, 0.0),
    );
    let client = pair.connect(fec("rs(4,2)", ALL, RecoveredLossMode::Signal));
    let server = established(&mut pair, client);
    let mut big = 0;
    pair.drop_hook = Some(Box::new(move |d: &Datagram<'_>| {
        if !d.to_server || !d.is_short() || d.data.len() < 1000 {
            return false;
        }
        big += 1;
        big == 2
    }));
    let start = pair.now;
    let deadline = start + owd + Duration::from_millis(60);
    {
        let c = pair.client.connection_mut(client).unwrap();
        for i in 0..4 {
            c.send_datagram_with_deadline(datagram(i), deadline)
                .unwrap();
        }
    }
    let mut got: BTreeMap<u8, Vec<Instant>> = BTreeMap::new();
    pair.run_until(Duration::from_secs(3), |p| {
        let c = p.server.connection_mut(server).unwrap();
        while let Some(d) = c.recv_datagram() {
            assert_eq!(d, datagram(d[0]), "datagram bytes");
            got.entry(d[0]).or_default().push(p.now);
        }
        false
    });
    assert_eq!(got.len(), 4, "every datagram arrived: {got:?}");
    for (i, at) in &got {
        assert_eq!(at.len(), 1, "datagram {i} delivered {} times", at.len());
        assert!(
            at[0] <= deadline,
            "datagram {i} arrived {:?} after its deadline",
            at[0] - deadline
        );
    }
    let server_fec = pair
        .server
        .connection(server)
        .and_then(|c| c.extension::<FecExtension>())
        .map(|e| e.stats())
        .unwrap();
    assert_eq!(server_fec.symbols_recovered, 1, "{server_fec:?}");
    let cs = pair.client.connection(client).unwrap().stats();
    assert_eq!(cs.datagrams_expired, 0);
    assert_eq!(
        cs.packets_retransmitted, 0,
        "a DATAGRAM is never sent again"
    );
}

/// Sends one DATAGRAM protected by RS(1,20) (twenty repairs of one source symbol) with a
/// congestion window too small for them all: the rest wait an RTT for acknowledgements.
/// Returns the client's FEC counters once everything settled.
fn one_datagram_many_repairs(deadline_after: Duration) -> FecStats {
    let mut transport = fec("rs(1,20)", ALL, RecoveredLossMode::Signal);
    transport.pacing = false;
    transport.congestion_controller =
        std::sync::Arc::new(qfec_proto::recovery::cc::NewRenoConfig {
            initial_window_packets: 4,
            ..Default::default()
        });
    let mut pair = Pair::new(
        5,
        fec("none", ALL, RecoveredLossMode::Signal),
        link(100, 0.0),
        link(100, 0.0),
    );
    let client = pair.connect(transport);
    let server = established(&mut pair, client);
    let deadline = pair.now + deadline_after;
    pair.client
        .connection_mut(client)
        .unwrap()
        .send_datagram_with_deadline(datagram(7), deadline)
        .unwrap();
    let mut got = 0;
    pair.run_until(Duration::from_secs(3), |p| {
        let c = p.server.connection_mut(server).unwrap();
        while c.recv_datagram().is_some() {
            got += 1;
        }
        false
    });
    assert_eq!(got, 1, "the DATAGRAM itself arrives once");
    fec_stats(&pair, client)
}

#[test]
fn datagrams_past_their_deadline_get_no_repair() {
    // Deadline 20 ms after the one-way delay: the repairs still queued when the first
    // acknowledgements open the window (an RTT later) protect nothing playable.
    let late = one_datagram_many_repairs(Duration::from_millis(120));
    assert!(late.repairs_expired > 0, "{late:?}");
    assert!(late.repair_symbols_sent < 20, "{late:?}");
    assert_eq!(
        late.repair_symbols_sent + late.repairs_expired,
        20,
        "{late:?}"
    );
    // The same with a distant deadline: every repair goes out.
    let early = one_datagram_many_repairs(Duration::from_secs(10));
    assert_eq!(early.repairs_expired, 0, "{early:?}");
    assert_eq!(early.repair_symbols_sent, 20, "{early:?}");
}

#[test]
fn a_datagram_that_cannot_arrive_in_time_is_not_sent() {
    let mut pair = Pair::new(
        9,
        TransportConfig {
            max_datagram_frame_size: Some(1400),
            ..TransportConfig::default()
        },
        link(50, 0.0),
        link(50, 0.0),
    );
    let client = pair.connect(TransportConfig {
        max_datagram_frame_size: Some(1400),
        ..TransportConfig::default()
    });
    let server = established(&mut pair, client);
    // One-way delay 50 ms: a deadline 10 ms away cannot be met, one 80 ms away can.
    let now = pair.now;
    {
        let c = pair.client.connection_mut(client).unwrap();
        c.send_datagram_with_deadline(datagram(1), now + Duration::from_millis(10))
            .unwrap();
        c.send_datagram_with_deadline(datagram(2), now + Duration::from_millis(80))
            .unwrap();
    }
    let mut got = Vec::new();
    pair.run_until(Duration::from_secs(1), |p| {
        let c = p.server.connection_mut(server).unwrap();
        while let Some(d) = c.recv_datagram() {
            got.push(d[0]);
        }
        false
    });
    assert_eq!(got, vec![2]);
    assert_eq!(
        pair.client
            .connection(client)
            .unwrap()
            .stats()
            .datagrams_expired,
        1
    );
}
