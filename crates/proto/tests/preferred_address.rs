//! The server's preferred address (RFC 9000 §9.6) over the simulated pair: a client moves
//! there once the handshake is confirmed, under the connection ID that came with it, and
//! goes back to the first address when the preferred one does not answer.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use qfec_proto::{ClientConfig, ClientCryptoConfig, TransportConfig};
use qfec_testkit::{ALPN, LinkSpec, Pair, payload};

const PREFERRED: &str = "10.0.0.3:4433";

/// A 400 kB download from a server offering `PREFERRED`; returns the pair, the client's
/// handle, and how many datagrams went to the preferred address and came from it (with
/// `reachable` false, every one to it is dropped).
fn download(
    seed: u64,
    use_it: bool,
    reachable: bool,
) -> (Pair, qfec_proto::ConnectionHandle, u64, u64) {
    let preferred: SocketAddr = PREFERRED.parse().unwrap();
    let mut pair = Pair::with_server(
        seed,
        TransportConfig::default(),
        LinkSpec::default(),
        LinkSpec::default(),
        |s| s.preferred_address = Some(preferred),
    );
    let to_preferred = Rc::new(Cell::new(0));
    let from_preferred = Rc::new(Cell::new(0));
    let (to, from) = (to_preferred.clone(), from_preferred.clone());
    pair.drop_hook = Some(Box::new(move |d| {
        if d.server_side == Some(preferred) {
            let n = if d.to_server { &to } else { &from };
            n.set(n.get() + 1);
            return d.to_server && !reachable;
        }
        false
    }));
    let transport = TransportConfig {
        use_preferred_address: use_it,
        ..TransportConfig::default()
    };
    let mut cc = ClientConfig::new(ClientCryptoConfig::insecure(&[ALPN]));
    cc.transport = std::sync::Arc::new(transport);
    let ch = pair.connect_with(cc);
    let data = payload(400_000, seed);
    let (_, done, got) = pair.download(ch, &data, Duration::from_secs(30));
    assert!(
        done && got == data,
        "{:?}",
        pair.client.connection(ch).unwrap().error()
    );
    let (to, from) = (to_preferred.get(), from_preferred.get());
    (pair, ch, to, from)
}

#[test]
fn the_client_moves_to_the_preferred_address() {
    let (pair, ch, to, from) = download(71, true, true);
    let c = pair.client.connection(ch).unwrap();
    assert_eq!(c.remote_address(), PREFERRED.parse().unwrap());
    assert_eq!(c.stats().preferred_address_moves, 1);
    assert!(to > 50, "the download's ACKs went there: {to}");
    assert!(from > 100, "the server answered from there: {from}");
}

#[test]
fn a_client_told_not_to_stays() {
    let (pair, ch, to, from) = download(72, false, true);
    let c = pair.client.connection(ch).unwrap();
    assert_eq!(c.remote_address(), pair.server_addr);
    assert_eq!((c.stats().preferred_address_moves, to, from), (0, 0, 0));
}

/// The preferred address swallows everything: the challenge goes unanswered, the client
/// goes back to the first address, and the download completes there.
#[test]
fn an_unreachable_preferred_address_is_left_for_the_first_one() {
    let (pair, ch, to, from) = download(73, true, false);
    let c = pair.client.connection(ch).unwrap();
    assert!(to >= 1 && from == 0, "{to} {from}");
    assert_eq!(c.remote_address(), pair.server_addr);
}
