//! The FEC wire format against byte vectors written by hand from `crates/fec/WIRE.md` and the
//! code points of draft-michel-quic-fec-01 (its IANA tables), not produced by our encoder:
//! each vector decodes to the fields it was written from, and encoding those fields gives
//! the vector back.

use qfec_erasure::block::BlockMeta;
use qfec_erasure::rlc::RlcMeta;
use qfec_fec::wire::{self, FecFrame, FecParams, SchemeId};
use qfec_proto::Side;
use qfec_proto::coding::Reader;
use qfec_proto::range_set::RangeSet;
use qfec_proto::transport_params::TransportParameters;

/// Hex to bytes; spaces are ignored.
fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Reads the frame type and decodes the body; the frame must use every byte.
fn decode(bytes: &[u8]) -> (u64, FecFrame<'_>) {
    let mut r = Reader::new(bytes);
    let ty = r.varint().unwrap();
    let f = wire::decode(ty, &mut r).unwrap();
    assert!(r.is_empty(), "{} bytes left over", r.remaining());
    (ty, f)
}

// Frame types as QUIC varints: 0x32a80fec < 2^30 takes 4 bytes (prefix 0b10); the others
// are above 2^30 and take 8 bytes (prefix 0b11).
const REPAIR: &str = "b2 a8 0f ec";
const SID: &str = "c0 00 00 32 a8 0f ec 1d";
const SYMBOL_ACK: &str = "c0 00 00 32 a8 0f ec ac";
const FEC_WINDOW: &str = "c0 00 00 32 a8 0f ec c0";

#[test]
fn frame_types_are_the_drafts() {
    assert_eq!(wire::frame_type::REPAIR, 0x32a8_0fec);
    assert_eq!(wire::frame_type::SID, 0x32_a80f_ec1d);
    assert_eq!(wire::frame_type::SYMBOL_ACK, 0x32_a80f_ecac);
    assert_eq!(wire::frame_type::FEC_WINDOW, 0x32_a80f_ecc0);
    assert_eq!(
        wire::param::ENABLE_FEC,
        0x23_8ffe_ce01,
        "enable_fec of draft version 01"
    );
    assert_eq!(wire::param::DECODER_FEC_SCHEME, 0x238f_fecd);
    assert_eq!(wire::param::INITIAL_CODING_WINDOW, 0x238f_fecc);
}

#[test]
fn sid_frames() {
    for (text, sid) in [
        (format!("{SID} 07"), 7),
        (format!("{SID} 41 2c"), 300),
        (format!("{SID} 80 01 00 00"), 65_536),
    ] {
        let bytes = hex(&text);
        let (ty, f) = decode(&bytes);
        assert_eq!((ty, f), (wire::frame_type::SID, FecFrame::Sid(sid)));
        let mut out = vec![0u8; wire::sid_len(sid)];
        wire::write_sid(&mut out, sid);
        assert_eq!(out, bytes, "SID {sid}");
    }
}

#[test]
fn fec_window_frame() {
    // Epoch 2, window 5000 (0x1388: a 2-byte varint 0x5388).
    let bytes = hex(&format!("{FEC_WINDOW} 02 53 88"));
    assert_eq!(
        decode(&bytes).1,
        FecFrame::FecWindow {
            epoch: 2,
            size: 5000
        }
    );
    let mut out = Vec::new();
    wire::encode_fec_window(&mut out, 2, 5000);
    assert_eq!(out, bytes);
}

#[test]
fn symbol_ack_frame() {
    // SIDs 3-5 and 9 recovered: Largest 9, 1 more range, First ACK Range 0 (9 alone), then
    // Gap 9 - 5 - 2 = 2 and ACK Range Length 5 - 3 = 2 (RFC 9000 §19.3.1).
    let bytes = hex(&format!("{SYMBOL_ACK} 09 01 00 02 02"));
    let FecFrame::SymbolAck(ranges) = decode(&bytes).1 else {
        panic!("not a SYMBOL_ACK")
    };
    assert_eq!(ranges.iter().collect::<Vec<_>>(), vec![9..=9, 3..=5]);
    let mut sids = RangeSet::new();
    sids.insert(3..6);
    sids.insert(9..10);
    let mut out = Vec::new();
    wire::encode_symbol_ack(&mut out, &sids, 16);
    assert_eq!(out, bytes);
    assert_eq!(wire::symbol_ack_len(&sids, 16), bytes.len());
}

#[test]
fn repair_frames_of_each_scheme() {
    let symbol = hex("de ad be ef");
    let cases = [
        // XOR: first SID 10, stride 10, count 5.
        (
            format!("{REPAIR} 01 04 00 00 00 00 00 00 00 0a 00 0a 05 de ad be ef"),
            SchemeId::Xor,
            BlockMeta::Xor {
                first: 10,
                stride: 10,
                count: 5,
            }
            .to_bytes()
            .to_vec(),
        ),
        // Reed-Solomon: first SID 40, k 20, m 10, repair index 3.
        (
            format!("{REPAIR} 02 04 00 00 00 00 00 00 00 28 14 0a 03 de ad be ef"),
            SchemeId::ReedSolomon,
            BlockMeta::Rs {
                first: 40,
                k: 20,
                m: 10,
                index: 3,
            }
            .to_bytes()
            .to_vec(),
        ),
        // RLC over GF(2^8): repair key 3, DT 15, NSS 2, ESI 6 (WIRE.md's example).
        (
            format!("{REPAIR} 03 04 00 03 f0 02 00 00 00 06 de ad be ef"),
            SchemeId::RlcGf256,
            RlcMeta {
                repair_key: 3,
                dt: 15,
                nss: 2,
                esi: 6,
            }
            .to_bytes()
            .to_vec(),
        ),
        // RLC over GF(2): key 0, DT 10, NSS 300 (0x12c), ESI 0x01020304.
        (
            format!("{REPAIR} 04 04 00 00 a1 2c 01 02 03 04 de ad be ef"),
            SchemeId::RlcGf2,
            RlcMeta {
                repair_key: 0,
                dt: 10,
                nss: 300,
                esi: 0x0102_0304,
            }
            .to_bytes()
            .to_vec(),
        ),
    ];
    for (text, scheme, meta) in cases {
        let bytes = hex(&text);
        let FecFrame::Repair(r) = decode(&bytes).1 else {
            panic!("not a REPAIR: {text}")
        };
        assert_eq!(r.scheme, scheme);
        assert_eq!(r.meta, &meta[..], "{scheme:?} metadata");
        assert_eq!(r.symbol, &symbol[..]);
        let mut out = Vec::new();
        wire::encode_repair(&mut out, scheme, &meta, &symbol);
        assert_eq!(out, bytes, "{scheme:?}");
        assert_eq!(
            wire::repair_overhead(scheme, symbol.len()),
            bytes.len() - symbol.len()
        );
    }
}

#[test]
fn malformed_repairs_are_refused_with_the_documented_codes() {
    use qfec_proto::error_code::FRAME_ENCODING_ERROR;
    for (text, why) in [
        (
            format!("{REPAIR} 09 04 00 03 f0 02 00 00 00 06 de ad be ef"),
            "unknown scheme",
        ),
        (
            format!("{REPAIR} 03 00 00 03 f0 02 00 00 00 06"),
            "symbol size 0",
        ),
        // 16384 = 0x4000: a 4-byte varint 0x80004000, one above the largest size.
        (
            format!("{REPAIR} 03 80 00 40 00 00 03 f0 02 00 00 00 06"),
            "symbol size 16384",
        ),
        (
            format!("{REPAIR} 03 04 00 03 f0 02 00 00 00 06 de ad be"),
            "symbol truncated",
        ),
    ] {
        let bytes = hex(&text);
        let mut r = Reader::new(&bytes);
        let ty = r.varint().unwrap();
        let err = wire::decode(ty, &mut r).expect_err(why);
        assert_eq!(err.code, FRAME_ENCODING_ERROR, "{why}");
    }
}

#[test]
fn transport_parameters() {
    let params = FecParams {
        enabled: true,
        decoder_schemes: vec![SchemeId::RlcGf256, SchemeId::ReedSolomon],
        coding_window: 64,
    };
    let mut pairs = Vec::new();
    params.encode(&mut pairs);
    // enable_fec = 1; decoder_fec_scheme = [3, 2]; initial_coding_window = 64 (0x4040).
    let expected = vec![
        (0x23_8ffe_ce01, hex("01")),
        (0x238f_fecd, hex("03 02")),
        (0x238f_fecc, hex("40 40")),
    ];
    assert_eq!(pairs, expected);
    assert_eq!(FecParams::decode(&expected).unwrap(), params);
    // On the wire, each is id (varint), length (varint), value.
    let tp = TransportParameters {
        extensions: pairs,
        ..TransportParameters::default()
    };
    let mut wire_bytes = Vec::new();
    tp.encode(&mut wire_bytes);
    for part in [
        "c0 00 00 23 8f fe ce 01 01 01",
        "a3 8f fe cd 02 03 02",
        "a3 8f fe cc 02 40 40",
    ] {
        let want = hex(part);
        assert!(
            wire_bytes.windows(want.len()).any(|w| w == want),
            "{part} not in the encoded parameters"
        );
    }
    let back = TransportParameters::decode(&wire_bytes, Side::Client).unwrap();
    assert_eq!(FecParams::decode(&back.extensions).unwrap(), params);
}

#[test]
fn transport_parameter_values_that_break_the_rules() {
    use qfec_proto::error_code::TRANSPORT_PARAMETER_ERROR;
    let bad = [
        (vec![(0x23_8ffe_ce01, hex("02"))], "enable_fec = 2"),
        (
            vec![(0x23_8ffe_ce01, hex("01 00"))],
            "enable_fec with a trailing byte",
        ),
        (vec![(0x238f_fecd, vec![3; 17])], "17 decoder schemes"),
        (vec![(0x238f_fecc, hex("40"))], "a truncated window"),
    ];
    for (pairs, why) in bad {
        let err = FecParams::decode(&pairs).expect_err(why);
        assert_eq!(err.code, TRANSPORT_PARAMETER_ERROR, "{why}");
    }
    // Unknown scheme ids (a newer peer's) are skipped, duplicates kept once.
    let p = FecParams::decode(&[(0x238f_fecd, hex("09 01 01 04"))]).unwrap();
    assert_eq!(p.decoder_schemes, vec![SchemeId::Xor, SchemeId::RlcGf2]);
}
