//! Compatible version negotiation (RFC 9368) between two qfec endpoints: which version a
//! connection ends in, what each side puts on the wire, and that data and key updates work
//! in it whichever version rustls's session was created for.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use qfec_proto::packet::{VERSION_1, VERSION_2};
use qfec_proto::{ClientConfig, ClientCryptoConfig, TransportConfig};
use qfec_testkit::{ALPN, LinkSpec, Pair, payload};

/// (to the server, version) of every long-header datagram, in order.
type Seen = Rc<RefCell<Vec<(bool, u32)>>>;

struct Case {
    client: u32,
    offered: Vec<u32>,
    preferred: Option<u32>,
    retry: bool,
    /// Drop the server's first datagram, so that the client sends its first flight again
    /// in its own version after the server moved.
    lose_first_answer: bool,
}

impl Case {
    fn new(client: u32, offered: &[u32], preferred: Option<u32>) -> Self {
        Case {
            client,
            offered: offered.to_vec(),
            preferred,
            retry: false,
            lose_first_answer: false,
        }
    }
}

/// Runs a download of 300 kB and a key update in the case; returns the version both ends
/// settled on and what crossed the wire.
fn run(seed: u64, case: &Case) -> (u32, Vec<(bool, u32)>) {
    let mut pair = Pair::with_server(
        seed,
        TransportConfig::default(),
        LinkSpec::default(),
        LinkSpec::default(),
        |s| {
            s.retry = case.retry;
            s.preferred_version = case.preferred;
        },
    );
    let seen: Seen = Rc::default();
    let log = seen.clone();
    let mut dropped_answer = !case.lose_first_answer;
    pair.drop_hook = Some(Box::new(move |d| {
        if !d.is_short() && d.data.len() > 5 {
            let v = u32::from_be_bytes(d.data[1..5].try_into().unwrap());
            log.borrow_mut().push((d.to_server, v));
        }
        if !d.to_server && !dropped_answer {
            dropped_answer = true;
            return true;
        }
        false
    }));
    let mut cc = ClientConfig::new(ClientCryptoConfig::insecure(&[ALPN]));
    cc.version = case.client;
    cc.offered_versions = case.offered.clone();
    let ch = pair.connect_with(cc);
    let data = payload(300_000, seed);
    let (sh, done, got) = pair.download(ch, &data, Duration::from_secs(20));
    let c = pair.client.connection(ch).unwrap();
    assert!(done, "download ended: {:?}", c.error());
    assert!(got == data, "the download arrived intact");
    let sh = sh.unwrap();
    let version = c.version();
    assert_eq!(version, pair.server.connection(sh).unwrap().version());
    // A key update derives the next keys with the version's labels on both ends.
    assert!(pair.client.connection_mut(ch).unwrap().force_key_update());
    let s = pair.server.connection_mut(sh).unwrap();
    let id = s.open_stream(qfec_proto::Dir::Uni).unwrap();
    let more = payload(50_000, seed + 1);
    assert_eq!(s.write(id, &more), Ok(more.len()));
    s.finish(id).unwrap();
    let mut got = Vec::new();
    let ok = pair.run_until(Duration::from_secs(10), |p| {
        let now = p.now;
        let c = p.client.connection_mut(ch).unwrap();
        while c.accept_stream(qfec_proto::Dir::Uni).is_some() {}
        loop {
            match c.read(now, id, usize::MAX) {
                Ok(Some(b)) => got.extend_from_slice(&b),
                Ok(None) => return true,
                Err(_) => return false,
            }
        }
    });
    assert!(
        ok && got == more,
        "after the key update: {:?}",
        pair.client.connection(ch).unwrap().error()
    );
    assert_eq!(
        pair.client.connection(ch).unwrap().key_phase(),
        pair.server.connection(sh).unwrap().key_phase()
    );
    let seen = seen.borrow().clone();
    (version, seen)
}

#[test]
fn the_server_moves_a_client_to_an_offered_version() {
    let cases = [
        // No one asks for a move: the client's version throughout.
        (Case::new(VERSION_1, &[], None), VERSION_1),
        (Case::new(VERSION_2, &[], None), VERSION_2),
        // The client prefers version 2 while opening in version 1.
        (
            Case::new(VERSION_1, &[VERSION_2, VERSION_1], None),
            VERSION_2,
        ),
        // The server prefers a version the client offers (by default it offers both).
        (Case::new(VERSION_1, &[], Some(VERSION_2)), VERSION_2),
        (Case::new(VERSION_2, &[], Some(VERSION_1)), VERSION_1),
        // ... and not one it does not offer.
        (
            Case::new(VERSION_1, &[VERSION_1], Some(VERSION_2)),
            VERSION_1,
        ),
    ];
    for (i, (case, expected)) in cases.iter().enumerate() {
        let (version, seen) = run(50 + i as u64, case);
        assert_eq!(version, *expected, "case {i}");
        let (to_server, to_client): (Vec<(bool, u32)>, Vec<_>) = seen.iter().partition(|(s, _)| *s);
        assert_eq!(to_server[0].1, case.client, "case {i}: the first Initial");
        assert!(
            to_client.iter().all(|(_, v)| *v == *expected),
            "case {i}: the server speaks only the version it chose: {seen:?}"
        );
        assert_eq!(to_server.last().unwrap().1, *expected, "case {i}: {seen:?}");
    }
}

/// The server answers in version 2, its answer is lost, and the client (not yet moved)
/// sends its first flight again in version 1: the server still reads it. With a Retry
/// first, the move happens on the second Initial, keyed from the Retry's connection ID.
#[test]
fn a_move_survives_a_lost_answer_and_a_retry() {
    let mut lost = Case::new(VERSION_1, &[], Some(VERSION_2));
    lost.lose_first_answer = true;
    let (version, seen) = run(61, &lost);
    assert_eq!(version, VERSION_2);
    let v1_from_client = seen.iter().filter(|(s, v)| *s && *v == VERSION_1).count();
    assert!(
        v1_from_client >= 2,
        "the first flight went twice in version 1: {seen:?}"
    );
    let mut retry = Case::new(VERSION_1, &[], Some(VERSION_2));
    retry.retry = true;
    let (version, seen) = run(62, &retry);
    assert_eq!(version, VERSION_2);
    assert_eq!(
        seen.iter().filter(|(s, v)| !*s && *v == VERSION_1).count(),
        1,
        "only the Retry is in version 1: {seen:?}"
    );
}

/// A client that names a version qfec does not speak is refused before anything is sent.
#[test]
fn unsupported_versions_are_refused_at_connect() {
    let mut pair = Pair::new(
        1,
        TransportConfig::default(),
        LinkSpec::default(),
        LinkSpec::default(),
    );
    for (version, offered) in [(3, vec![]), (VERSION_1, vec![VERSION_2, 0x0a0a_0a0a])] {
        let mut cc = ClientConfig::new(ClientCryptoConfig::insecure(&[ALPN]));
        cc.version = version;
        cc.offered_versions = offered;
        let addr = pair.server_addr;
        let e = pair
            .client
            .connect(pair.now, cc, addr, "localhost")
            .unwrap_err();
        assert!(e.to_string().contains("not supported"), "{e}");
    }
}

/// A forged version 2 Initial to the client (right connection IDs, garbage inside) moves
/// nothing: the client moves only once a packet of the other version decrypts, so the
/// server's real answer in version 1 still completes the handshake.
#[test]
fn a_forged_packet_of_another_version_moves_nothing() {
    let mut pair = Pair::new(
        81,
        TransportConfig::default(),
        LinkSpec::default(),
        LinkSpec::default(),
    );
    // The client's SCID, from its first Initial.
    let scid: Rc<RefCell<Option<Vec<u8>>>> = Rc::default();
    let seen = scid.clone();
    pair.drop_hook = Some(Box::new(move |d| {
        if d.to_server && seen.borrow().is_none() {
            let dl = usize::from(d.data[5]);
            let sl = usize::from(d.data[6 + dl]);
            *seen.borrow_mut() = Some(d.data[7 + dl..7 + dl + sl].to_vec());
        }
        false
    }));
    // It offers version 2 (after version 1, so the server has no reason to move it).
    let cc = ClientConfig::new(ClientCryptoConfig::insecure(&[ALPN]));
    let ch = pair.connect_with(cc);
    pair.run_until(Duration::from_millis(1), |_| false);
    let dcid = scid.borrow().clone().expect("the client sent its Initial");
    // Version 2's Initial type bits are 0b01.
    let mut forged = vec![0xd3];
    forged.extend_from_slice(&VERSION_2.to_be_bytes());
    forged.push(dcid.len() as u8);
    forged.extend_from_slice(&dcid);
    forged.push(8);
    forged.extend_from_slice(&[7; 8]);
    forged.push(0); // no token
    forged.extend_from_slice(&[0x44, 0x00]); // length 1024
    forged.extend(std::iter::repeat_n(0x5a, 1024));
    let info = qfec_proto::DatagramInfo {
        remote: pair.server_addr,
        local: None,
        ecn: None,
    };
    let now = pair.now;
    pair.client.handle(now, info, &forged);
    assert_eq!(pair.client.connection(ch).unwrap().version(), VERSION_1);
    let mut sh = None;
    assert!(pair.run_until(Duration::from_secs(5), |p| {
        sh = sh.or(p.server.accept());
        p.client.connection(ch).unwrap().handshake_confirmed()
    }));
    assert_eq!(pair.client.connection(ch).unwrap().version(), VERSION_1);
}
