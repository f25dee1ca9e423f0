//! The frame loop (`qfec_proto::frame::parse_frames`) over arbitrary packet payloads, with the
//! registry switches chosen by the first byte: DATAGRAM, ACK_FREQUENCY, multipath, and the FEC
//! frame types owned by an extension whose body parser is `qfec_fec::wire::decode` (as a
//! connection with FEC has). Every decoded frame must encode to `encoded_len` bytes and decode back to
//! itself; ACK ranges must walk down without overlapping.

#![no_main]

use libfuzzer_sys::fuzz_target;
use qfec_fec::wire;
use qfec_proto::coding::Reader;
use qfec_proto::frame::{
    ExtensionFrames, Frame, FrameError, FrameRegistry, PacketKind, parse_frames,
};

/// The FEC frame types, parsed by qfec-fec's wire decoder.
struct FecFrames;

impl ExtensionFrames for FecFrames {
    fn decode_body(&self, ty: u64, r: &mut Reader<'_>) -> Option<Result<(), FrameError>> {
        wire::frame_type::ALL
            .contains(&ty)
            .then(|| wire::decode(ty, r).map(|_| ()))
    }
    fn is_ack_eliciting(&self, ty: u64) -> bool {
        ty != wire::frame_type::SYMBOL_ACK
    }
    fn allowed_in(&self, _ty: u64, kind: PacketKind) -> bool {
        kind == PacketKind::OneRtt
    }
}

static FEC: FecFrames = FecFrames;

const KINDS: [PacketKind; 4] = [
    PacketKind::Initial,
    PacketKind::ZeroRtt,
    PacketKind::Handshake,
    PacketKind::OneRtt,
];

fuzz_target!(|data: &[u8]| {
    let Some((&flags, payload)) = data.split_first() else {
        return;
    };
    let reg = FrameRegistry {
        datagram: flags & 1 != 0,
        ack_frequency: flags & 2 != 0,
        multipath: flags & 8 != 0,
        extensions: (flags & 4 != 0).then_some(&FEC as &dyn ExtensionFrames),
    };
    let mut it = parse_frames(payload, &reg);
    let mut last = 0;
    let mut count = 0;
    while let Some(res) = it.next() {
        let pos = it.position();
        assert!(pos <= payload.len());
        count += 1;
        match res {
            Ok(frame) => {
                assert!(pos > last, "a frame consumed no bytes");
                check_frame(&frame, &reg);
            }
            Err(e) => {
                let _ = e.to_string();
                let te: qfec_proto::TransportError = e.into();
                let _ = format!("{te:?}");
                assert!(it.next().is_none(), "iteration goes on after an error");
                break;
            }
        }
        last = pos;
    }
    assert!(count <= payload.len());
});

fn check_frame(frame: &Frame<'_>, reg: &FrameRegistry<'_>) {
    let _ = frame.is_probing();
    let _ = reg.is_ack_eliciting(frame);
    for kind in KINDS {
        let _ = reg.allowed_in(frame, kind);
    }
    match frame {
        Frame::Ack(ack) => {
            let n = ack.range_count();
            let mut seen = 0u64;
            let mut prev: Option<u64> = None;
            for r in ack.ranges() {
                assert!(r.start() <= r.end());
                if let Some(p) = prev {
                    // At least one unacknowledged number between two ranges.
                    assert!(*r.end() + 1 < p, "ACK ranges overlap or touch");
                } else {
                    assert_eq!(*r.end(), ack.largest());
                }
                prev = Some(*r.start());
                seen += 1;
                assert!(seen <= n);
            }
            assert_eq!(seen, n, "ACK range iterator stopped early");
            assert_eq!(ack.smallest(), prev.unwrap());
            for e in [0, 3, 20, 63, 64, 200] {
                let _ = ack.delay_micros(e);
            }
        }
        Frame::Extension { ty, body } => {
            // Re-decoding the body alone with the FEC decoder gives the same length.
            let mut r = Reader::new(body);
            wire::decode(*ty, &mut r).expect("a body the registry accepted");
            assert_eq!(r.position(), body.len());
        }
        _ => {}
    }
    // encode(decode(x)) decodes to the same frame.
    let mut buf = Vec::new();
    frame.encode(&mut buf);
    assert_eq!(buf.len(), frame.encoded_len(), "encoded_len of {frame:?}");
    let mut again = parse_frames(&buf, reg);
    match again.next() {
        Some(Ok(f)) => assert_eq!(&f, frame, "re-encoded frame decodes differently"),
        other => panic!("re-encoded {frame:?} decodes as {other:?}"),
    }
    assert!(again.next().is_none(), "re-encoded {frame:?} left bytes");
}
