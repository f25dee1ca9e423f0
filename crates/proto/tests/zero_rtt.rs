//! 0-RTT (RFC 9001 §4.6): a resuming client sends a request before the handshake completes;
//! the server reads it early when it accepts, and the client sends it again in 1-RTT when
//! the server rejects.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use qfec_proto::{
    ClientConfig, ClientCryptoConfig, ConnectionHandle, Dir, ServerConfig, TransportConfig,
};
use qfec_testkit::{ALPN, Datagram, LinkSpec, Pair, payload, server_crypto};

/// Counts the client's 0-RTT packets (long header type 1, first in their datagram or not:
/// the datagram's first byte tells only of the first packet, so scan coalesced packets).
fn count_zero_rtt(pair: &mut Pair) -> Rc<Cell<u32>> {
    let seen = Rc::new(Cell::new(0));
    let s = seen.clone();
    pair.drop_hook = Some(Box::new(move |d: &Datagram<'_>| {
        if d.to_server {
            let mut rest = d.data;
            while let Ok(h) = qfec_proto::packet::parse_header(rest, 8) {
                let len = match h {
                    qfec_proto::packet::ParsedHeader::Long { ty, packet_len, .. } => {
                        if ty == qfec_proto::packet::LongType::ZeroRtt {
                            s.set(s.get() + 1);
                        }
                        packet_len
                    }
                    _ => break,
                };
                if len >= rest.len() {
                    break;
                }
                rest = &rest[len..];
            }
        }
        false
    }));
    seen
}

/// A pair whose client connected once already, so that it holds a session ticket. With
/// `same_server` false the server then restarts (a fresh session cache): it cannot resume the
/// session, and so rejects the early data.
fn resumed_pair(seed: u64, same_server: bool) -> (Pair, ClientCryptoConfig, ServerConfig) {
    let early = server_crypto().with_early_data();
    let mut pair = Pair::with_server(
        seed,
        TransportConfig::default(),
        LinkSpec {
            delay: Duration::from_millis(20),
            ..LinkSpec::default()
        },
        LinkSpec {
            delay: Duration::from_millis(20),
            ..LinkSpec::default()
        },
        |s| s.crypto = early.clone(),
    );
    let crypto = ClientCryptoConfig::insecure(&[ALPN]).with_early_data();
    let first = connect(&mut pair, &crypto);
    assert!(pair.run_until(Duration::from_secs(5), |p| {
        while p.server.accept().is_some() {}
        p.client.connection(first).unwrap().handshake_confirmed()
    }));
    // The session ticket follows the handshake.
    pair.run_until(Duration::from_millis(300), |_| false);
    assert!(
        !pair.client.connection(first).unwrap().can_send_early_data(),
        "a first connection has nothing to resume"
    );
    let mut later = ServerConfig::new(if same_server {
        early
    } else {
        server_crypto().with_early_data()
    });
    later.transport = Arc::new(TransportConfig::default());
    pair.server.set_server_config(Some(Arc::new(later.clone())));
    (pair, crypto, later)
}

fn connect(pair: &mut Pair, crypto: &ClientCryptoConfig) -> ConnectionHandle {
    let cc = ClientConfig::new(crypto.clone());
    pair.client
        .connect(pair.now, cc, pair.server_addr, "localhost")
        .unwrap()
}

/// Sends `request` on a new stream right after connecting; returns what the server read and
/// whether it read it all before its handshake completed.
fn early_request(
    pair: &mut Pair,
    crypto: &ClientCryptoConfig,
    request: &[u8],
) -> (ConnectionHandle, Vec<u8>, bool) {
    let ch = connect(pair, crypto);
    let c = pair.client.connection_mut(ch).unwrap();
    assert!(c.can_send_early_data(), "a resuming client may send early");
    let id = c
        .open_stream(Dir::Uni)
        .expect("stream limits remembered from the session");
    assert_eq!(c.write(id, request), Ok(request.len()));
    c.finish(id).unwrap();
    let mut got = Vec::new();
    let mut before_handshake = false;
    let mut server = None;
    assert!(pair.run_until(Duration::from_secs(5), |p| {
        while let Some(h) = p.server.accept() {
            server = Some(h);
        }
        let now = p.now;
        if let Some(h) = server {
            let s = p.server.connection_mut(h).unwrap();
            while let Some(sid) = s.accept_stream(Dir::Uni) {
                assert_eq!(sid, id);
            }
            loop {
                match s.read(now, id, usize::MAX) {
                    Ok(Some(b)) => got.extend_from_slice(&b),
                    Ok(None) => {
                        before_handshake |= !s.is_established();
                        break;
                    }
                    Err(_) => break,
                }
            }
        }
        got.len() == request.len() && p.client.connection(ch).unwrap().handshake_confirmed()
    }));
    (ch, got, before_handshake)
}

#[test]
fn accepted_early_data_is_read_before_the_handshake_completes() {
    let (mut pair, crypto, _) = resumed_pair(51, true);
    let zero_rtt = count_zero_rtt(&mut pair);
    let request = payload(3000, 51);
    let (ch, got, early) = early_request(&mut pair, &crypto, &request);
    assert_eq!(got, request);
    assert!(zero_rtt.get() >= 1, "the request went out in 0-RTT packets");
    assert!(
        early,
        "the server read the request before its handshake completed"
    );
    let c = pair.client.connection(ch).unwrap();
    assert!(c.is_resumed());
    assert_eq!(c.early_data_accepted(), Some(true));
    assert_eq!(c.stats().packets_retransmitted, 0, "nothing was sent twice");
}

/// A server that prefers version 2 does not move a client that attempts 0-RTT in version 1
/// (its early data is keyed for version 1): the early data is accepted, in version 1.
#[test]
fn early_data_keeps_the_client_s_version() {
    let (mut pair, crypto, mut later) = resumed_pair(52, true);
    later.preferred_version = Some(qfec_proto::packet::VERSION_2);
    pair.server.set_server_config(Some(Arc::new(later)));
    let request = payload(3000, 52);
    let (ch, got, early) = early_request(&mut pair, &crypto, &request);
    assert_eq!(got, request);
    assert!(early, "read before the handshake completed");
    let c = pair.client.connection(ch).unwrap();
    assert_eq!(c.early_data_accepted(), Some(true));
    assert_eq!(c.version(), qfec_proto::packet::VERSION_1);
    // Without early data, the same server moves the same client to version 2.
    let fresh = connect(&mut pair, &ClientCryptoConfig::insecure(&[ALPN]));
    assert!(pair.run_until(Duration::from_secs(5), |p| {
        while p.server.accept().is_some() {}
        p.client.connection(fresh).unwrap().handshake_confirmed()
    }));
    let c = pair.client.connection(fresh).unwrap();
    assert_eq!(c.version(), qfec_proto::packet::VERSION_2);
}

#[test]
fn a_replayed_zero_rtt_flight_is_not_accepted_twice() {
    let (mut pair, crypto, _) = resumed_pair(53, true);
    // The second connection's first two datagrams: its Initial and its 0-RTT request.
    let first_index = pair.sent[0] + 1;
    let first_flight = Rc::new(std::cell::RefCell::new(Vec::<Vec<u8>>::new()));
    let rec = first_flight.clone();
    pair.drop_hook = Some(Box::new(move |d: &Datagram<'_>| {
        if d.to_server && d.index >= first_index && d.index < first_index + 2 {
            rec.borrow_mut().push(d.data.to_vec());
        }
        false
    }));
    let request = payload(500, 53);
    let (_, got, early) = early_request(&mut pair, &crypto, &request);
    assert!(
        early && got == request,
        "the original 0-RTT request was accepted"
    );
    let flight = first_flight.borrow().clone();
    assert_eq!(flight.len(), 2, "the first flight was recorded");
    assert!(
        flight.iter().map(|d| zero_rtt_packets(d)).sum::<u32>() >= 1,
        "the recorded flight carries the 0-RTT request"
    );
    while pair.server.accept().is_some() {}
    // An attacker replays the client's first datagrams from another address.
    let before = pair.server.connection_count();
    let attacker: std::net::SocketAddr = "10.9.9.9:7777".parse().unwrap();
    for d in &flight {
        pair.server.handle(pair.now, attacker, d);
    }
    let mut replayed = Vec::new();
    while let Some(h) = pair.server.accept() {
        replayed.push(h);
    }
    // The replayed ClientHello is genuine: the server starts a handshake for it, and must
    // refuse its early data because the ticket was used already.
    assert_eq!(
        (replayed.len(), pair.server.connection_count()),
        (1, before + 1),
        "the replayed Initial reached TLS and made one new connection"
    );
    let s = pair.server.connection_mut(replayed[0]).unwrap();
    let mut replayed_streams = 0;
    while s.accept_stream(Dir::Uni).is_some() {
        replayed_streams += 1;
    }
    assert_eq!(
        replayed_streams, 0,
        "the single-use ticket refused the replayed early data"
    );
    assert_eq!(s.stats().packets_received, 1, "only the Initial was read");
}

/// 0-RTT packets in one datagram.
fn zero_rtt_packets(mut rest: &[u8]) -> u32 {
    let mut n = 0;
    while let Ok(qfec_proto::packet::ParsedHeader::Long { ty, packet_len, .. }) =
        qfec_proto::packet::parse_header(rest, 8)
    {
        n += u32::from(ty == qfec_proto::packet::LongType::ZeroRtt);
        if packet_len >= rest.len() {
            break;
        }
        rest = &rest[packet_len..];
    }
    n
}

#[test]
fn rejected_early_data_is_sent_again_in_one_rtt() {
    let (mut pair, crypto, _) = resumed_pair(52, false);
    let zero_rtt = count_zero_rtt(&mut pair);
    let request = payload(3000, 52);
    let (ch, got, early) = early_request(&mut pair, &crypto, &request);
    assert!(zero_rtt.get() >= 1, "the client tried 0-RTT");
    assert_eq!(got, request, "the request arrives whole in 1-RTT");
    assert!(!early);
    let c = pair.client.connection(ch).unwrap();
    assert!(
        !c.is_resumed(),
        "the restarted server has no session to resume"
    );
    assert_eq!(c.early_data_accepted(), Some(false));
}

/// A resumed client that also presents the server's NEW_TOKEN token (its address is then
/// validated from the first packet) gets the answer to its 0-RTT request in the server's
/// first flight: the whole answer within one round trip (40 ms here) and the time to send it,
/// neither held back by the anti-amplification limit nor waiting for the client's Finished.
#[test]
fn a_zero_rtt_request_is_answered_in_the_first_flight() {
    let (mut pair, crypto, _) = resumed_pair(54, true);
    let first = pair.client.handles()[0];
    let token = pair
        .client
        .connection(first)
        .unwrap()
        .new_token()
        .map(<[u8]>::to_vec);
    assert!(
        token.is_some(),
        "the first connection got a NEW_TOKEN token"
    );
    let mut cc = ClientConfig::new(crypto.clone());
    cc.token = token;
    let start = pair.now;
    let ch = pair
        .client
        .connect(pair.now, cc, pair.server_addr, "localhost")
        .unwrap();
    let c = pair.client.connection_mut(ch).unwrap();
    assert!(c.can_send_early_data());
    let id = c.open_stream(Dir::Bi).unwrap();
    c.write(id, b"GET /answer").unwrap();
    c.finish(id).unwrap();
    let answer = payload(8000, 54);
    let (mut server, mut got, mut answered) = (None, 0usize, false);
    assert!(pair.run_until(Duration::from_secs(5), |p| {
        while let Some(h) = p.server.accept() {
            server = Some(h);
        }
        let now = p.now;
        if let Some(h) = server
            && !answered
        {
            let s = p.server.connection_mut(h).unwrap();
            while s.accept_stream(Dir::Bi).is_some() {}
            // The request, to its end.
            let ended = loop {
                match s.read(now, id, usize::MAX) {
                    Ok(Some(_)) => {}
                    Ok(None) => break true,
                    Err(_) => break false,
                }
            };
            if ended {
                assert!(
                    !s.is_established(),
                    "the request was read before the handshake completed"
                );
                assert_eq!(s.write(id, &answer), Ok(answer.len()));
                s.finish(id).unwrap();
                answered = true;
            }
        }
        let c = p.client.connection_mut(ch).unwrap();
        while let Ok(Some(b)) = c.read(now, id, usize::MAX) {
            got += b.len();
        }
        got == answer.len()
    }));
    let took = pair.now.saturating_duration_since(start);
    assert!(
        took < Duration::from_millis(50),
        "the answer took {took:?}, more than one 40 ms round trip and its sending time"
    );
    // The server's first flight acknowledged the 0-RTT packets, in the packet number space
    // 1-RTT packets share: that is not an acknowledged 1-RTT packet (RFC 9001 §4.1.2), and
    // the client's Finished has not reached the server yet.
    assert!(
        !pair.client.connection(ch).unwrap().handshake_confirmed(),
        "acknowledged 0-RTT packets confirmed the client's handshake"
    );
}
