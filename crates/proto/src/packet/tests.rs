use proptest::prelude::*;

use super::*;
use crate::types::ConnectionId;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn rfc9001_a4_retry() {
    let odcid = ConnectionId::new(&hex("8394c8f03e515708"));
    let packet = hex("ff000000010008f067a5502a4262b574 6f6b656e04a265ba2eff4d829058fb3f 0f2496ba");
    assert!(verify_retry(&odcid, &packet));
    let tag = retry_integrity_tag(&odcid, &packet[..packet.len() - 16]);
    assert_eq!(&tag[..], &packet[packet.len() - 16..]);
    let mut bad = packet.clone();
    bad[10] ^= 1;
    assert!(!verify_retry(&odcid, &bad));
    assert!(!verify_retry(&ConnectionId::new(&[1; 8]), &packet));
    assert!(!verify_retry(&odcid, &packet[..10]));

    let ParsedHeader::Retry {
        version,
        dcid,
        scid,
        token,
        integrity_tag,
    } = parse_header(&packet, 8).unwrap()
    else {
        panic!()
    };
    assert_eq!(version, VERSION_1);
    assert!(dcid.is_empty());
    assert_eq!(&*scid, &hex("f067a5502a4262b5")[..]);
    assert_eq!(token, b"token");
    assert_eq!(integrity_tag, tag);

    let mut out = Vec::new();
    write_retry(&mut out, VERSION_1, &odcid, &dcid, &scid, token, 0x0f);
    assert_eq!(out, packet);
}

/// RFC 9369 Appendix A.4: version 2's Retry (its type bits 0b00, its own key and nonce).
#[test]
fn rfc9369_a4_retry() {
    let odcid = ConnectionId::new(&hex("8394c8f03e515708"));
    let packet = hex("cf6b3343cf0008f067a5502a4262b5 746f6b656ec8646ce8bfe33952d955 543665dcc7b6");
    assert!(verify_retry(&odcid, &packet));
    let ParsedHeader::Retry {
        version,
        dcid,
        scid,
        token,
        ..
    } = parse_header(&packet, 8).unwrap()
    else {
        panic!("not a Retry")
    };
    assert_eq!(version, VERSION_2);
    let mut out = Vec::new();
    write_retry(&mut out, VERSION_2, &odcid, &dcid, &scid, token, 0x0f);
    assert_eq!(out, packet);
    // The same packet under version 1's key fails.
    let mut v1 = packet.clone();
    v1[1..5].copy_from_slice(&VERSION_1.to_be_bytes());
    assert!(!verify_retry(&odcid, &v1));
}

/// Version 2 numbers the long-header types one further (RFC 9369 §3.2); each type comes
/// back from its bits in its own version.
#[test]
fn long_header_types_per_version() {
    use LongType::*;
    assert_eq!(
        [Initial, ZeroRtt, Handshake, Retry].map(|t| t.bits(VERSION_2)),
        [0b01, 0b10, 0b11, 0b00]
    );
    assert_eq!(
        [Initial, ZeroRtt, Handshake, Retry].map(|t| t.bits(VERSION_1)),
        [0b00, 0b01, 0b10, 0b11]
    );
    for v in [VERSION_1, VERSION_2] {
        for t in [Initial, ZeroRtt, Handshake, Retry] {
            assert_eq!(LongType::from_bits(t.bits(v), v), t);
        }
    }
}

#[test]
fn rfc9000_a3_pn_decode() {
    assert_eq!(decode_pn(0x9b32, 2, Some(0xa82f30ea)), 0xa82f9b32);
    assert_eq!(pn_len_for(0xac5c02, Some(0xabe8b3)), 2);
    assert_eq!(pn_len_for(0xace8fe, Some(0xabe8b3)), 3);
    assert_eq!(pn_len_for(0, None), 1);
    assert_eq!(decode_pn(0, 1, None), 0);
    // Wraps upward and downward across the window.
    assert_eq!(decode_pn(0x01, 1, Some(0xff)), 0x101);
    assert_eq!(decode_pn(0xff, 1, Some(0x100)), 0xff);
    let mut b = Vec::new();
    write_pn(&mut b, 0xa82f9b32, 2);
    assert_eq!(b, [0x9b, 0x32]);
    assert_eq!(read_pn(&b, 2), Some(0x9b32));
    assert_eq!(read_pn(&b, 3), None);
}

#[test]
fn long_header_roundtrip() {
    let dcid = ConnectionId::new(&[1; 8]);
    let scid = ConnectionId::new(&[2; 5]);
    for (ty, token) in [
        (LongType::Initial, &b"tok"[..]),
        (LongType::Handshake, &b""[..]),
        (LongType::ZeroRtt, &b""[..]),
    ] {
        let mut buf = vec![];
        let off = write_long_header(&mut buf, ty, VERSION_1, &dcid, &scid, token, 0x1234, 2);
        buf.extend_from_slice(&[0xaa; 30]);
        set_long_length(&mut buf, &off, 2 + 30);
        buf.extend_from_slice(&[0xc0, 0, 0]); // a coalesced tail
        let h = parse_header(&buf, 8).unwrap();
        assert_eq!(
            h,
            ParsedHeader::Long {
                ty,
                version: VERSION_1,
                dcid,
                scid,
                token,
                pn_offset: off.pn_offset,
                packet_len: off.pn_offset + 32
            }
        );
        assert_eq!(pn_len_from_first_byte(buf[0]), 2);
        assert_eq!(read_pn(&buf[off.pn_offset..], 2), Some(0x1234));
        assert!(reserved_bits_ok(buf[0]));
        // Length beyond the datagram.
        set_long_length(&mut buf, &off, 100);
        assert_eq!(
            parse_header(&buf, 8),
            Err(HeaderError::LengthExceedsDatagram)
        );
        // Fixed bit cleared.
        buf[0] &= !0x40;
        assert_eq!(parse_header(&buf, 8), Err(HeaderError::FixedBitZero));
    }
}

#[test]
fn short_header_roundtrip() {
    let dcid = ConnectionId::new(&[7; 8]);
    let mut buf = vec![];
    let pn_offset = write_short_header(&mut buf, &dcid, true, true, 77, 1);
    buf.extend_from_slice(&[0; 20]);
    assert_eq!(
        parse_header(&buf, 8),
        Ok(ParsedHeader::Short {
            dcid,
            pn_offset,
            packet_len: buf.len()
        })
    );
    assert!(key_phase_bit(buf[0]) && buf[0] & 0x20 != 0);
    assert!(reserved_bits_ok(buf[0]) && !reserved_bits_ok(buf[0] | 0x08));
    assert_eq!(parse_header(&buf[..5], 8), Err(HeaderError::Truncated));
    buf[0] &= !0x40;
    assert_eq!(parse_header(&buf, 8), Err(HeaderError::FixedBitZero));
}

#[test]
fn version_negotiation_and_unknown_versions() {
    let mut buf = vec![];
    write_version_negotiation(&mut buf, &[1, 2], &[3; 20], &[VERSION_1, 0x1a2a3a4a], 0x33);
    let ParsedHeader::VersionNegotiation {
        dcid,
        scid,
        versions: raw,
    } = parse_header(&buf, 8).unwrap()
    else {
        panic!()
    };
    assert_eq!((&*dcid, &*scid), (&[1u8, 2][..], &[3u8; 20][..]));
    assert_eq!(
        versions(raw).collect::<Vec<_>>(),
        vec![VERSION_1, 0x1a2a3a4a]
    );
    assert!(is_reserved_version(0x1a2a3a4a) && !is_reserved_version(VERSION_1));
    buf.pop();
    assert_eq!(
        parse_header(&buf, 8),
        Err(HeaderError::BadVersionNegotiation)
    );

    // A version we do not know, with invariant-sized (255-byte) connection IDs.
    let mut buf = vec![0xc0, 0xff, 0, 0, 0x1d, 255];
    buf.extend_from_slice(&[9; 255]);
    buf.push(0);
    assert_eq!(
        parse_header(&buf, 8),
        Ok(ParsedHeader::UnsupportedVersion {
            version: 0xff00_001d,
            dcid: &[9; 255],
            scid: &[]
        })
    );
    // v1 with a 21-byte CID is dropped.
    let mut buf = vec![0xc0, 0, 0, 0, 1, 21];
    buf.extend_from_slice(&[0; 40]);
    assert_eq!(parse_header(&buf, 8), Err(HeaderError::CidTooLong));
}

#[test]
fn stateless_reset_shape() {
    let mut rng = rand::rngs::mock::StepRng::new(0xffff_ffff, 7);
    let mut buf = vec![];
    write_stateless_reset(&mut buf, &[5; 16], 10, &mut rng);
    assert_eq!(buf.len(), 21);
    assert_eq!(buf[0] & 0xc0, 0x40);
    assert_eq!(stateless_reset_token(&buf), Some(&[5; 16]));
    assert_eq!(stateless_reset_token(&buf[..20]), None);
}

proptest! {
    #[test]
    fn parse_header_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120), cid_len in 0usize..24) {
        if let Ok(h) = parse_header(&bytes, cid_len) {
            let len = h.packet_len(bytes.len());
            prop_assert!(len <= bytes.len());
            if let ParsedHeader::Long { pn_offset, packet_len, .. } | ParsedHeader::Short { pn_offset, packet_len, .. } = h {
                prop_assert!(pn_offset <= packet_len);
            }
        }
    }

    /// Valid Initial, Handshake and 1-RTT headers (with a payload) with a few bytes changed
    /// or cut: a header that parses lies within the datagram; an untouched one must parse,
    /// with the connection IDs and lengths it was written with.
    #[test]
    fn mutated_headers_parse_or_refuse(
        kind in 0u8..3,
        token in proptest::collection::vec(any::<u8>(), 0..40),
        payload in 20usize..300,
        muts in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>()), 0..3),
        cut in proptest::option::of(any::<proptest::sample::Index>()),
    ) {
        let (dcid, scid) = (ConnectionId::new(&[7; 8]), ConnectionId::new(&[9; 5]));
        let mut buf = Vec::new();
        let pn_offset = if kind < 2 {
            let ty = if kind == 0 { LongType::Initial } else { LongType::Handshake };
            let o = write_long_header(&mut buf, ty, VERSION_1, &dcid, &scid, &token, 77, 2);
            set_long_length(&mut buf, &o, 2 + payload);
            o.pn_offset
        } else {
            write_short_header(&mut buf, &dcid, false, true, 77, 2)
        };
        buf.resize(pn_offset + 2 + payload, 0xab);
        let total = buf.len();
        let untouched = muts.is_empty() && cut.is_none();
        for (i, v) in muts {
            let i = i.index(buf.len());
            buf[i] = v;
        }
        if let Some(c) = cut {
            buf.truncate(c.index(buf.len()));
        }
        match parse_header(&buf, dcid.len()) {
            Ok(h) => {
                prop_assert!(h.packet_len(buf.len()) <= buf.len());
                if let ParsedHeader::Long { pn_offset, packet_len, .. } | ParsedHeader::Short { pn_offset, packet_len, .. } = h {
                    prop_assert!(pn_offset <= packet_len);
                }
                if untouched {
                    prop_assert_eq!(h.packet_len(buf.len()), total);
                    match h {
                        ParsedHeader::Long { dcid: d, scid: s, pn_offset: p, .. } => {
                            prop_assert!(kind < 2);
                            prop_assert_eq!((&*d, &*s, p), (&*dcid, &*scid, pn_offset));
                        }
                        ParsedHeader::Short { dcid: d, pn_offset: p, .. } => {
                            prop_assert_eq!(kind, 2);
                            prop_assert_eq!((&*d, p), (&*dcid, pn_offset));
                        }
                        other => prop_assert!(false, "parsed as {:?}", other),
                    }
                }
            }
            Err(e) => prop_assert!(!untouched, "the valid header was refused: {:?}", e),
        }
    }

    #[test]
    fn pn_roundtrip(largest in 0u64..(1 << 40), delta in 1u64..(1 << 20)) {
        let pn = largest + delta;
        let len = pn_len_for(pn, Some(largest));
        let truncated = pn & ((1u64 << (8 * len)) - 1);
        prop_assert_eq!(decode_pn(truncated, len, Some(largest)), pn);
    }

    #[test]
    fn pn_first_packets(pn in 0u64..(1 << 20)) {
        let len = pn_len_for(pn, None);
        prop_assert_eq!(decode_pn(pn & ((1u64 << (8 * len)) - 1), len, pn.checked_sub(1)), pn);
    }
}
