//! `adaptive` protects the handshake: copies of each endpoint's first flight, so that a lost
//! ClientHello or server flight does not wait for the 1 s probe timeout of a connection
//! that has measured no RTT yet (and a lost client Finished waits for no Handshake probe
//! timeout either).

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use common::{da2gc, fec, plain};
use qfec_fec::SchemeId;
use qfec_proto::packet::{LongType, ParsedHeader, parse_header};
use qfec_proto::{RecoveredLossMode, TransportConfig};
use qfec_testkit::{Datagram, Pair};

/// A client that decodes every scheme and sends `send` ("none": nothing, decode only).
fn client(send: &str) -> TransportConfig {
    fec(send, &SchemeId::ALL, RecoveredLossMode::Signal)
}

/// Long-header datagrams each way, with when they entered the link.
#[derive(Debug, Default)]
struct Seen {
    to_server: Vec<Duration>,
    to_client: Vec<Duration>,
}

/// A 1 kB download; `drop` picks (direction to the server, index among that direction's
/// long-header datagrams, from 1) the datagrams the link loses. Returns the completion time
/// in seconds and what went over the link before the first 1-RTT datagram.
fn download(
    server: TransportConfig,
    client: TransportConfig,
    drop: &'static [(bool, usize)],
) -> (f64, Seen) {
    download_dropping(server, client, move |d, index| {
        drop.contains(&(d.to_server, index))
    })
}

/// Whether a datagram carries a Handshake packet (among its coalesced long-header packets).
fn carries_handshake_packet(mut data: &[u8]) -> bool {
    while !data.is_empty() {
        // Short headers end the datagram, whatever their connection ID's length.
        match parse_header(data, 0) {
            Ok(ParsedHeader::Long { ty, packet_len, .. }) => {
                if ty == LongType::Handshake {
                    return true;
                }
                data = data.get(packet_len..).unwrap_or(&[]);
            }
            _ => return false,
        }
    }
    false
}

/// [`download`], with `drop` deciding on each long-header datagram and its index among its
/// direction's.
fn download_dropping(
    server: TransportConfig,
    client: TransportConfig,
    drop: impl Fn(&Datagram<'_>, usize) -> bool + 'static,
) -> (f64, Seen) {
    let mut pair = Pair::new(3, server, da2gc(), da2gc());
    let start = pair.now;
    let ch = pair.connect(client);
    let seen = Rc::new(RefCell::new(Seen::default()));
    let log = seen.clone();
    pair.drop_hook = Some(Box::new(move |d: &Datagram<'_>| {
        if d.is_short() {
            return false;
        }
        let mut s = log.borrow_mut();
        let at = d.now - start;
        let list = if d.to_server {
            &mut s.to_server
        } else {
            &mut s.to_client
        };
        list.push(at);
        drop(d, list.len())
    }));
    let (t, _) = common::request_response(&mut pair, ch, start, 3);
    pair.drop_hook = None;
    let seen = Rc::try_unwrap(seen).expect("hook dropped").into_inner();
    (t, seen)
}

fn adaptive_server() -> TransportConfig {
    fec("adaptive", &SchemeId::ALL, RecoveredLossMode::Signal)
}

#[test]
fn a_lost_client_hello_is_repaired_by_its_copy() {
    // Plain QUIC: the client's probe timeout (3 x 333 ms) before the handshake moves on.
    let (plain_t, _) = download(plain(), plain(), &[(true, 1)]);
    let (t, seen) = download(adaptive_server(), client("adaptive"), &[(true, 1)]);
    // The copy left one gap after the original, not a probe timeout.
    let gap = seen.to_server[1] - seen.to_server[0];
    assert!(
        gap >= Duration::from_millis(5) && gap < Duration::from_millis(50),
        "{seen:?}"
    );
    assert!(
        t + 0.9 <= plain_t,
        "{t:.3} s with the copy, {plain_t:.3} s without"
    );
}

#[test]
fn a_lost_server_flight_is_repaired_by_its_copy() {
    // The server's first datagram (ServerHello and the start of its Handshake flight).
    let (plain_t, _) = download(plain(), plain(), &[(false, 1)]);
    let (t, _) = download(adaptive_server(), client("none"), &[(false, 1)]);
    assert!(
        t + 0.9 <= plain_t,
        "{t:.3} s with the copy, {plain_t:.3} s without"
    );
}

#[test]
fn a_lost_client_finished_waits_for_no_probe_timeout() {
    // The client's first datagram with a Handshake packet: its Finished, and the request
    // beside it, which the server reads only once it has the Finished. No copy of it is
    // sent: the copy of the ClientHello reaches the server after its flight left, the
    // server answers it with its flight again (RFC 9002 §6.2.3), and that duplicate makes
    // the client send its unacknowledged Finished again, a few milliseconds after the lost
    // one.
    let first_finished = || {
        let dropped = std::cell::Cell::new(false);
        move |d: &Datagram<'_>, _| {
            let hit = d.to_server && !dropped.get() && carries_handshake_packet(d.data);
            dropped.set(dropped.get() || hit);
            hit
        }
    };
    // Plain QUIC: the client's Handshake probe timeout, about three RTTs.
    let (plain_t, _) = download_dropping(plain(), plain(), first_finished());
    let (clean_t, _) = download(adaptive_server(), client("adaptive"), &[]);
    let (t, _) = download_dropping(adaptive_server(), client("adaptive"), first_finished());
    assert!(
        t + 0.4 <= plain_t && t <= clean_t + 0.05,
        "{t:.3} s with adaptive, {plain_t:.3} s without, {clean_t:.3} s with no loss"
    );
}

#[test]
fn copies_cost_no_time_without_loss() {
    let (plain_t, plain_seen) = download(plain(), plain(), &[]);
    let (t, seen) = download(adaptive_server(), client("adaptive"), &[]);
    // One copy of each first flight (the server's Initial and Handshake data fit one
    // datagram here), and one datagram more each way: each copy arrives after the original
    // was answered, and the peer answers a duplicate with its unacknowledged CRYPTO data
    // (RFC 9002 §6.2.3), as it would a retransmission.
    let (c, s) = (plain_seen.to_server.len(), plain_seen.to_client.len());
    assert_eq!(
        (seen.to_server.len(), seen.to_client.len()),
        (c + 2, s + 2),
        "{seen:?}"
    );
    assert!(
        t <= plain_t * 1.02,
        "{t:.3} s with copies, {plain_t:.3} s without"
    );
}

#[test]
fn no_copies_from_the_papers_codes_nor_to_a_client_without_fec() {
    let (_, plain_seen) = download(plain(), plain(), &[]);
    // A fixed code's client and server: no copies.
    let (_, seen) = download(
        fec("rlc", &SchemeId::ALL, RecoveredLossMode::Signal),
        client("rlc"),
        &[],
    );
    assert_eq!(seen.to_server.len(), plain_seen.to_server.len(), "{seen:?}");
    assert_eq!(seen.to_client.len(), plain_seen.to_client.len(), "{seen:?}");
    // An adaptive server facing a client that did not enable FEC: plain QUIC.
    let (_, seen) = download(adaptive_server(), plain(), &[]);
    assert_eq!(seen.to_client.len(), plain_seen.to_client.len(), "{seen:?}");
    // Without a prior, nothing either.
    let (_, seen) = download(
        fec(
            "adaptive(prior=0)",
            &SchemeId::ALL,
            RecoveredLossMode::Signal,
        ),
        client("adaptive(prior=0)"),
        &[],
    );
    assert_eq!(seen.to_server.len(), plain_seen.to_server.len(), "{seen:?}");
    assert_eq!(seen.to_client.len(), plain_seen.to_client.len(), "{seen:?}");
}
