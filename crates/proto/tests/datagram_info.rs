//! What the socket tells of each datagram crosses the sans-IO API both ways: the local
//! address a datagram came to (replies leave from it) and its ECN codepoint (counted per path).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use qfec_proto::{
    ClientConfig, ClientCryptoConfig, DatagramInfo, EcnCodepoint, EcnCounts, Endpoint,
    EndpointConfig, Instant, ServerConfig, TransportConfig,
};
use qfec_testkit::{ALPN, server_crypto};

/// A client and a server exchanging every datagram at once until nothing moves; the server's
/// datagrams are delivered as coming to `server_local` with `ecn`, and every server transmit
/// is returned.
fn exchange(
    server_local: SocketAddr,
    ecn: Option<EcnCodepoint>,
) -> (Endpoint, Vec<qfec_proto::Transmit>) {
    let mut sc = ServerConfig::new(server_crypto());
    sc.transport = Arc::new(TransportConfig::default());
    let mut server = Endpoint::new(Arc::new(EndpointConfig::default()), Some(Arc::new(sc)), 7);
    let mut client = Endpoint::new(Arc::new(EndpointConfig::default()), None, 8);
    let client_addr: SocketAddr = "10.0.0.1:5000".parse().unwrap();
    let cc = ClientConfig::new(ClientCryptoConfig::insecure(&[ALPN]));
    let ch = client
        .connect(Instant::ZERO, cc, server_local, "localhost")
        .unwrap();
    let mut now = Instant::ZERO;
    let mut sent = Vec::new();
    let mut buf = Vec::new();
    for _ in 0..200 {
        now += Duration::from_millis(1);
        let mut moved = false;
        while let Some(t) = client.poll_transmit(now, 1, &mut buf) {
            let info = DatagramInfo {
                remote: client_addr,
                local: Some(server_local),
                ecn,
            };
            server.handle(now, info, &buf[..t.size]);
            buf.clear();
            moved = true;
        }
        while server.accept().is_some() {}
        while let Some(t) = server.poll_transmit(now, 1, &mut buf) {
            sent.push(t);
            client.handle(now, server_local, &buf[..t.size]);
            buf.clear();
            moved = true;
        }
        for ep in [&mut client, &mut server] {
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
            }
        }
        if !moved && client.connection(ch).unwrap().handshake_confirmed() {
            break;
        }
    }
    assert!(client.connection(ch).unwrap().handshake_confirmed());
    (server, sent)
}

#[test]
fn replies_leave_from_the_address_the_client_sent_to() {
    // A server bound to a wildcard address: the client wrote to 192.0.2.7.
    let local: SocketAddr = "192.0.2.7:4433".parse().unwrap();
    let (_, sent) = exchange(local, None);
    assert!(!sent.is_empty());
    assert!(
        sent.iter().all(|t| t.source == Some(local)),
        "{:?}",
        sent.iter().map(|t| t.source).collect::<Vec<_>>()
    );
}

#[test]
fn ecn_codepoints_are_counted_per_path() {
    let local: SocketAddr = "192.0.2.7:4433".parse().unwrap();
    let (server, _) = exchange(local, Some(EcnCodepoint::Ce));
    let h = server.handles()[0];
    let c = server.connection(h).unwrap();
    let counts = c.path_stats().ecn_received;
    // The client's 1-RTT packets all arrived marked CE; Initial and Handshake packets count
    // in their own spaces.
    assert!(counts.ce > 0, "{counts:?}");
    assert_eq!((counts.ect0, counts.ect1), (0, 0));
    let (server, _) = exchange(local, None);
    let h = server.handles()[0];
    assert_eq!(
        server.connection(h).unwrap().path_stats().ecn_received,
        EcnCounts::default()
    );
}
