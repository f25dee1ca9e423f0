//! The ECN field of the IP packets the emulator carries (RFC 3168 §5): read from the header
//! when a packet enters the link stages, so a queue with ECN marking sees which packets are
//! ECN-capable, and set to CE on the way out when the queue marked one, as a router does.
//!
//! Packets come from the kernel's TUN devices, but a program in a namespace chooses their
//! headers: anything too short or not IPv4/IPv6 is treated as Not-ECT and left untouched.

use qfec_proto::EcnCodepoint;

/// An IPv4 header without options.
const IPV4_MIN_HEADER: usize = 20;
/// The fixed IPv6 header.
const IPV6_HEADER: usize = 40;

/// The ECN codepoint of an IPv4 or IPv6 packet; None for Not-ECT and for anything that is not
/// a whole IP header.
pub(crate) fn ecn_of(packet: &[u8]) -> Option<EcnCodepoint> {
    match packet.first()? >> 4 {
        4 if ipv4_header_len(packet).is_some() => EcnCodepoint::from_bits(packet[1]),
        6 if packet.len() >= IPV6_HEADER => EcnCodepoint::from_bits(packet[1] >> 4),
        _ => None,
    }
}

/// Marks an ECN-capable packet CE (an IPv4 header's checksum is brought up to date); returns
/// whether it changed. A Not-ECT packet must never be marked (RFC 3168 §5) and is left as
/// it is, as is a packet already marked or not a whole IP header.
pub(crate) fn set_ce(packet: &mut [u8]) -> bool {
    if matches!(ecn_of(packet), None | Some(EcnCodepoint::Ce)) {
        return false;
    }
    let ce = EcnCodepoint::Ce.bits();
    match ipv4_header_len(packet) {
        Some(len) if packet[0] >> 4 == 4 => {
            packet[1] |= ce;
            packet[10..12].fill(0);
            let sum = ipv4_checksum(&packet[..len]);
            packet[10..12].copy_from_slice(&sum.to_be_bytes());
        }
        // IPv6 (`ecn_of` accepted nothing else): the traffic class is the low nibble of
        // byte 0 and the high nibble of byte 1; ECN is its two low bits.
        _ => packet[1] |= ce << 4,
    }
    true
}

/// The header length of an IPv4 packet whose IHL fits the packet.
fn ipv4_header_len(packet: &[u8]) -> Option<usize> {
    let len = usize::from(packet.first()? & 0x0f) * 4;
    (len >= IPV4_MIN_HEADER && len <= packet.len()).then_some(len)
}

/// The Internet checksum (RFC 1071) of `header`, whose length is a multiple of 4.
fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks_exact(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A UDP/IPv4 packet from 10.77.0.1 to 10.77.0.2 with TOS `tos` and a valid checksum.
    fn ipv4(tos: u8) -> Vec<u8> {
        let mut p = vec![
            0x45, tos, 0, 32, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 10, 77, 0, 1, 10, 77, 0, 2,
        ];
        let sum = ipv4_checksum(&p);
        p[10..12].copy_from_slice(&sum.to_be_bytes());
        p.extend_from_slice(&[0u8; 12]);
        p
    }

    fn checksum_ok(p: &[u8]) -> bool {
        ipv4_checksum(&p[..ipv4_header_len(p).unwrap()]) == 0
    }

    #[test]
    fn an_ect_ipv4_packet_is_marked_with_a_valid_checksum() {
        // DSCP AF41 (0x88) with ECT(0): the DSCP bits stay.
        let mut p = ipv4(0x88 | 0b10);
        assert_eq!(ecn_of(&p), Some(EcnCodepoint::Ect0));
        assert!(set_ce(&mut p));
        assert_eq!(p[1], 0x88 | 0b11);
        assert_eq!(ecn_of(&p), Some(EcnCodepoint::Ce));
        assert!(checksum_ok(&p));
        // Only the TOS byte and the checksum changed.
        let before = ipv4(0x88 | 0b10);
        let changed: Vec<usize> = (0..p.len()).filter(|&i| p[i] != before[i]).collect();
        assert!(
            changed.iter().all(|i| [1, 10, 11].contains(i)),
            "{changed:?}"
        );
        let mut q = ipv4(0b01);
        assert!(set_ce(&mut q) && checksum_ok(&q));
    }

    #[test]
    fn not_ect_and_already_marked_packets_are_left_alone() {
        for tos in [0x00, 0x88, 0b11, 0x88 | 0b11] {
            let mut p = ipv4(tos);
            let before = p.clone();
            assert!(!set_ce(&mut p));
            assert_eq!(p, before);
        }
    }

    #[test]
    fn ipv6_traffic_class_ecn_bits() {
        // Version 6, traffic class 0x8a (DSCP 0x22, ECT(0)), flow label 0x12345.
        let mut p = vec![0u8; 48];
        p[..4].copy_from_slice(&[0x68, 0xa1, 0x23, 0x45]);
        assert_eq!(ecn_of(&p), Some(EcnCodepoint::Ect0));
        assert!(set_ce(&mut p));
        assert_eq!(&p[..4], &[0x68, 0xb1, 0x23, 0x45]);
        assert_eq!(ecn_of(&p), Some(EcnCodepoint::Ce));
        p[1] = 0x81; // Not-ECT
        assert!(!set_ce(&mut p));
    }

    #[test]
    fn short_or_foreign_packets_are_never_touched() {
        let mut cases: Vec<Vec<u8>> = vec![
            vec![],
            vec![0x45],
            vec![0x45, 0b10, 0, 0],
            vec![0x60, 0xa0, 0, 0],
            {
                // IHL of 15 words in a 32-byte packet.
                let mut p = ipv4(0b10);
                p[0] = 0x4f;
                p
            },
            {
                // IHL below the minimum.
                let mut p = ipv4(0b10);
                p[0] = 0x44;
                p
            },
            vec![
                0x20, 0b10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ],
        ];
        for p in &mut cases {
            let before = p.clone();
            assert_eq!(ecn_of(p), None, "{before:?}");
            assert!(!set_ce(p));
            assert_eq!(*p, before);
        }
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_parse_without_panic_and_a_marked_ipv4_header_checks(
            first in proptest::prop_oneof![0x45u8..=0x4f, 0x60u8..=0x6f, proptest::prelude::any::<u8>()],
            rest in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80),
        ) {
            let mut p = rest;
            p.insert(0, first);
            let before = p.clone();
            let ecn = ecn_of(&p);
            let marked = set_ce(&mut p);
            proptest::prop_assert_eq!(marked, matches!(ecn, Some(c) if c != EcnCodepoint::Ce));
            if !marked {
                proptest::prop_assert_eq!(&p, &before);
            } else if first >> 4 == 4 {
                proptest::prop_assert!(checksum_ok(&p));
            }
        }
    }
}
