//! Small value types shared by every layer of the protocol core.

use std::fmt;

/// Which end of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    Client,
    Server,
}

impl Side {
    pub fn is_client(self) -> bool {
        self == Side::Client
    }
    pub fn is_server(self) -> bool {
        self == Side::Server
    }
    pub fn peer(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

/// Stream directionality.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    Bi,
    Uni,
}

/// A QUIC stream ID (RFC 9000 §2.1): the two low bits give initiator and direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(pub u64);

impl StreamId {
    pub fn new(initiator: Side, dir: Dir, index: u64) -> Self {
        let side_bit = match initiator {
            Side::Client => 0,
            Side::Server => 1,
        };
        let dir_bit = match dir {
            Dir::Bi => 0,
            Dir::Uni => 2,
        };
        StreamId((index << 2) | side_bit | dir_bit)
    }
    pub fn initiator(self) -> Side {
        if self.0 & 1 == 0 {
            Side::Client
        } else {
            Side::Server
        }
    }
    pub fn dir(self) -> Dir {
        if self.0 & 2 == 0 { Dir::Bi } else { Dir::Uni }
    }
    /// Position among the streams of the same initiator and direction.
    pub fn index(self) -> u64 {
        self.0 >> 2
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Longest connection ID that QUIC v1 allows.
pub const MAX_CID_SIZE: usize = 20;

/// A connection ID of 0 to 20 bytes, stored inline.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionId {
    len: u8,
    bytes: [u8; MAX_CID_SIZE],
}

impl ConnectionId {
    /// Panics if `bytes` is longer than 20; parsers check the length first.
    pub fn new(bytes: &[u8]) -> Self {
        assert!(
            bytes.len() <= MAX_CID_SIZE,
            "connection ID longer than 20 bytes"
        );
        let mut cid = ConnectionId {
            len: bytes.len() as u8,
            bytes: [0; MAX_CID_SIZE],
        };
        cid.bytes[..bytes.len()].copy_from_slice(bytes);
        cid
    }

    /// `None` when `bytes` is longer than 20.
    pub fn try_new(bytes: &[u8]) -> Option<Self> {
        (bytes.len() <= MAX_CID_SIZE).then(|| Self::new(bytes))
    }

    pub fn random<R: rand::RngCore + ?Sized>(rng: &mut R, len: usize) -> Self {
        let len = len.min(MAX_CID_SIZE);
        let mut cid = ConnectionId {
            len: len as u8,
            bytes: [0; MAX_CID_SIZE],
        };
        rng.fill_bytes(&mut cid.bytes[..len]);
        cid
    }

    pub fn len(&self) -> usize {
        self.len as usize
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::ops::Deref for ConnectionId {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl fmt::Debug for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.iter() {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Transport error codes (RFC 9000 §20.1).
pub mod error_code {
    pub const NO_ERROR: u64 = 0x00;
    pub const INTERNAL_ERROR: u64 = 0x01;
    pub const CONNECTION_REFUSED: u64 = 0x02;
    pub const FLOW_CONTROL_ERROR: u64 = 0x03;
    pub const STREAM_LIMIT_ERROR: u64 = 0x04;
    pub const STREAM_STATE_ERROR: u64 = 0x05;
    pub const FINAL_SIZE_ERROR: u64 = 0x06;
    pub const FRAME_ENCODING_ERROR: u64 = 0x07;
    pub const TRANSPORT_PARAMETER_ERROR: u64 = 0x08;
    pub const CONNECTION_ID_LIMIT_ERROR: u64 = 0x09;
    pub const PROTOCOL_VIOLATION: u64 = 0x0a;
    pub const INVALID_TOKEN: u64 = 0x0b;
    pub const APPLICATION_ERROR: u64 = 0x0c;
    pub const CRYPTO_BUFFER_EXCEEDED: u64 = 0x0d;
    pub const KEY_UPDATE_ERROR: u64 = 0x0e;
    pub const AEAD_LIMIT_REACHED: u64 = 0x0f;
    pub const NO_VIABLE_PATH: u64 = 0x10;
    /// RFC 9368 §4: version_information contradicts the version in use.
    pub const VERSION_NEGOTIATION_ERROR: u64 = 0x11;
    /// TLS alerts map to 0x0100 + alert (RFC 9001 §4.8).
    pub const CRYPTO_ERROR_BASE: u64 = 0x0100;
    /// Multipath PATH_ABANDON reasons (draft-ietf-quic-multipath-21 §4.3.1).
    pub const APPLICATION_ABANDON_PATH: u64 = 0x3e;
    pub const PATH_RESOURCE_LIMIT_REACHED: u64 = 0x3e75;
    pub const PATH_UNSTABLE_OR_POOR: u64 = 0x3e76;
    pub const NO_CID_AVAILABLE_FOR_PATH: u64 = 0x3e77;
}

/// A transport-level error that closes the connection with a CONNECTION_CLOSE (type 0x1c).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportError {
    pub code: u64,
    /// The type of the frame that triggered the error, when known.
    pub frame_type: Option<u64>,
    pub reason: String,
}

impl TransportError {
    pub fn new(code: u64, reason: impl Into<String>) -> Self {
        TransportError {
            code,
            frame_type: None,
            reason: reason.into(),
        }
    }
    pub fn with_frame(mut self, frame_type: u64) -> Self {
        self.frame_type = Some(frame_type);
        self
    }
    pub fn protocol_violation(reason: impl Into<String>) -> Self {
        Self::new(error_code::PROTOCOL_VIOLATION, reason)
    }
    pub fn frame_encoding(reason: impl Into<String>) -> Self {
        Self::new(error_code::FRAME_ENCODING_ERROR, reason)
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "transport error 0x{:x}", self.code)?;
        if let Some(t) = self.frame_type {
            write!(f, " in frame 0x{t:x}")?;
        }
        if !self.reason.is_empty() {
            write!(f, ": {}", self.reason)?;
        }
        Ok(())
    }
}

impl std::error::Error for TransportError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_id_bits() {
        let id = StreamId::new(Side::Server, Dir::Uni, 5);
        assert_eq!(id.0, 23);
        assert_eq!(id.initiator(), Side::Server);
        assert_eq!(id.dir(), Dir::Uni);
        assert_eq!(id.index(), 5);
    }

    #[test]
    fn cid_roundtrip() {
        let c = ConnectionId::new(&[1, 2, 3]);
        assert_eq!(&*c, &[1, 2, 3]);
        assert!(ConnectionId::try_new(&[0; 21]).is_none());
    }
}

/// The ECN codepoint of an IP packet (RFC 3168 §5); Not-ECT is `None` where one is optional.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EcnCodepoint {
    /// ECT(0), `0b10`.
    Ect0,
    /// ECT(1), `0b01`.
    Ect1,
    /// Congestion Experienced, `0b11`.
    Ce,
}

impl EcnCodepoint {
    /// From the two low bits of the IP TOS / traffic class byte; `None` for Not-ECT.
    pub fn from_bits(bits: u8) -> Option<Self> {
        match bits & 0b11 {
            0b10 => Some(EcnCodepoint::Ect0),
            0b01 => Some(EcnCodepoint::Ect1),
            0b11 => Some(EcnCodepoint::Ce),
            _ => None,
        }
    }

    /// The two ECN bits of the IP header.
    pub fn bits(self) -> u8 {
        match self {
            EcnCodepoint::Ect0 => 0b10,
            EcnCodepoint::Ect1 => 0b01,
            EcnCodepoint::Ce => 0b11,
        }
    }
}

/// Packets received with each ECN codepoint (RFC 9000 §13.4.1: what ACK_ECN frames report).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EcnCounts {
    pub ect0: u64,
    pub ect1: u64,
    pub ce: u64,
}

impl EcnCounts {
    /// Counts one packet that arrived with `ecn`.
    pub fn add(&mut self, ecn: Option<EcnCodepoint>) {
        match ecn {
            Some(EcnCodepoint::Ect0) => self.ect0 += 1,
            Some(EcnCodepoint::Ect1) => self.ect1 += 1,
            Some(EcnCodepoint::Ce) => self.ce += 1,
            None => {}
        }
    }
}

/// What the socket reports of a received datagram besides its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramInfo {
    /// Where it came from.
    pub remote: std::net::SocketAddr,
    /// Our address it was sent to (IP_PKTINFO / IPV6_PKTINFO), when the driver knows it:
    /// replies go out from the same address.
    pub local: Option<std::net::SocketAddr>,
    /// Its IP header's ECN codepoint (IP_RECVTOS / IPV6_RECVTCLASS), when the driver reads it.
    pub ecn: Option<EcnCodepoint>,
}

impl From<std::net::SocketAddr> for DatagramInfo {
    /// A datagram known only by its source address.
    fn from(remote: std::net::SocketAddr) -> Self {
        DatagramInfo {
            remote,
            local: None,
            ecn: None,
        }
    }
}

#[cfg(test)]
mod ecn_tests {
    use super::*;

    #[test]
    fn codepoints_round_trip_through_their_bits() {
        for c in [EcnCodepoint::Ect0, EcnCodepoint::Ect1, EcnCodepoint::Ce] {
            assert_eq!(EcnCodepoint::from_bits(c.bits()), Some(c));
            // The DSCP bits above do not matter.
            assert_eq!(EcnCodepoint::from_bits(0xb8 | c.bits()), Some(c));
        }
        assert_eq!(EcnCodepoint::from_bits(0xb8), None);
        let mut n = EcnCounts::default();
        for c in [
            Some(EcnCodepoint::Ce),
            None,
            Some(EcnCodepoint::Ect0),
            Some(EcnCodepoint::Ce),
        ] {
            n.add(c);
        }
        assert_eq!(
            n,
            EcnCounts {
                ect0: 1,
                ect1: 0,
                ce: 2
            }
        );
    }
}
