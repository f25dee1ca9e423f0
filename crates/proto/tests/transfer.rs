//! End-to-end transfers in virtual time over a lossy, reordering link: the bytes that arrive
//! must be exactly the bytes that were sent.

use std::time::Duration;

use qfec_proto::{ConnectionHandle, Dir, Event, ReadError, StreamId, TransportConfig, WriteError};
use qfec_testkit::{LinkSpec, Pair, payload};
use sha2::{Digest, Sha256};

/// Client uploads `data` on one bidirectional stream; the server reads it all.
struct Upload {
    client: ConnectionHandle,
    server: Option<ConnectionHandle>,
    stream: Option<StreamId>,
    written: usize,
    finished: bool,
    server_stream: Option<StreamId>,
    received: Vec<u8>,
    complete: bool,
    acked: bool,
}

impl Upload {
    fn new(client: ConnectionHandle) -> Self {
        Upload {
            client,
            server: None,
            stream: None,
            written: 0,
            finished: false,
            server_stream: None,
            received: Vec::new(),
            complete: false,
            acked: false,
        }
    }

    fn drive(&mut self, p: &mut Pair, data: &[u8]) -> bool {
        let now = p.now;
        let c = p
            .client
            .connection_mut(self.client)
            .expect("client connection");
        while let Some(ev) = c.poll() {
            match ev {
                Event::Stream(qfec_proto::StreamEvent::Finished(_)) => self.acked = true,
                Event::ConnectionLost(e) => panic!("client connection lost: {e}"),
                _ => {}
            }
        }
        if c.is_established() && self.stream.is_none() {
            self.stream = c.open_stream(Dir::Bi);
        }
        if let Some(id) = self.stream {
            while self.written < data.len() {
                match c.write(id, &data[self.written..]) {
                    Ok(n) => self.written += n,
                    Err(WriteError::Blocked) => break,
                    Err(e) => panic!("write failed: {e:?}"),
                }
            }
            if self.written == data.len() && !self.finished {
                c.finish(id).unwrap();
                self.finished = true;
            }
        }
        while let Some(h) = p.server.accept() {
            self.server = Some(h);
        }
        if let Some(h) = self.server {
            let s = p.server.connection_mut(h).expect("server connection");
            while let Some(ev) = s.poll() {
                if let Event::ConnectionLost(e) = ev {
                    panic!("server connection lost: {e}");
                }
            }
            if self.server_stream.is_none() {
                self.server_stream = s.accept_stream(Dir::Bi);
            }
            if let Some(id) = self.server_stream.filter(|_| !self.complete) {
                loop {
                    match s.read(now, id, usize::MAX) {
                        Ok(Some(chunk)) => self.received.extend_from_slice(&chunk),
                        Ok(None) => {
                            self.complete = true;
                            break;
                        }
                        Err(ReadError::Blocked) => break,
                        Err(e) => panic!("read failed: {e:?}"),
                    }
                }
            }
        }
        self.complete && self.acked
    }
}

fn upload(seed: u64, c2s: LinkSpec, s2c: LinkSpec, len: usize, limit: Duration) -> (Upload, Pair) {
    upload_with(seed, TransportConfig::default(), c2s, s2c, len, limit)
}

/// `upload` with the client (the sender) configured by `client`.
fn upload_with(
    seed: u64,
    client: TransportConfig,
    c2s: LinkSpec,
    s2c: LinkSpec,
    len: usize,
    limit: Duration,
) -> (Upload, Pair) {
    let mut pair = Pair::new(seed, TransportConfig::default(), c2s, s2c);
    let ch = pair.connect(client);
    let data = payload(len, seed);
    let mut up = Upload::new(ch);
    let done = pair.run_until(limit, |p| up.drive(p, &data));
    assert!(
        done,
        "transfer did not complete in {limit:?}: {} of {len} bytes",
        up.received.len()
    );
    assert_eq!(up.received.len(), data.len());
    assert_eq!(
        Sha256::digest(&up.received),
        Sha256::digest(&data),
        "bytes differ"
    );
    (up, pair)
}

#[test]
fn transfer_without_loss() {
    let (_, pair) = upload(
        1,
        LinkSpec::default(),
        LinkSpec::default(),
        4_000_000,
        Duration::from_secs(30),
    );
    // 4 MB at 100 Mb/s with 20 ms RTT takes well under 2 s of virtual time.
    assert!(pair.now.as_nanos() < 4_000_000_000, "took {:?}", pair.now);
}

#[test]
fn pure_receiver_state_stays_bounded() {
    // Regression: with windows so large that the receiver never sends MAX_DATA, it sends
    // only ACKs, which nobody acknowledges unless it sometimes elicits an acknowledgement;
    // its loss-detection state must stay small.
    let big = TransportConfig {
        receive_window: 16 << 20,
        stream_receive_window: 16 << 20,
        ..TransportConfig::default()
    };
    let mut pair = Pair::new(2, big.clone(), LinkSpec::default(), LinkSpec::default());
    let ch = pair.connect(big);
    let data = payload(4_000_000, 2);
    let mut up = Upload::new(ch);
    assert!(pair.run_until(Duration::from_secs(30), |p| up.drive(p, &data)));
    let server = pair.server.connection(up.server.unwrap()).unwrap();
    let sent = server.stats().packets_sent;
    assert!(sent > 1000);
    // At most about one RTT of ACKs stays tracked, not the whole transfer's.
    let tracked = server.unacked_packets();
    assert!(
        tracked * 10 < sent as usize,
        "receiver tracks {tracked} of {sent} packets"
    );
}

#[test]
fn transfer_with_5_percent_loss() {
    let lossy = LinkSpec {
        loss: 0.05,
        ..LinkSpec::default()
    };
    for seed in 1..=3 {
        let (_, pair) = upload(
            seed,
            lossy.clone(),
            lossy.clone(),
            2_000_000,
            Duration::from_secs(120),
        );
        let c = pair.client.connection(pair.client.handles()[0]).unwrap();
        assert!(c.stats().packets_lost > 0, "5 % loss must cause losses");
    }
}

/// Loss differentiation: on a path without a queue every loss episode is taken for random
/// loss (a 1/5 reduction) and the upload finishes sooner than with CUBIC's usual response;
/// where a queue stands (5 Mb/s: the window outgrows the 25 kB pipe), episodes declared at
/// the queue are congestion as usual.
#[test]
fn loss_differentiation_reduces_less_only_without_a_standing_queue() {
    let run = |rate: u64, differentiate: bool| {
        let lossy = LinkSpec {
            loss: 0.02,
            rate,
            ..LinkSpec::default()
        };
        let config = TransportConfig {
            loss_differentiation: differentiate,
            ..TransportConfig::default()
        };
        let (up, pair) = upload_with(
            4,
            config,
            lossy.clone(),
            LinkSpec::default(),
            3_000_000,
            Duration::from_secs(120),
        );
        let stats = pair.client.connection(up.client).unwrap().stats();
        (pair.now, stats)
    };
    let (plain_t, plain) = run(100_000_000, false);
    let (ld_t, ld) = run(100_000_000, true);
    assert_eq!(plain.random_loss_events, 0);
    assert!(ld.congestion_events > 5, "{ld:?}");
    assert_eq!(ld.random_loss_events, ld.congestion_events, "{ld:?}");
    assert!(ld_t < plain_t, "{ld_t:?} with, {plain_t:?} without");
    let (_, queued) = run(5_000_000, true);
    assert!(queued.random_loss_events > 0, "{queued:?}");
    assert!(
        queued.random_loss_events < queued.congestion_events,
        "{queued:?}"
    );
}

#[test]
fn transfer_with_reordering() {
    let jittery = LinkSpec {
        jitter: Duration::from_millis(8),
        ..LinkSpec::default()
    };
    let (up, pair) = upload(
        7,
        jittery.clone(),
        jittery,
        2_000_000,
        Duration::from_secs(60),
    );
    // Reordering beyond the packet threshold makes loss detection misfire; the sender must
    // notice when the "lost" packets are acknowledged after all.
    let stats = pair.client.connection(up.client).unwrap().stats();
    assert!(stats.packets_lost > 0);
    assert!(stats.spurious_losses > 0, "{stats:?}");
    assert!(stats.spurious_losses <= stats.packets_lost);
}

#[test]
fn transfer_across_a_two_second_blackhole() {
    let hole = vec![(Duration::from_millis(300), Duration::from_millis(2300))];
    let c2s = LinkSpec {
        blackholes: hole.clone(),
        rate: 20_000_000,
        ..LinkSpec::default()
    };
    let s2c = LinkSpec {
        blackholes: hole,
        rate: 20_000_000,
        ..LinkSpec::default()
    };
    upload(3, c2s, s2c, 3_000_000, Duration::from_secs(60));
}

#[test]
fn handshake_completes_at_30_percent_loss() {
    for seed in 1..=8 {
        let lossy = LinkSpec {
            loss: 0.30,
            ..LinkSpec::default()
        };
        let mut pair = Pair::new(seed, TransportConfig::default(), lossy.clone(), lossy);
        let ch = pair.connect(TransportConfig::default());
        let ok = pair.run_until(Duration::from_secs(60), |p| {
            let c = p.client.connection(ch).unwrap();
            c.handshake_confirmed()
        });
        assert!(ok, "seed {seed}: handshake did not complete at 30 % loss");
    }
}

#[test]
fn server_respects_anti_amplification_limit() {
    // The client's first flight reaches the server, nothing after it: the server must not
    // send more than three times what it received, even across its probe timeouts.
    let c2s = LinkSpec {
        drop_after: Some(1),
        ..LinkSpec::default()
    };
    let mut pair = Pair::new(5, TransportConfig::default(), c2s, LinkSpec::default());
    pair.connect(TransportConfig::default());
    pair.run_until(Duration::from_secs(20), |_| false);
    let received_by_server: u64 = 1200; // one padded Initial
    assert!(pair.delivered[0] == 1);
    assert!(
        pair.sent_bytes[1] <= 3 * received_by_server,
        "server sent {} bytes after receiving {}",
        pair.sent_bytes[1],
        received_by_server
    );
    assert!(pair.sent_bytes[1] > 0, "server must answer");
}

#[test]
fn batched_transmits_lose_nothing() {
    // Regression: when a batch for segmentation offload ended because nothing more was
    // ready, the datagrams already built were discarded (counted as sent, never sent).
    let mut pair = Pair::new(
        4,
        TransportConfig::default(),
        LinkSpec::default(),
        LinkSpec::default(),
    );
    pair.batch = 16;
    let ch = pair.connect(TransportConfig::default());
    let data = payload(3_000_000, 4);
    let mut up = Upload::new(ch);
    assert!(pair.run_until(Duration::from_secs(30), |p| up.drive(p, &data)));
    assert_eq!(up.received, data);
    let stats = pair.client.connection(ch).unwrap().stats();
    assert_eq!(
        stats.packets_lost, 0,
        "a lossless link loses nothing: {stats:?}"
    );
    assert_eq!(
        pair.sent[0], stats.udp_tx_datagrams,
        "every datagram built was sent"
    );
}

/// `congestion_controller = Disabled`: the sender is held back by flow control only. On a
/// 200 ms RTT path the first round trip carries far more than any initial window (10
/// packets), and the transfer still arrives intact (with loss, retransmissions repair it).
#[test]
fn without_congestion_control_only_flow_control_limits_the_sender() {
    use qfec_proto::recovery::cc::DisabledConfig;
    let transport = || TransportConfig {
        congestion_controller: std::sync::Arc::new(DisabledConfig),
        ..TransportConfig::default()
    };
    let link = |loss| LinkSpec {
        delay: Duration::from_millis(100),
        loss,
        ..LinkSpec::default()
    };
    for loss in [0.0, 0.02] {
        let mut pair = Pair::new(4, transport(), link(loss), link(loss));
        let ch = pair.connect(transport());
        let data = payload(2_000_000, 4);
        let mut up = Upload::new(ch);
        let mut max_in_flight = 0;
        let done = pair.run_until(Duration::from_secs(60), |p| {
            let d = up.drive(p, &data);
            if let Some(c) = p.client.connection(ch) {
                max_in_flight = max_in_flight.max(c.path_stats().bytes_in_flight);
            }
            d
        });
        assert!(done, "loss {loss}: {} bytes", up.received.len());
        assert_eq!(Sha256::digest(&up.received), Sha256::digest(&data));
        assert!(
            max_in_flight > 500_000,
            "loss {loss}: at most {max_in_flight} bytes in flight"
        );
    }
}
