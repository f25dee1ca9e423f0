//! draft-ietf-quic-ack-frequency end to end: a data sender's policy changes how often its
//! peer acknowledges, transfers stay intact, IMMEDIATE_ACK hastens the ACK of a sender going
//! idle, and invalid requests close the connection with the right error.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use qfec_proto::{
    AckFrequencyPolicy, ConnectionExtension, ConnectionStats, Dir, Event, ExtensionCx,
    ExtensionFactory, Side, StreamEvent, TransportConfig,
};
use qfec_testkit::{Exchange, LinkSpec, Pair, payload};

struct Outcome {
    /// Counters of the data sender (the server) and the receiver (the client).
    sender: ConnectionStats,
    receiver: ConnectionStats,
    /// Virtual time the download took.
    took: Duration,
}

/// The server sends `len` bytes to the client with `policy`; both must arrive intact.
fn download(seed: u64, policy: AckFrequencyPolicy, loss: f64, len: usize) -> Outcome {
    let link = LinkSpec {
        delay: Duration::from_millis(15),
        loss,
        rate: 50_000_000,
        ..LinkSpec::default()
    };
    let server = TransportConfig {
        ack_frequency: policy,
        ..TransportConfig::default()
    };
    let mut pair = Pair::new(seed, server, link.clone(), link);
    let start = pair.now;
    let ch = pair.connect(TransportConfig::default());
    let data = payload(len, seed);
    let mut x = Exchange::new(ch, Vec::new(), data.clone());
    assert!(x.run(&mut pair, Duration::from_secs(60)), "{:?}", x.error);
    assert!(x.flows[0].received == data, "the download differs");
    let took = pair.now - start;
    let receiver = pair.client.connection(ch).unwrap().stats();
    let sh = x.server.unwrap();
    let sender = pair.server.connection(sh).unwrap().stats();
    Outcome {
        sender,
        receiver,
        took,
    }
}

#[test]
fn without_a_policy_the_receiver_acknowledges_every_other_packet() {
    let o = download(1, AckFrequencyPolicy::None, 0.0, 2_000_000);
    assert_eq!(
        o.sender.ack_frequency_sent + o.sender.immediate_acks_sent,
        0
    );
    assert_eq!(o.receiver.ack_frequency_applied, 0);
    let per_ack = o.sender.packets_sent as f64 / o.receiver.ack_frames_sent as f64;
    assert!(
        (1.7..=2.3).contains(&per_ack),
        "{per_ack:.2} packets per ACK"
    );
}

#[test]
fn bquic_receiver_honours_the_threshold_of_ten_packets() {
    let o = download(2, AckFrequencyPolicy::Bquic, 0.0, 2_000_000);
    assert_eq!(o.sender.ack_frequency_sent, 1, "one request, acknowledged");
    assert_eq!(o.receiver.ack_frequency_applied, 1);
    // 100 packets at every other, then one ACK per 10 (or per min_rtt/4 = 7.5 ms at the
    // tail of a flight).
    let per_ack = o.sender.packets_sent as f64 / o.receiver.ack_frames_sent as f64;
    assert!(per_ack > 6.0, "{per_ack:.2} packets per ACK");
}

#[test]
fn adaptive_policy_acks_once_per_eighth_window_past_slow_start() {
    // A few losses end slow start (the link has no queue to overflow).
    let a = download(3, AckFrequencyPolicy::Adaptive, 0.001, 4_000_000);
    let b = download(3, AckFrequencyPolicy::None, 0.001, 4_000_000);
    assert!(a.receiver.ack_frequency_applied >= 1);
    assert!(
        (a.receiver.ack_frames_sent as f64) < 0.5 * b.receiver.ack_frames_sent as f64,
        "{} ACKs vs {} without the extension",
        a.receiver.ack_frames_sent,
        b.receiver.ack_frames_sent
    );
    assert!(
        a.took.as_secs_f64() <= 1.05 * b.took.as_secs_f64(),
        "{:?} vs {:?}",
        a.took,
        b.took
    );
}

/// With losses the window stays small, so ACKs stay frequent; what matters is that loss
/// recovery is as fast as with every-other-packet ACKs.
#[test]
fn adaptive_policy_recovers_losses_as_fast() {
    let (mut took, mut base_took) = (Duration::ZERO, Duration::ZERO);
    let mut immediate = 0;
    for seed in 10..16 {
        let a = download(seed, AckFrequencyPolicy::Adaptive, 0.02, 1_500_000);
        let b = download(seed, AckFrequencyPolicy::None, 0.02, 1_500_000);
        assert!(a.sender.packets_lost > 0 && b.sender.packets_lost > 0);
        took += a.took;
        base_took += b.took;
        immediate += a.sender.immediate_acks_sent;
    }
    assert!(immediate > 0, "losses and tails ask for immediate ACKs");
    // No worse than with every-other-packet ACKs (5 % slack for the different loss
    // patterns the two runs meet).
    assert!(
        took.as_secs_f64() <= 1.05 * base_took.as_secs_f64(),
        "{took:?} vs {base_took:?}"
    );
}

/// A sender that runs out of data asks for an immediate ACK, so its last packet is not held
/// for the peer's max_ack_delay (25 ms): a small write on an idle connection is acknowledged
/// one path RTT (30 ms) after it was sent.
#[test]
fn immediate_ack_on_the_last_packet_before_idle() {
    let time_to_ack = |policy| {
        let client = TransportConfig {
            ack_frequency: policy,
            ..TransportConfig::default()
        };
        let link = LinkSpec {
            delay: Duration::from_millis(15),
            ..LinkSpec::default()
        };
        let mut pair = Pair::new(5, TransportConfig::default(), link.clone(), link);
        let ch = pair.connect(client);
        // Handshake done and the connection idle.
        pair.run_until(Duration::from_millis(300), |_| false);
        let c = pair.client.connection_mut(ch).unwrap();
        let id = c.open_stream(Dir::Uni).unwrap();
        c.write(id, &payload(500, 5)).unwrap();
        c.finish(id).unwrap();
        let sent = pair.now;
        let acked = pair.run_until(Duration::from_secs(1), |p| {
            let c = p.client.connection_mut(ch).unwrap();
            std::iter::from_fn(|| c.poll())
                .any(|e| matches!(e, Event::Stream(StreamEvent::Finished(s)) if s == id))
        });
        assert!(acked);
        let c = pair.client.connection(ch).unwrap();
        (pair.now - sent, c.stats().immediate_acks_sent)
    };
    let (with, sent) = time_to_ack(AckFrequencyPolicy::Adaptive);
    let (without, none) = time_to_ack(AckFrequencyPolicy::None);
    assert!(sent >= 1 && none == 0);
    assert!(with < Duration::from_millis(35), "{with:?}");
    assert!(without >= Duration::from_millis(50), "{without:?}");
}

/// Writes one raw frame, once, among the control frames of a 1-RTT packet.
#[derive(Debug, Clone)]
struct RawFrame(Vec<u8>);

impl ExtensionFactory for RawFrame {
    fn build(&self, _side: Side) -> Box<dyn ConnectionExtension> {
        Box::new(RawWriter(Some(self.0.clone())))
    }
}

struct RawWriter(Option<Vec<u8>>);

impl ConnectionExtension for RawWriter {
    fn name(&self) -> &'static str {
        "raw"
    }
    fn wants_to_send(&self) -> bool {
        self.0.is_some()
    }
    fn write_frames(&mut self, _cx: &mut ExtensionCx<'_>, buf: &mut Vec<u8>, max: usize) -> bool {
        match self.0.take_if(|f| f.len() <= max) {
            Some(f) => {
                buf.extend_from_slice(&f);
                true
            }
            None => false,
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// The client sends `frame`; returns how the connection ended, if it did.
fn connection_end(frame: Vec<u8>, server: TransportConfig) -> Option<String> {
    let mut client = TransportConfig::default();
    client.extensions.push(Arc::new(RawFrame(frame)));
    let mut pair = Pair::new(7, server, LinkSpec::default(), LinkSpec::default());
    let ch = pair.connect(client);
    let mut x = Exchange::new(ch, payload(100, 1), payload(100, 2));
    x.run(&mut pair, Duration::from_secs(2));
    x.error
}

/// ACK_FREQUENCY: type 0xaf (two-byte varint 0x40 0xaf), seq, threshold, delay (µs),
/// reordering.
fn ack_frequency(delay_us: u16) -> Vec<u8> {
    let mut f = vec![0x40, 0xaf, 0x00, 0x04];
    f.extend_from_slice(&(0x4000 | delay_us).to_be_bytes());
    f.push(0x01);
    f
}

#[test]
fn invalid_requests_close_the_connection() {
    let closed_with = |code: u64| format!("transport error 0x{code:x} ");
    // Below the 1 ms min_ack_delay we advertise: PROTOCOL_VIOLATION.
    let end = connection_end(ack_frequency(500), TransportConfig::default()).unwrap();
    assert!(end.contains(&closed_with(0x0a)), "{end}");
    // A server that did not advertise min_ack_delay does not know the frames:
    // FRAME_ENCODING_ERROR.
    let without = TransportConfig {
        min_ack_delay: None,
        ..TransportConfig::default()
    };
    for frame in [ack_frequency(5000), vec![0x1f]] {
        let end = connection_end(frame, without.clone()).unwrap();
        assert!(end.contains(&closed_with(0x07)), "{end}");
    }
    // A valid request is taken.
    assert_eq!(
        connection_end(ack_frequency(5000), TransportConfig::default()),
        None
    );
}
