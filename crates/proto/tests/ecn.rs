//! ECN in virtual time (RFC 9000 §13.4, RFC 9002 §7.1): marks that arrive validate the path
//! and every packet goes out ECT(0); a network that clears, re-marks or drops marked packets
//! makes validation fail and marking stop, and the transfer goes on; a CE mark reduces the
//! sender's window without any loss.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use qfec_proto::{ConnectionHandle, Dir, EcnCodepoint, EcnFailure, EcnState, TransportConfig};
use qfec_testkit::{LinkSpec, Pair, payload};

/// What one direction of the link carried: datagrams, and those sent marked ECT(0).
#[derive(Debug, Default, Clone, Copy)]
struct Marks {
    datagrams: u64,
    ect0: u64,
    /// Datagrams sent marked after the first unmarked one.
    ect0_after_unmarked: u64,
}

struct Run {
    pair: Pair,
    ch: ConnectionHandle,
    sh: ConnectionHandle,
    /// [to the server, to the client].
    marks: Rc<RefCell<[Marks; 2]>>,
    done: bool,
}

/// A `size`-byte download from the server over a 20 Mb/s, 40 ms RTT link whose routers
/// give each datagram the codepoint `network` returns (given the direction, the datagram's
/// index and the codepoint it was sent with).
fn download(
    seed: u64,
    size: usize,
    transport: TransportConfig,
    mut network: impl FnMut(bool, u64, Option<EcnCodepoint>) -> Option<EcnCodepoint> + 'static,
) -> Run {
    let link = LinkSpec {
        delay: Duration::from_millis(20),
        rate: 20_000_000,
        ..LinkSpec::default()
    };
    let mut pair = Pair::new(seed, transport.clone(), link.clone(), link);
    let marks: Rc<RefCell<[Marks; 2]>> = Rc::default();
    let log = marks.clone();
    pair.ecn_hook = Some(Box::new(move |d| {
        let m = &mut log.borrow_mut()[usize::from(!d.to_server)];
        m.datagrams += 1;
        if d.ecn == Some(EcnCodepoint::Ect0) {
            m.ect0 += 1;
            if m.ect0 < m.datagrams {
                m.ect0_after_unmarked += 1;
            }
        }
        network(d.to_server, d.index, d.ecn)
    }));
    let ch = pair.connect(transport);
    let data = payload(size, seed);
    let (sh, done, got) = pair.download(ch, &data, Duration::from_secs(60));
    if done {
        assert!(got == data, "the download arrived corrupted");
    }
    Run {
        pair,
        ch,
        sh: sh.expect("the server accepted"),
        marks,
        done,
    }
}

impl Run {
    fn client_state(&self) -> EcnState {
        self.pair
            .client
            .connection(self.ch)
            .unwrap()
            .path_stats()
            .ecn
    }
    fn server_state(&self) -> EcnState {
        self.pair
            .server
            .connection(self.sh)
            .unwrap()
            .path_stats()
            .ecn
    }
    fn server_stats(&self) -> qfec_proto::ConnectionStats {
        self.pair.server.connection(self.sh).unwrap().stats()
    }
}

#[test]
fn marks_that_arrive_validate_both_paths_and_every_packet_is_marked() {
    let run = download(1, 1_000_000, TransportConfig::default(), |_, _, ecn| ecn);
    assert!(run.done);
    assert_eq!(run.client_state(), EcnState::Capable);
    assert_eq!(run.server_state(), EcnState::Capable);
    let m = *run.marks.borrow();
    for (dir, name) in [(0, "to the server"), (1, "to the client")] {
        assert!(m[dir].datagrams > 20, "{name}: {m:?}");
        // Ten testing packets, then no marks until validated (about a round trip), then all.
        let unmarked = m[dir].datagrams - m[dir].ect0;
        assert!(
            m[dir].ect0 >= 10 && unmarked <= m[dir].datagrams / 4,
            "{name}: {m:?}"
        );
    }
    // The client reports what it received; the server counted the client's marks.
    let client = run.pair.client.connection(run.ch).unwrap();
    let server = run.pair.server.connection(run.sh).unwrap();
    assert!(client.path_stats().ecn_received.ect0 > 500);
    assert!(server.path_stats().ecn_received.ect0 > 10);
    assert_eq!(run.server_stats().ecn_congestion_events, 0);
}

#[test]
fn with_ecn_off_nothing_is_marked() {
    let transport = TransportConfig {
        ecn: false,
        ..TransportConfig::default()
    };
    let run = download(2, 200_000, transport, |_, _, ecn| ecn);
    assert!(run.done);
    assert_eq!(run.client_state(), EcnState::Off);
    assert_eq!(run.marks.borrow()[1].ect0, 0);
    assert_eq!(run.marks.borrow()[0].ect0, 0);
}

#[test]
fn a_network_that_clears_marks_fails_validation_and_marking_stops() {
    let run = download(3, 1_000_000, TransportConfig::default(), |_, _, _| None);
    assert!(run.done);
    assert_eq!(run.server_state(), EcnState::Failed(EcnFailure::NoCounts));
    assert_eq!(run.client_state(), EcnState::Failed(EcnFailure::NoCounts));
    let m = *run.marks.borrow();
    // The first ACK without counts ends it: no more than the ten testing datagrams, and
    // none once a datagram went out unmarked.
    for dir in 0..2 {
        assert!((1..=10).contains(&m[dir].ect0), "{m:?}");
        assert_eq!(m[dir].ect0_after_unmarked, 0, "{m:?}");
    }
}

#[test]
fn a_router_that_remarks_ect1_fails_validation() {
    let run = download(4, 300_000, TransportConfig::default(), |_, _, ecn| {
        ecn.map(|_| EcnCodepoint::Ect1)
    });
    assert!(run.done);
    assert_eq!(run.server_state(), EcnState::Failed(EcnFailure::Remarked));
    assert_eq!(run.server_stats().ecn_congestion_events, 0);
}

#[test]
fn a_path_that_drops_marked_packets_still_connects_and_stops_marking() {
    let link = LinkSpec {
        delay: Duration::from_millis(20),
        ..LinkSpec::default()
    };
    let mut pair = Pair::new(5, TransportConfig::default(), link.clone(), link);
    // A middlebox that drops every ECT datagram; [to the server, to the client].
    let marks: Rc<RefCell<[Marks; 2]>> = Rc::default();
    let log = marks.clone();
    pair.drop_hook = Some(Box::new(move |d| {
        let m = &mut log.borrow_mut()[usize::from(!d.to_server)];
        m.datagrams += 1;
        if d.ecn.is_some() {
            m.ect0 += 1;
            if m.ect0 < m.datagrams {
                m.ect0_after_unmarked += 1;
            }
        }
        d.ecn.is_some()
    }));
    let ch = pair.connect(TransportConfig::default());
    let mut sh = None;
    let ok = pair.run_until(Duration::from_secs(30), |p| {
        while let Some(h) = p.server.accept() {
            sh = Some(h);
        }
        p.client.connection(ch).unwrap().handshake_confirmed()
            && sh.is_some_and(|h| p.server.connection(h).unwrap().handshake_confirmed())
    });
    assert!(ok, "no handshake through a path that drops ECT packets");
    // Three probe timeouts (about 1 s each with the default initial RTT) end testing.
    let took = pair.now - qfec_proto::Instant::from_nanos(1_000_000_000);
    assert!(took < Duration::from_secs(10), "{took:?}");
    let data = payload(100_000, 5);
    let s = pair.server.connection_mut(sh.unwrap()).unwrap();
    let id = s.open_stream(Dir::Uni).unwrap();
    s.write(id, &data).unwrap();
    s.finish(id).unwrap();
    pair.run_until(Duration::from_secs(30), |p| {
        let s = p.server.connection(sh.unwrap()).unwrap();
        s.path_stats().bytes_in_flight == 0 && s.stats().stream_bytes_sent >= 100_000
    });
    let server = pair.server.connection(sh.unwrap()).unwrap();
    assert!(server.stats().stream_bytes_sent >= 100_000);
    assert_eq!(server.path_stats().bytes_in_flight, 0, "the data arrived");
    // Marking stopped for good on both sides: testing ended with every marked packet lost,
    // or (when the lost ones went with discarded handshake keys) is never confirmed.
    let client = pair.client.connection(ch).unwrap();
    for state in [server.path_stats().ecn, client.path_stats().ecn] {
        assert!(
            matches!(
                state,
                EcnState::Unknown | EcnState::Failed(EcnFailure::TestingLost)
            ),
            "{state:?}"
        );
    }
    let m = *marks.borrow();
    assert!(m[0].ect0 > 0 && m[1].ect0 > 0, "{m:?}");
    assert_eq!(
        m[0].ect0_after_unmarked + m[1].ect0_after_unmarked,
        0,
        "{m:?}"
    );
}

/// A router that marks CE instead of dropping: the sender's window comes down with no packet
/// lost, so the download takes longer than on the same link unmarked, and CE counts and
/// congestion events show where.
#[test]
fn ce_marks_reduce_the_window_without_a_loss() {
    let size = 3_000_000;
    let clean = download(6, size, TransportConfig::default(), |_, _, ecn| ecn);
    // One datagram to the client in fifty is marked once ECN is validated.
    let marked = download(
        6,
        size,
        TransportConfig::default(),
        |to_server, i, ecn| match ecn {
            Some(EcnCodepoint::Ect0) if !to_server && i % 50 == 0 => Some(EcnCodepoint::Ce),
            e => e,
        },
    );
    assert!(clean.done && marked.done);
    let s = marked.server_stats();
    assert!(s.ecn_ce_reported > 10, "{s:?}");
    assert!(s.ecn_congestion_events > 0, "{s:?}");
    assert_eq!(s.packets_lost, 0, "{s:?}");
    assert_eq!(s.congestion_events, 0, "CE is not counted as a loss: {s:?}");
    assert_eq!(marked.server_state(), EcnState::Capable);
    let t_clean = clean.pair.now;
    let t_marked = marked.pair.now;
    assert!(
        t_marked > t_clean + Duration::from_millis(40),
        "marked {t_marked:?} against clean {t_clean:?}"
    );
    assert_eq!(clean.server_stats().ecn_ce_reported, 0);
}
