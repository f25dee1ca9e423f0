//! `qfec_proto::packet::parse_header` on arbitrary datagrams, with the connection ID lengths an
//! endpoint may use (0, the default 8, the maximum 20). Every header that parses is written
//! again with the crate's own writers and must parse to the same fields. Packet-number
//! recovery is checked against its RFC 9000 Appendix A property on values taken from the input.

#![no_main]

use libfuzzer_sys::fuzz_target;
use qfec_proto::ConnectionId;
use qfec_proto::packet::{
    self, LongType, ParsedHeader, decode_pn, parse_header, pn_len_for, read_pn, write_pn,
};

fuzz_target!(|data: &[u8]| {
    for cid_len in [0, 8, 20] {
        check_header(data, cid_len);
    }
    check_coalesced(data);
    check_packet_numbers(data);
    let _ = packet::stateless_reset_token(data);
});

fn check_header(data: &[u8], cid_len: usize) {
    let Ok(h) = parse_header(data, cid_len) else {
        return;
    };
    let len = h.packet_len(data.len());
    assert!(len <= data.len(), "packet_len {len} beyond the datagram");
    assert!(h.dcid().len() <= 255);
    match h {
        ParsedHeader::Short {
            dcid,
            pn_offset,
            packet_len,
        } => {
            assert_eq!(dcid.len(), cid_len);
            assert_eq!(pn_offset, 1 + cid_len);
            assert_eq!(packet_len, data.len());
            let first = data[0];
            assert!(first & 0xc0 == 0x40);
            // Write the same header again: it must parse to the same connection ID.
            let mut buf = Vec::new();
            let pn_len = packet::pn_len_from_first_byte(first);
            let off = packet::write_short_header(
                &mut buf,
                &dcid,
                first & 0x20 != 0,
                packet::key_phase_bit(first),
                0x0102_0304,
                pn_len,
            );
            assert_eq!(off, pn_offset);
            match parse_header(&buf, cid_len) {
                Ok(ParsedHeader::Short { dcid: d2, .. }) => assert_eq!(d2, dcid),
                other => panic!("rewritten short header parsed as {other:?}"),
            }
            let _ = packet::reserved_bits_ok(first);
        }
        ParsedHeader::Long {
            ty,
            version,
            dcid,
            scid,
            token,
            pn_offset,
            packet_len,
        } => {
            assert!(ty != LongType::Retry);
            assert!(ty.packet_kind().is_some());
            assert!(packet::supported_version(version), "{version:#x}");
            assert!(pn_offset <= packet_len && packet_len <= data.len());
            if ty != LongType::Initial {
                assert!(token.is_empty());
            }
            // Rewrite: header, 4-byte packet number, and as much payload as the Length says.
            let length = packet_len - pn_offset;
            let pn_len = packet::pn_len_from_first_byte(data[0]);
            if length >= pn_len && length < 1 << 14 {
                let mut buf = Vec::new();
                let offs = packet::write_long_header(
                    &mut buf, ty, version, &dcid, &scid, token, 7, pn_len,
                );
                buf.extend_from_slice(&data[pn_offset + pn_len..packet_len]);
                packet::set_long_length(&mut buf, &offs, length);
                match parse_header(&buf, cid_len) {
                    Ok(ParsedHeader::Long {
                        ty: t2,
                        version: v2,
                        dcid: d2,
                        scid: s2,
                        token: tok2,
                        pn_offset: p2,
                        packet_len: l2,
                    }) => {
                        assert_eq!((t2, v2, &d2, &s2, tok2), (ty, version, &dcid, &scid, token));
                        assert_eq!(p2, offs.pn_offset);
                        assert_eq!(l2, buf.len());
                        assert_eq!(read_pn(&buf[p2..], pn_len), Some(7));
                    }
                    other => panic!("rewritten long header parsed as {other:?}"),
                }
            }
        }
        ParsedHeader::Retry {
            version,
            dcid,
            scid,
            token,
            integrity_tag,
        } => {
            assert!(packet::supported_version(version), "{version:#x}");
            assert_eq!(
                token.len() + integrity_tag.len() + 7 + dcid.len() + scid.len(),
                data.len()
            );
            // Tags of arbitrary data must not verify; a rewritten Retry must.
            let odcid = ConnectionId::new(&data[..data.len().min(8)]);
            let _ = packet::verify_retry(&odcid, data);
            let mut buf = Vec::new();
            packet::write_retry(&mut buf, version, &odcid, &dcid, &scid, token, data[0]);
            assert!(packet::verify_retry(&odcid, &buf));
            match parse_header(&buf, cid_len) {
                Ok(ParsedHeader::Retry {
                    dcid: d2,
                    scid: s2,
                    token: t2,
                    ..
                }) => assert_eq!((&d2, &s2, t2), (&dcid, &scid, token)),
                other => panic!("rewritten Retry parsed as {other:?}"),
            }
            if let Some(last) = buf.last_mut() {
                *last ^= 1;
                assert!(!packet::verify_retry(&odcid, &buf));
            }
        }
        ParsedHeader::VersionNegotiation {
            dcid,
            scid,
            versions,
        } => {
            assert!(!versions.is_empty() && versions.len() % 4 == 0);
            let list: Vec<u32> = packet::versions(versions).collect();
            assert_eq!(list.len(), versions.len() / 4);
            let mut buf = Vec::new();
            packet::write_version_negotiation(&mut buf, &dcid, &scid, &list, data[0] & 0x7f);
            assert_eq!(&buf[..], data, "Version Negotiation does not round-trip");
        }
        ParsedHeader::UnsupportedVersion {
            version,
            dcid,
            scid,
        } => {
            assert!(version != 0 && !packet::supported_version(version));
            let _ = packet::is_reserved_version(version);
            // What the endpoint answers must parse as a Version Negotiation packet when the
            // connection IDs fit (RFC 8999 allows 255 bytes; v1 parsing stops at 20).
            let mut buf = Vec::new();
            packet::write_version_negotiation(&mut buf, scid, dcid, &[packet::VERSION_1], 0x2a);
            let parsed = parse_header(&buf, cid_len);
            if dcid.len() <= 20 && scid.len() <= 20 {
                match parsed {
                    Ok(ParsedHeader::VersionNegotiation {
                        dcid: d2,
                        scid: s2,
                        versions,
                    }) => {
                        assert_eq!((&d2[..], &s2[..]), (scid, dcid));
                        assert_eq!(packet::versions(versions).collect::<Vec<_>>(), [1]);
                    }
                    other => panic!("our Version Negotiation parsed as {other:?}"),
                }
            }
        }
    }
}

/// Walks coalesced packets as the endpoint does; must terminate and stay in bounds.
fn check_coalesced(data: &[u8]) {
    let mut rest = data;
    let mut n = 0;
    while !rest.is_empty() {
        let Ok(h) = parse_header(rest, 8) else {
            break;
        };
        let len = h.packet_len(rest.len());
        assert!(len <= rest.len());
        if len == 0 {
            break;
        }
        rest = &rest[len..];
        n += 1;
        assert!(n <= data.len());
    }
}

/// RFC 9000 Appendix A: a packet number sent in `pn_len_for` bytes is recovered by
/// `decode_pn` given the largest acknowledged one; any truncated value decodes to a number
/// congruent to it, within half a window of the expected number.
fn check_packet_numbers(data: &[u8]) {
    if data.len() < 17 {
        return;
    }
    const MAX: u64 = (1 << 62) - 1;
    let a = u64::from_le_bytes(data[1..9].try_into().unwrap()) & MAX;
    let b = u64::from_le_bytes(data[9..17].try_into().unwrap()) & MAX;
    let (largest, pn) = if a < b {
        (Some(a), b)
    } else {
        (None, a.min(b))
    };
    let unacked = match largest {
        Some(l) => pn - l,
        None => pn + 1,
    };
    let pn_len = pn_len_for(pn, largest);
    assert!((1..=4).contains(&pn_len));
    let mut buf = Vec::new();
    write_pn(&mut buf, pn, pn_len);
    let truncated = read_pn(&buf, pn_len).unwrap();
    if unacked <= 1 << 31 {
        assert_eq!(
            decode_pn(truncated, pn_len, largest),
            pn,
            "pn {pn} largest {largest:?}"
        );
    }
    // Arbitrary truncated values and lengths.
    let len = usize::from(data[0] % 4) + 1;
    let t = u64::from(u32::from_le_bytes(data[1..5].try_into().unwrap()));
    let win = 1u64 << (8 * len);
    let largest = Some(b);
    let d = decode_pn(t, len, largest);
    assert_eq!(d % win, t % win);
    let expected = b + 1;
    if expected >= win && expected + win <= MAX {
        assert!(
            d.abs_diff(expected) <= win / 2,
            "decoded {d} expected {expected} len {len}"
        );
    }
}
