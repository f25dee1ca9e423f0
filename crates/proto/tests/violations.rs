//! A peer that breaks the rules with well-formed frames: a test extension on the client
//! writes raw frames into one of its 1-RTT packets. The server must close with the error
//! code the RFCs name, and must not deliver what the frames carried.

use std::any::Any;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use qfec_proto::coding::put_varint;
use qfec_proto::frame::Frame;
use qfec_proto::{
    ConnectionError, ConnectionExtension, ConnectionHandle, Dir, ExtensionCx, ExtensionFactory,
    Side, TransportConfig, error_code,
};
use qfec_testkit::{LinkSpec, Pair};

/// Frames the client's injector writes into its next 1-RTT packet, once.
#[derive(Debug, Default)]
struct Pending(Mutex<Option<Vec<u8>>>);

#[derive(Debug)]
struct InjectorFactory(Arc<Pending>);

impl ExtensionFactory for InjectorFactory {
    fn build(&self, side: Side) -> Box<dyn ConnectionExtension> {
        Box::new(Injector {
            pending: (side == Side::Client).then(|| self.0.clone()),
        })
    }
}

struct Injector {
    pending: Option<Arc<Pending>>,
}

impl ConnectionExtension for Injector {
    fn name(&self) -> &'static str {
        "injector"
    }

    fn wants_to_send(&self) -> bool {
        self.pending
            .as_ref()
            .is_some_and(|p| p.0.lock().unwrap().is_some())
    }

    fn write_frames(&mut self, _cx: &mut ExtensionCx<'_>, buf: &mut Vec<u8>, max: usize) -> bool {
        let Some(p) = &self.pending else {
            return false;
        };
        let mut slot = p.0.lock().unwrap();
        match slot.take() {
            Some(frames) if frames.len() <= max => {
                buf.extend_from_slice(&frames);
                true
            }
            other => {
                *slot = other;
                false
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// An established pair whose client can inject frames; the server's transport is `server`.
fn pair_with_injector(
    seed: u64,
    server: TransportConfig,
) -> (Pair, Arc<Pending>, ConnectionHandle, ConnectionHandle) {
    let pending = Arc::new(Pending::default());
    let mut pair = Pair::new(
        seed,
        server.clone(),
        LinkSpec::default(),
        LinkSpec::default(),
    );
    // The client offers multipath when the server does (so its frames are negotiated).
    let client = TransportConfig {
        extensions: vec![Arc::new(InjectorFactory(pending.clone()))],
        max_datagram_frame_size: Some(1200),
        multipath: server.multipath.clone(),
        ..TransportConfig::default()
    };
    let ch = pair.connect(client);
    let mut sh = None;
    assert!(pair.run_until(Duration::from_secs(5), |p| {
        sh = sh.or(p.server.accept());
        p.client.connection(ch).unwrap().handshake_confirmed()
    }));
    (pair, pending, ch, sh.expect("the server accepted"))
}

/// Injects `frames`, runs a while, and returns the server's error.
fn inject(
    pair: &mut Pair,
    pending: &Pending,
    ch: ConnectionHandle,
    sh: ConnectionHandle,
    frames: Vec<u8>,
) -> Option<ConnectionError> {
    *pending.0.lock().unwrap() = Some(frames);
    // Borrowing the connection marks it for another look at what it may send.
    pair.client.connection_mut(ch).unwrap();
    pair.run_until(Duration::from_secs(2), |p| {
        p.server.connection(sh).is_none_or(|s| s.error().is_some())
    });
    assert!(
        pending.0.lock().unwrap().is_none(),
        "the injected frames went out"
    );
    pair.server.connection(sh).and_then(|s| s.error().cloned())
}

/// A STREAM frame with an explicit offset and length.
fn stream_frame(out: &mut Vec<u8>, id: u64, offset: u64, data: &[u8]) {
    put_varint(out, 0x08 | 0x04 | 0x02);
    put_varint(out, id);
    put_varint(out, offset);
    put_varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

fn closed_with(err: &Option<ConnectionError>, code: u64) -> bool {
    matches!(err, Some(ConnectionError::TransportError(e)) if e.code == code)
}

#[test]
fn data_beyond_max_data_closes_with_flow_control_error() {
    // Each stream stays inside its own window; together they pass the connection's.
    let server = TransportConfig {
        receive_window: 16 * 1024,
        max_receive_window: 16 * 1024,
        stream_receive_window: 64 * 1024,
        max_stream_receive_window: 64 * 1024,
        ..TransportConfig::default()
    };
    let (mut pair, pending, ch, sh) = pair_with_injector(61, server);
    let mut frames = Vec::new();
    // Client-initiated unidirectional streams 2 and 6: highest offsets 9100 each, 18200 in
    // all against a 16384-byte MAX_DATA.
    stream_frame(&mut frames, 2, 9000, &[7; 100]);
    stream_frame(&mut frames, 6, 9000, &[7; 100]);
    let err = inject(&mut pair, &pending, ch, sh, frames);
    assert!(
        closed_with(&err, error_code::FLOW_CONTROL_ERROR),
        "the server closed with {err:?}"
    );
}

#[test]
fn data_inside_max_data_is_accepted() {
    // The same frames against a window that holds them: no error (the control for the test
    // above).
    let server = TransportConfig {
        receive_window: 32 * 1024,
        max_receive_window: 32 * 1024,
        stream_receive_window: 64 * 1024,
        max_stream_receive_window: 64 * 1024,
        ..TransportConfig::default()
    };
    let (mut pair, pending, ch, sh) = pair_with_injector(62, server);
    let mut frames = Vec::new();
    stream_frame(&mut frames, 2, 9000, &[7; 100]);
    stream_frame(&mut frames, 6, 9000, &[7; 100]);
    let err = inject(&mut pair, &pending, ch, sh, frames);
    assert!(err.is_none(), "{err:?}");
    let s = pair.server.connection_mut(sh).unwrap();
    assert_eq!(s.accept_stream(Dir::Uni).map(|id| id.0), Some(2));
}

#[test]
fn a_datagram_above_max_datagram_frame_size_closes_with_protocol_violation() {
    let server = TransportConfig {
        max_datagram_frame_size: Some(500),
        ..TransportConfig::default()
    };
    let (mut pair, pending, ch, sh) = pair_with_injector(63, server.clone());
    // Type (1 byte), length (2 bytes), 497 bytes: 500 in all, the limit.
    let mut fits = Vec::new();
    put_varint(&mut fits, 0x31);
    put_varint(&mut fits, 497);
    fits.extend_from_slice(&[1; 497]);
    assert_eq!(fits.len(), 500);
    let err = inject(&mut pair, &pending, ch, sh, fits);
    assert!(err.is_none(), "a DATAGRAM at the limit is fine: {err:?}");
    let s = pair.server.connection_mut(sh).unwrap();
    assert_eq!(s.recv_datagram().map(|d| d.len()), Some(497));
    // One byte more.
    let mut over = Vec::new();
    put_varint(&mut over, 0x31);
    put_varint(&mut over, 498);
    over.extend_from_slice(&[2; 498]);
    let err = inject(&mut pair, &pending, ch, sh, over);
    assert!(
        closed_with(&err, error_code::PROTOCOL_VIOLATION),
        "the server closed with {err:?}"
    );
    let s = pair.server.connection_mut(sh).unwrap();
    assert!(
        s.recv_datagram().is_none(),
        "the oversized DATAGRAM was not delivered"
    );
}

#[test]
fn a_datagram_to_a_peer_that_did_not_offer_them_closes_with_protocol_violation() {
    // RFC 9221 §3: without max_datagram_frame_size, a DATAGRAM frame is a violation.
    let (mut pair, pending, ch, sh) = pair_with_injector(64, TransportConfig::default());
    let mut frame = Vec::new();
    put_varint(&mut frame, 0x31);
    put_varint(&mut frame, 10);
    frame.extend_from_slice(&[3; 10]);
    let err = inject(&mut pair, &pending, ch, sh, frame);
    assert!(
        closed_with(&err, error_code::PROTOCOL_VIOLATION),
        "the server closed with {err:?}"
    );
}

/// A server (and client) offering multipath with path IDs up to 2.
fn multipath_server() -> TransportConfig {
    TransportConfig {
        multipath: Some(qfec_proto::MultipathConfig {
            max_path_id: 2,
            ..qfec_proto::MultipathConfig::default()
        }),
        ..TransportConfig::default()
    }
}

fn encode(frames: &[Frame<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        f.encode(&mut out);
    }
    out
}

#[test]
fn multipath_frames_beyond_the_limits_close_with_protocol_violation() {
    let cid = qfec_proto::ConnectionId::new(&[5; 8]);
    let cases: Vec<(&str, Frame<'static>)> = vec![
        (
            "PATH_NEW_CONNECTION_ID above the path ID limit",
            Frame::PathNewConnectionId {
                path_id: 3,
                seq: 0,
                retire_prior_to: 0,
                cid,
                reset_token: [1; 16],
            },
        ),
        (
            "PATH_ABANDON above the path ID limit",
            Frame::PathAbandon {
                path_id: 7,
                error_code: 0,
            },
        ),
        (
            "PATH_STATUS above the path ID limit",
            Frame::PathStatus {
                path_id: 3,
                seq: 1,
                available: false,
            },
        ),
        ("MAX_PATH_ID below initial_max_path_id", Frame::MaxPathId(1)),
        ("PATHS_BLOCKED above our limit", Frame::PathsBlocked(9)),
        (
            "PATH_CIDS_BLOCKED for an ID never issued",
            Frame::PathCidsBlocked {
                path_id: 1,
                next_seq: 50,
            },
        ),
        (
            "PATH_RETIRE_CONNECTION_ID of an unissued sequence number",
            Frame::PathRetireConnectionId {
                path_id: 2,
                seq: 40,
            },
        ),
    ];
    for (i, (what, frame)) in cases.into_iter().enumerate() {
        let (mut pair, pending, ch, sh) = pair_with_injector(70 + i as u64, multipath_server());
        let err = inject(&mut pair, &pending, ch, sh, encode(&[frame]));
        assert!(
            closed_with(&err, error_code::PROTOCOL_VIOLATION),
            "{what}: the server closed with {err:?}"
        );
    }
}

#[test]
fn multipath_frames_within_the_limits_are_accepted() {
    // The control for the test above: the same kinds of frames, legal.
    let (mut pair, pending, ch, sh) = pair_with_injector(80, multipath_server());
    let frames = encode(&[
        Frame::PathStatus {
            path_id: 2,
            seq: 4,
            available: false,
        },
        // Older status of the same path: ignored.
        Frame::PathStatus {
            path_id: 2,
            seq: 3,
            available: true,
        },
        Frame::MaxPathId(5),
        Frame::PathsBlocked(2),
        Frame::PathCidsBlocked {
            path_id: 1,
            next_seq: 0,
        },
        // An abandoned path that never opened is not an error (draft §3.4).
        Frame::PathAbandon {
            path_id: 2,
            error_code: 0,
        },
        // Frames about an abandoned path are ignored.
        Frame::PathStatus {
            path_id: 2,
            seq: 9,
            available: true,
        },
    ]);
    let err = inject(&mut pair, &pending, ch, sh, frames);
    assert!(err.is_none(), "{err:?}");
    assert!(pair.server.connection(sh).unwrap().is_established());
}

#[test]
fn a_path_ack_of_packets_never_sent_closes_with_protocol_violation() {
    let (mut pair, pending, ch, sh) = pair_with_injector(81, multipath_server());
    // Path 0 exists; the server never sent packet 100000 on it.
    let mut frame = Vec::new();
    put_varint(&mut frame, 0x3e);
    put_varint(&mut frame, 0); // path 0
    put_varint(&mut frame, 100_000); // largest acknowledged
    put_varint(&mut frame, 0); // delay
    put_varint(&mut frame, 0); // no more ranges
    put_varint(&mut frame, 0); // first range
    let err = inject(&mut pair, &pending, ch, sh, frame);
    assert!(
        closed_with(&err, error_code::PROTOCOL_VIOLATION),
        "the server closed with {err:?}"
    );
}

#[test]
fn multipath_frames_without_multipath_are_unknown_frames() {
    // Neither side offered multipath: its frame types mean nothing (RFC 9000 §12.4).
    let (mut pair, pending, ch, sh) = pair_with_injector(82, TransportConfig::default());
    let frame = encode(&[Frame::MaxPathId(4)]);
    let err = inject(&mut pair, &pending, ch, sh, frame);
    assert!(
        closed_with(&err, error_code::FRAME_ENCODING_ERROR),
        "the server closed with {err:?}"
    );
}

/// A client extension that advertises `initial_max_path_id` = 2 through the extension
/// parameters, whatever the endpoint's connection IDs.
#[derive(Debug)]
struct MaxPathIdFactory;

impl ExtensionFactory for MaxPathIdFactory {
    fn build(&self, _side: Side) -> Box<dyn ConnectionExtension> {
        Box::new(MaxPathIdParam)
    }
}

struct MaxPathIdParam;

impl ConnectionExtension for MaxPathIdParam {
    fn name(&self) -> &'static str {
        "max-path-id-param"
    }

    fn transport_parameters(&self, out: &mut Vec<(u64, Vec<u8>)>) {
        out.push((
            qfec_proto::transport_params::id::INITIAL_MAX_PATH_ID,
            vec![2],
        ));
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Draft-21 §2.1: initial_max_path_id carried by a packet with a zero-length connection ID
/// is a PROTOCOL_VIOLATION. The client here uses zero-length IDs and advertises it anyway.
#[test]
fn initial_max_path_id_with_a_zero_length_connection_id_closes_with_protocol_violation() {
    // The other way round, a client with 8-byte IDs that offers multipath the usual way.
    for (cid_len, violation) in [(0, true), (8, false)] {
        let mut pair = Pair::new(
            64,
            multipath_server(),
            LinkSpec::default(),
            LinkSpec::default(),
        );
        pair.client = qfec_proto::Endpoint::new(
            Arc::new(qfec_proto::EndpointConfig {
                local_cid_len: cid_len,
                ..qfec_proto::EndpointConfig::default()
            }),
            None,
            64,
        );
        let ch = pair.connect(if violation {
            TransportConfig {
                extensions: vec![Arc::new(MaxPathIdFactory)],
                ..TransportConfig::default()
            }
        } else {
            multipath_server()
        });
        pair.run_until(Duration::from_secs(5), |p| {
            let c = p.client.connection(ch).unwrap();
            c.error().is_some() || c.handshake_confirmed()
        });
        let c = pair.client.connection(ch).unwrap();
        let err = c.error().cloned();
        if violation {
            assert!(
                matches!(
                    &err,
                    Some(ConnectionError::ConnectionClosed { code, .. })
                        if *code == error_code::PROTOCOL_VIOLATION
                ),
                "the server closed with {err:?}"
            );
        } else {
            assert!(err.is_none() && c.handshake_confirmed(), "{err:?}");
        }
    }
}
