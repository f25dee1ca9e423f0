//! pcap export of simulated datagrams.
//!
//! Records carry virtual timestamps (nanosecond pcap, magic 0xa1b23c4d) and fake IPv4 or IPv6 +
//! UDP headers built from the nodes' socket addresses (LINKTYPE_RAW = 101), so Wireshark can
//! dissect the QUIC payloads of a simulated run.

use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};

/// pcap magic for nanosecond timestamps.
pub const PCAP_MAGIC_NS: u32 = 0xa1b2_3c4d;
/// Raw IP link type: each record starts with an IPv4 or IPv6 header.
pub const LINKTYPE_RAW: u32 = 101;
const SNAPLEN: u32 = 65_535;

/// Which datagrams go into the capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PcapMode {
    /// At the receiver, when delivered (what a capture at the destination would see).
    Delivered,
    /// At the sender, when emitted.
    Sent,
    /// Both, so losses show up as unmatched "sent" records.
    Both,
}

/// Writes a pcap stream.
pub struct PcapWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    ip_id: u16,
    records: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Write the global header.
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&PCAP_MAGIC_NS.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        h.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        h.extend_from_slice(&SNAPLEN.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_RAW.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter {
            out,
            buf: Vec::with_capacity(2048),
            ip_id: 0,
            records: 0,
        })
    }

    /// Append one UDP datagram observed at `time_ns`, with `ecn` in its IP header.
    pub fn write_udp(
        &mut self,
        time_ns: u64,
        src: SocketAddr,
        dst: SocketAddr,
        ecn: Option<qfec_proto::EcnCodepoint>,
        payload: &[u8],
    ) -> io::Result<()> {
        let ecn = ecn.map_or(0, |e| e.bits());
        self.buf.clear();
        let udp_len = (8 + payload.len()).min(usize::from(u16::MAX)) as u16;
        let mut udp = [0u8; 8];
        udp[0..2].copy_from_slice(&src.port().to_be_bytes());
        udp[2..4].copy_from_slice(&dst.port().to_be_bytes());
        udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
        match (src.ip(), dst.ip()) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let total = (20 + u32::from(udp_len)).min(u32::from(u16::MAX)) as u16;
                self.ip_id = self.ip_id.wrapping_add(1);
                let mut ip = [0u8; 20];
                ip[0] = 0x45;
                ip[1] = ecn; // DSCP 0
                ip[2..4].copy_from_slice(&total.to_be_bytes());
                ip[4..6].copy_from_slice(&self.ip_id.to_be_bytes());
                ip[6] = 0x40; // don't fragment
                ip[8] = 64;
                ip[9] = 17;
                ip[12..16].copy_from_slice(&s.octets());
                ip[16..20].copy_from_slice(&d.octets());
                let c = !fold(sum16(&ip, 0));
                ip[10..12].copy_from_slice(&c.to_be_bytes());
                let pseudo =
                    sum16(&s.octets(), 0) + sum16(&d.octets(), 0) + 17 + u32::from(udp_len);
                udp_checksum(&mut udp, payload, pseudo);
                self.buf.extend_from_slice(&ip);
            }
            (s, d) => {
                let s = to_v6(s).octets();
                let d = to_v6(d).octets();
                let mut ip = [0u8; 40];
                ip[0] = 0x60;
                ip[1] = ecn << 4; // traffic class: DSCP 0, then the ECN bits
                ip[4..6].copy_from_slice(&udp_len.to_be_bytes());
                ip[6] = 17;
                ip[7] = 64;
                ip[8..24].copy_from_slice(&s);
                ip[24..40].copy_from_slice(&d);
                let pseudo = sum16(&s, 0) + sum16(&d, 0) + 17 + u32::from(udp_len);
                udp_checksum(&mut udp, payload, pseudo);
                self.buf.extend_from_slice(&ip);
            }
        }
        self.buf.extend_from_slice(&udp);
        self.buf.extend_from_slice(payload);
        let orig = self.buf.len() as u32;
        let incl = orig.min(SNAPLEN) as usize;
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&((time_ns / 1_000_000_000) as u32).to_le_bytes());
        rec[4..8].copy_from_slice(&((time_ns % 1_000_000_000) as u32).to_le_bytes());
        rec[8..12].copy_from_slice(&(incl as u32).to_le_bytes());
        rec[12..16].copy_from_slice(&orig.to_le_bytes());
        self.out.write_all(&rec)?;
        self.out.write_all(&self.buf[..incl])?;
        self.records += 1;
        Ok(())
    }

    /// Number of records written.
    pub fn records(&self) -> u64 {
        self.records
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flush and return the underlying writer.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

fn to_v6(ip: IpAddr) -> std::net::Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

/// One's-complement sum of big-endian 16-bit words (odd byte padded with zero).
fn sum16(data: &[u8], mut acc: u32) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        acc += u32::from(*b) << 8;
    }
    fold(acc) as u32
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

fn udp_checksum(udp: &mut [u8; 8], payload: &[u8], pseudo: u32) {
    let sum = sum16(payload, sum16(udp, pseudo));
    let c = !fold(sum);
    let c = if c == 0 { 0xffff } else { c };
    udp[6..8].copy_from_slice(&c.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_records() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        let a: SocketAddr = "10.0.0.1:4433".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:50000".parse().unwrap();
        let ce = Some(qfec_proto::EcnCodepoint::Ce);
        w.write_udp(1_500_000_123, a, b, ce, &[1, 2, 3]).unwrap();
        w.write_udp(2_000_000_000, b, a, None, &[0; 100]).unwrap();
        let v6: SocketAddr = "[::1]:1".parse().unwrap();
        let ect0 = Some(qfec_proto::EcnCodepoint::Ect0);
        w.write_udp(2_000_000_001, v6, a, ect0, &[7; 5]).unwrap();
        assert_eq!(w.records(), 3);
        let out = w.into_inner().unwrap();
        assert_eq!(&out[0..4], &PCAP_MAGIC_NS.to_le_bytes());
        assert_eq!(
            u32::from_le_bytes(out[20..24].try_into().unwrap()),
            LINKTYPE_RAW
        );
        // First record: ts 1 s + 500000123 ns, 20 + 8 + 3 bytes.
        assert_eq!(u32::from_le_bytes(out[24..28].try_into().unwrap()), 1);
        assert_eq!(
            u32::from_le_bytes(out[28..32].try_into().unwrap()),
            500_000_123
        );
        assert_eq!(u32::from_le_bytes(out[32..36].try_into().unwrap()), 31);
        let ip = &out[40..60];
        assert_eq!(fold(sum16(ip, 0)), 0xffff, "IPv4 header checksum verifies");
        assert_eq!(ip[1], 0b11, "the TOS byte carries the ECN codepoint (CE)");
        // Third record (IPv6): the traffic class's ECN bits, ECT(0).
        let v6 = 24 + (16 + 31) + (16 + 128) + 16;
        assert_eq!((out[v6] & 0x0f, out[v6 + 1] >> 4), (0, 0b10));
        assert_eq!(out.len(), 24 + (16 + 31) + (16 + 128) + (16 + 53));
    }
}
