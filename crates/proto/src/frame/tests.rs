use proptest::prelude::*;

use super::*;
use crate::coding::{VARINT_MAX, put_varint};
use crate::range_set::RangeSet;

fn all_on() -> FrameRegistry<'static> {
    FrameRegistry {
        datagram: true,
        ack_frequency: true,
        multipath: true,
        extensions: None,
    }
}

fn parse_all<'a>(buf: &'a [u8], reg: &'a FrameRegistry<'a>) -> Result<Vec<Frame<'a>>, FrameError> {
    parse_frames(buf, reg).collect()
}

fn roundtrip(f: &Frame<'_>) {
    let reg = all_on();
    let mut buf = Vec::new();
    f.encode(&mut buf);
    assert_eq!(buf.len(), f.encoded_len(), "{f:?}");
    let got = parse_all(&buf, &reg).unwrap();
    assert_eq!(got, vec![f.clone()]);
    assert_eq!(got[0].ty(), f.ty());
}

fn err_of(bytes: &[u8]) -> FrameError {
    let reg = all_on();
    parse_frames(bytes, &reg)
        .find_map(|r| r.err())
        .expect("expected an error")
}

#[test]
fn fixed_examples_roundtrip() {
    let cid = ConnectionId::new(&[1, 2, 3, 4]);
    let frames = [
        Frame::Padding { len: 7 },
        Frame::Ping,
        Frame::Ack(Ack::single(1000, 25, 10, None)),
        Frame::Ack(Ack::single(
            5,
            0,
            5,
            Some(EcnCounts {
                ect0: 1,
                ect1: 2,
                ce: 300,
            }),
        )),
        Frame::ResetStream {
            id: StreamId(4),
            error_code: 9,
            final_size: 1 << 40,
        },
        Frame::StopSending {
            id: StreamId(7),
            error_code: 0,
        },
        Frame::Crypto {
            offset: 0,
            data: b"hello",
        },
        Frame::NewToken { token: b"tok" },
        Frame::Stream(StreamFrame {
            id: StreamId(0),
            offset: 0,
            fin: false,
            data: b"",
        }),
        Frame::Stream(StreamFrame {
            id: StreamId(9),
            offset: 77,
            fin: true,
            data: b"abc",
        }),
        Frame::MaxData(1 << 30),
        Frame::MaxStreamData {
            id: StreamId(3),
            max: 5,
        },
        Frame::MaxStreams {
            dir: Dir::Bi,
            count: MAX_STREAM_COUNT,
        },
        Frame::MaxStreams {
            dir: Dir::Uni,
            count: 0,
        },
        Frame::DataBlocked { limit: 8 },
        Frame::StreamDataBlocked {
            id: StreamId(2),
            limit: 9,
        },
        Frame::StreamsBlocked {
            dir: Dir::Bi,
            limit: 1,
        },
        Frame::StreamsBlocked {
            dir: Dir::Uni,
            limit: 2,
        },
        Frame::NewConnectionId {
            seq: 3,
            retire_prior_to: 1,
            cid,
            reset_token: [7; 16],
        },
        Frame::RetireConnectionId { seq: 2 },
        Frame::PathChallenge([1; 8]),
        Frame::PathResponse([2; 8]),
        Frame::ConnectionClose(ConnectionClose {
            is_application: false,
            error_code: 7,
            frame_type: 6,
            reason: b"bad",
        }),
        Frame::ConnectionClose(ConnectionClose {
            is_application: true,
            error_code: 77,
            frame_type: 0,
            reason: b"",
        }),
        Frame::HandshakeDone,
        Frame::Datagram { data: b"dgram" },
        Frame::AckFrequency {
            seq: 1,
            ack_eliciting_threshold: 9,
            request_max_ack_delay: 25_000,
            reordering_threshold: 3,
        },
        Frame::ImmediateAck,
    ];
    for f in &frames {
        roundtrip(f);
    }
    // Every strict prefix of a frame with a fixed layout is detected as truncated.
    let reg = all_on();
    for f in frames
        .iter()
        .filter(|f| !matches!(f, Frame::Padding { .. }))
    {
        let mut buf = Vec::new();
        f.encode(&mut buf);
        for k in 1..buf.len() {
            let items: Vec<_> = parse_frames(&buf[..k], &reg).collect();
            assert!(
                items.iter().any(|i| i.is_err()),
                "{f:?} prefix {k} decoded as {items:?}"
            );
        }
    }
}

#[test]
fn ack_ranges_from_rangeset() {
    let rs: RangeSet = [0..3, 5..6, 10..20, 22..23].into_iter().collect();
    for max in [1, 2, 4, 10] {
        let mut buf = Vec::new();
        encode_ack(&mut buf, &rs, 3, None, max);
        assert_eq!(buf.len(), ack_encoded_len(&rs, 3, None, max));
        let reg = FrameRegistry::default();
        let frames = parse_all(&buf, &reg).unwrap();
        let Frame::Ack(ack) = &frames[0] else {
            panic!()
        };
        let got: Vec<_> = ack.ranges().collect();
        let expect: Vec<_> = rs
            .iter()
            .rev()
            .take(max)
            .map(|r| r.start..=r.end - 1)
            .collect();
        assert_eq!(got, expect);
        assert_eq!(ack.range_count(), expect.len() as u64);
        assert_eq!(ack.delay_micros(3), 24);
        roundtrip(&frames[0]);
    }
    let mut buf = Vec::new();
    encode_ack(&mut buf, &RangeSet::new(), 0, None, 4);
    assert!(buf.is_empty());
}

#[test]
fn ack_validation() {
    // first range larger than largest
    assert_eq!(
        err_of(&[0x02, 5, 0, 0, 6]).code,
        error_code::FRAME_ENCODING_ERROR
    );
    // gap underflow: largest 5, first 0 -> smallest 5; gap 4 -> 5-4-2 < 0
    assert_eq!(
        err_of(&[0x02, 5, 0, 1, 0, 4, 0]).reason,
        "ACK range below zero"
    );
    // len underflow
    assert_eq!(
        err_of(&[0x02, 5, 0, 1, 0, 0, 4]).reason,
        "ACK range below zero"
    );
    // valid: 5, then gap 0 -> largest 3, len 3 -> 0
    let reg = FrameRegistry::default();
    let f = parse_all(&[0x02, 5, 0, 1, 0, 0, 3], &reg).unwrap();
    let Frame::Ack(a) = &f[0] else { panic!() };
    assert_eq!(a.ranges().collect::<Vec<_>>(), vec![5..=5, 0..=3]);
    assert_eq!(a.smallest(), 0);
    // huge range count is rejected before looping
    let mut b = vec![0x02, 5, 0];
    put_varint(&mut b, VARINT_MAX);
    b.push(0);
    assert_eq!(err_of(&b).reason, "ACK range count exceeds frame");
}

#[test]
fn decode_validation() {
    let enc = error_code::FRAME_ENCODING_ERROR;
    // unknown / disabled types
    assert_eq!(err_of(&[0x21]).code, enc);
    let plain = FrameRegistry::default();
    assert_eq!(parse_all(&[0x30, 1], &plain).unwrap_err().ty, 0x30);
    assert_eq!(parse_all(&[0x1f], &plain).unwrap_err().code, enc);
    // non-minimal frame type
    assert_eq!(err_of(&[0x40, 0x01]).code, error_code::PROTOCOL_VIOLATION);
    // stream offset + len beyond 2^62-1
    let mut b = vec![0x0e, 0];
    put_varint(&mut b, VARINT_MAX);
    b.extend_from_slice(&[1, 0xaa]);
    assert_eq!(err_of(&b).code, enc);
    let mut b = vec![0x06];
    put_varint(&mut b, VARINT_MAX);
    b.extend_from_slice(&[1, 0xaa]);
    assert_eq!(err_of(&b).code, enc);
    // stream count above 2^60
    let mut b = vec![0x12];
    put_varint(&mut b, MAX_STREAM_COUNT + 1);
    assert_eq!(err_of(&b).code, enc);
    let mut b = vec![0x17];
    put_varint(&mut b, MAX_STREAM_COUNT + 1);
    assert_eq!(err_of(&b).code, enc);
    // NEW_CONNECTION_ID: bad lengths, retire_prior_to > seq
    let ncid = |seq: u8, rpt: u8, len: u8| {
        let mut b = vec![0x18, seq, rpt, len];
        b.extend(std::iter::repeat_n(1u8, len as usize + 16));
        b
    };
    assert_eq!(err_of(&ncid(1, 0, 0)).code, enc);
    assert_eq!(err_of(&ncid(1, 0, 21)).code, enc);
    assert_eq!(err_of(&ncid(1, 2, 8)).code, enc);
    assert!(parse_all(&ncid(2, 2, 20), &plain).is_ok());
    // empty NEW_TOKEN
    assert_eq!(err_of(&[0x07, 0]).code, enc);
    // close reason beyond the buffer
    assert_eq!(err_of(&[0x1c, 0, 0, 5, b'a']).code, enc);
    // truncation of every fixed frame
    assert_eq!(err_of(&[0x1a, 1, 2, 3]).code, enc);
    assert_eq!(err_of(&[0x04, 1, 2]).code, enc);
}

#[test]
fn padding_collapses_and_iteration_stops_after_error() {
    let reg = FrameRegistry::default();
    let got = parse_all(&[0, 0, 0, 1, 0, 0x1e], &reg).unwrap();
    assert_eq!(
        got,
        vec![
            Frame::Padding { len: 3 },
            Frame::Ping,
            Frame::Padding { len: 1 },
            Frame::HandshakeDone
        ]
    );
    let items: Vec<_> = parse_frames(&[1, 0x21, 1], &reg).collect();
    assert_eq!(items.len(), 2);
    assert!(items[1].is_err());
}

#[test]
fn stream_without_length_takes_rest() {
    let mut b = Vec::new();
    encode_stream_header(&mut b, StreamId(4), 10, 3, true, false);
    assert_eq!(b.len(), stream_header_len(StreamId(4), 10, 3, false));
    b.extend_from_slice(b"xyz");
    let reg = FrameRegistry::default();
    let f = parse_all(&b, &reg).unwrap();
    assert_eq!(
        f,
        vec![Frame::Stream(StreamFrame {
            id: StreamId(4),
            offset: 10,
            fin: true,
            data: b"xyz"
        })]
    );
    let mut b = Vec::new();
    encode_datagram_header(&mut b, 2, false);
    b.extend_from_slice(b"hi");
    assert_eq!(
        parse_all(&b, &all_on()).unwrap(),
        vec![Frame::Datagram { data: b"hi" }]
    );
}

#[test]
fn table3_rules() {
    use PacketKind::*;
    let ack = Frame::Ack(Ack::single(1, 0, 0, None));
    assert!(ack.allowed_in(Initial) && ack.allowed_in(Handshake) && !ack.allowed_in(ZeroRtt));
    let app_close = Frame::ConnectionClose(ConnectionClose {
        is_application: true,
        error_code: 0,
        frame_type: 0,
        reason: b"",
    });
    assert!(!app_close.allowed_in(Initial) && app_close.allowed_in(ZeroRtt));
    assert!(!Frame::HandshakeDone.allowed_in(ZeroRtt) && Frame::HandshakeDone.allowed_in(OneRtt));
    assert!(!Frame::MaxData(1).allowed_in(Handshake) && Frame::MaxData(1).allowed_in(ZeroRtt));
    assert!(Frame::Datagram { data: b"" }.allowed_in(ZeroRtt));
    assert!(!Frame::ImmediateAck.allowed_in(ZeroRtt));
    assert!(!ack.is_ack_eliciting() && !Frame::Padding { len: 1 }.is_ack_eliciting());
    assert!(Frame::Ping.is_ack_eliciting() && !app_close.is_ack_eliciting());
}

/// A toy extension: types 0x40..=0x41 carrying one varint.
struct Toy;
impl ExtensionFrames for Toy {
    fn decode_body(&self, ty: u64, r: &mut Reader<'_>) -> Option<Result<(), FrameError>> {
        (0x40..=0x41).contains(&ty).then(|| {
            r.varint()
                .map(|_| ())
                .map_err(|_| FrameError::encoding(ty, "toy truncated"))
        })
    }
    fn is_ack_eliciting(&self, ty: u64) -> bool {
        ty == 0x40
    }
    fn allowed_in(&self, _ty: u64, kind: PacketKind) -> bool {
        kind == PacketKind::OneRtt
    }
}

#[test]
fn extensions_plug_in() {
    let reg = FrameRegistry {
        extensions: Some(&Toy),
        ..FrameRegistry::default()
    };
    let bytes = [0x40, 0x40, 0x41, 0x05, 0x01, 0x40, 0x41];
    let items: Vec<_> = parse_frames(&bytes, &reg).collect();
    assert_eq!(
        items[0],
        Ok(Frame::Extension {
            ty: 0x40,
            body: &[0x41, 0x05]
        })
    );
    assert_eq!(items[1], Ok(Frame::Ping));
    assert_eq!(items[2].as_ref().unwrap_err().reason, "toy truncated");
    let f = Frame::Extension {
        ty: 0x41,
        body: &[0x05],
    };
    assert!(!reg.is_ack_eliciting(&f));
    assert!(reg.allowed_in(&f, PacketKind::OneRtt) && !reg.allowed_in(&f, PacketKind::Initial));
    roundtrip_with(&f, &reg);
    assert!(format!("{reg:?}").contains("extensions: true"));
}

fn roundtrip_with(f: &Frame<'_>, reg: &FrameRegistry) {
    let mut buf = Vec::new();
    f.encode(&mut buf);
    assert_eq!(buf.len(), f.encoded_len());
    assert_eq!(parse_all(&buf, reg).unwrap(), vec![f.clone()]);
}

#[test]
fn error_maps_to_transport_error() {
    let e: TransportError = FrameError::encoding(0x12, "x").into();
    assert_eq!(
        (e.code, e.frame_type),
        (error_code::FRAME_ENCODING_ERROR, Some(0x12))
    );
}

fn arb_bytes() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..40)
}

fn v62() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..64, 0u64..20_000, 0..=VARINT_MAX]
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let reg = FrameRegistry { extensions: Some(&Toy), ..all_on() };
        for f in parse_frames(&bytes, &reg).map_while(Result::ok) {
            // Whatever decodes re-encodes to exactly its length and decodes to itself.
            let mut buf = Vec::new();
            f.encode(&mut buf);
            prop_assert_eq!(buf.len(), f.encoded_len());
            prop_assert_eq!(parse_all(&buf, &reg).unwrap(), vec![f.clone()]);
            if let Frame::Ack(a) = &f {
                prop_assert_eq!(a.ranges().count() as u64, a.range_count());
            }
        }
    }

    #[test]
    fn arbitrary_frames_roundtrip(
        a in v62(), b in v62(), c in v62(), d in v62(), data in arb_bytes(), fin: bool, which in 0u8..22,
    ) {
        let small = a % (MAX_STREAM_COUNT + 1);
        let data = &data[..];
        let f = match which {
            0 => Frame::ResetStream { id: StreamId(a), error_code: b, final_size: c },
            1 => Frame::StopSending { id: StreamId(a), error_code: b },
            2 => Frame::Crypto { offset: a.min(VARINT_MAX - data.len() as u64), data },
            3 => Frame::Stream(StreamFrame { id: StreamId(b), offset: a.min(VARINT_MAX - data.len() as u64), fin, data }),
            4 => Frame::MaxStreamData { id: StreamId(a), max: b },
            5 => Frame::MaxStreams { dir: if fin { Dir::Bi } else { Dir::Uni }, count: small },
            6 => Frame::StreamsBlocked { dir: if fin { Dir::Bi } else { Dir::Uni }, limit: small },
            7 => Frame::NewConnectionId {
                seq: a.max(b), retire_prior_to: a.min(b),
                cid: ConnectionId::new(&[9; 20][..1 + (c % 20) as usize]), reset_token: [3; 16],
            },
            8 => Frame::ConnectionClose(ConnectionClose { is_application: fin, error_code: a, frame_type: if fin { 0 } else { b }, reason: data }),
            9 => Frame::Datagram { data },
            10 => Frame::AckFrequency { seq: a, ack_eliciting_threshold: b, request_max_ack_delay: c, reordering_threshold: d },
            11 => Frame::Ack(Ack::single(a.max(b), c, a.min(b), fin.then_some(EcnCounts { ect0: a, ect1: b, ce: d }))),
            12 => Frame::StreamDataBlocked { id: StreamId(c), limit: d },
            13 => Frame::PathAck {
                path_id: d % (MAX_PATH_ID + 1),
                ack: Ack::single(a.max(b), c, a.min(b), fin.then_some(EcnCounts { ect0: a, ect1: b, ce: d })),
            },
            14 => Frame::PathAbandon { path_id: a % (MAX_PATH_ID + 1), error_code: b },
            15 => Frame::PathStatus { path_id: a % (MAX_PATH_ID + 1), seq: b, available: fin },
            16 => Frame::PathNewConnectionId {
                path_id: d % (MAX_PATH_ID + 1), seq: a.max(b), retire_prior_to: a.min(b),
                cid: ConnectionId::new(&[7; 20][..1 + (c % 20) as usize]), reset_token: [5; 16],
            },
            17 => Frame::PathRetireConnectionId { path_id: a % (MAX_PATH_ID + 1), seq: b },
            18 => Frame::MaxPathId(a % (MAX_PATH_ID + 1)),
            19 => Frame::PathsBlocked(b % (MAX_PATH_ID + 1)),
            20 => Frame::PathCidsBlocked { path_id: c % (MAX_PATH_ID + 1), next_seq: d },
            _ => if data.is_empty() { Frame::Ping } else { Frame::NewToken { token: data } },
        };
        roundtrip(&f);
    }

    #[test]
    fn ack_encode_matches_rangeset(
        pns in proptest::collection::vec(0u64..500, 1..100), base in prop_oneof![Just(0u64), 0..VARINT_MAX - 1000],
        max in 1usize..8, ecn: bool,
    ) {
        let rs: RangeSet = pns.iter().map(|&p| base + p..base + p + 1).collect();
        let e = EcnCounts { ect0: 1, ect1: 0, ce: base };
        let mut buf = Vec::new();
        encode_ack(&mut buf, &rs, 7, ecn.then_some(&e), max);
        prop_assert_eq!(buf.len(), ack_encoded_len(&rs, 7, ecn.then_some(&e), max));
        let reg = FrameRegistry::default();
        let frames = parse_all(&buf, &reg).unwrap();
        let Frame::Ack(ack) = &frames[0] else { panic!() };
        let got: Vec<_> = ack.ranges().collect();
        let expect: Vec<_> = rs.iter().rev().take(max).map(|r| r.start..=r.end - 1).collect();
        prop_assert_eq!(got, expect);
        prop_assert_eq!(ack.ecn, ecn.then_some(e));
    }
}

/// The multipath frames against byte vectors written from draft-ietf-quic-multipath-21 §4.
#[test]
fn multipath_frames_match_the_draft() {
    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
    let cid = ConnectionId::new(&[0xc1, 0xc2, 0xc3, 0xc4]);
    // Types 0x3e75..0x3e7c are 2-byte varints (0x7e75, ...); 0x3e and 0x3f fit one byte.
    let cases = [
        // PATH_ACK, path 2, largest 10, delay 5, no more ranges, first range 3.
        (
            "3e 02 0a 05 00 03",
            Frame::PathAck {
                path_id: 2,
                ack: Ack::single(10, 5, 3, None),
            },
        ),
        (
            "3f 01 0a 05 00 03 01 02 03",
            Frame::PathAck {
                path_id: 1,
                ack: Ack::single(
                    10,
                    5,
                    3,
                    Some(EcnCounts {
                        ect0: 1,
                        ect1: 2,
                        ce: 3,
                    }),
                ),
            },
        ),
        (
            "7e75 03 3e",
            Frame::PathAbandon {
                path_id: 3,
                error_code: 0x3e,
            },
        ),
        (
            "7e76 01 07",
            Frame::PathStatus {
                path_id: 1,
                seq: 7,
                available: false,
            },
        ),
        (
            "7e77 01 08",
            Frame::PathStatus {
                path_id: 1,
                seq: 8,
                available: true,
            },
        ),
        (
            "7e78 02 05 01 04 c1c2c3c4 00112233445566778899aabbccddeeff",
            Frame::PathNewConnectionId {
                path_id: 2,
                seq: 5,
                retire_prior_to: 1,
                cid,
                reset_token: hex("00112233445566778899aabbccddeeff").try_into().unwrap(),
            },
        ),
        (
            "7e79 02 04",
            Frame::PathRetireConnectionId { path_id: 2, seq: 4 },
        ),
        ("7e7a 4100", Frame::MaxPathId(256)),
        ("7e7b 09", Frame::PathsBlocked(9)),
        (
            "7e7c 02 06",
            Frame::PathCidsBlocked {
                path_id: 2,
                next_seq: 6,
            },
        ),
    ];
    let reg = all_on();
    for (text, frame) in cases {
        let bytes = hex(text);
        let mut buf = Vec::new();
        frame.encode(&mut buf);
        assert_eq!(buf, bytes, "{frame:?}");
        assert_eq!(frame.encoded_len(), bytes.len());
        assert_eq!(parse_all(&bytes, &reg).unwrap(), vec![frame.clone()]);
        assert!(frame.allowed_in(PacketKind::OneRtt) && !frame.allowed_in(PacketKind::ZeroRtt));
    }
    assert!(
        !Frame::PathAck {
            path_id: 0,
            ack: Ack::single(1, 0, 0, None)
        }
        .is_ack_eliciting()
    );
    assert!(Frame::MaxPathId(1).is_ack_eliciting());
}

#[test]
fn multipath_frames_need_the_registry_and_a_32_bit_path_id() {
    // Without multipath enabled the types are unknown.
    let off = FrameRegistry {
        multipath: false,
        ..all_on()
    };
    let e = parse_frames(&[0x3e, 0x00, 0x00, 0x00, 0x00, 0x00], &off)
        .find_map(|r| r.err())
        .unwrap();
    assert_eq!(e.code, error_code::FRAME_ENCODING_ERROR);
    // A path ID of 2^32 (an 8-byte varint) is a protocol violation.
    let mut buf = Vec::new();
    put_varint(&mut buf, ty::MAX_PATH_ID);
    put_varint(&mut buf, 1 << 32);
    assert_eq!(err_of(&buf).code, error_code::PROTOCOL_VIOLATION);
    let mut buf = Vec::new();
    put_varint(&mut buf, ty::PATH_ABANDON);
    put_varint(&mut buf, MAX_PATH_ID);
    put_varint(&mut buf, 0);
    assert_eq!(
        parse_all(&buf, &all_on()).unwrap(),
        vec![Frame::PathAbandon {
            path_id: MAX_PATH_ID,
            error_code: 0
        }]
    );
    // PATH_NEW_CONNECTION_ID keeps NEW_CONNECTION_ID's rules.
    let mut buf = Vec::new();
    put_varint(&mut buf, ty::PATH_NEW_CONNECTION_ID);
    buf.extend_from_slice(&[1, 2, 3, 4, 1, 2, 3, 4]);
    buf.extend_from_slice(&[0; 16]);
    assert_eq!(
        err_of(&buf).code,
        error_code::FRAME_ENCODING_ERROR,
        "retire_prior_to > seq"
    );
}
