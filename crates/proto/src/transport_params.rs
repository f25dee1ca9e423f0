//! QUIC transport parameters (RFC 9000 §18), plus RFC 9221's max_datagram_frame_size and the
//! ack-frequency draft's min_ack_delay. Unknown parameters are kept raw, within a local bound,
//! so extensions such as FEC can negotiate without this module knowing them.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};

use crate::coding::{Reader, put_varint, varint_len};
use crate::types::{ConnectionId, MAX_CID_SIZE, Side, TransportError, error_code};

/// Parameter identifiers.
pub mod id {
    pub const ORIGINAL_DESTINATION_CONNECTION_ID: u64 = 0x00;
    pub const MAX_IDLE_TIMEOUT: u64 = 0x01;
    pub const STATELESS_RESET_TOKEN: u64 = 0x02;
    pub const MAX_UDP_PAYLOAD_SIZE: u64 = 0x03;
    pub const INITIAL_MAX_DATA: u64 = 0x04;
    pub const INITIAL_MAX_STREAM_DATA_BIDI_LOCAL: u64 = 0x05;
    pub const INITIAL_MAX_STREAM_DATA_BIDI_REMOTE: u64 = 0x06;
    pub const INITIAL_MAX_STREAM_DATA_UNI: u64 = 0x07;
    pub const INITIAL_MAX_STREAMS_BIDI: u64 = 0x08;
    pub const INITIAL_MAX_STREAMS_UNI: u64 = 0x09;
    pub const ACK_DELAY_EXPONENT: u64 = 0x0a;
    pub const MAX_ACK_DELAY: u64 = 0x0b;
    pub const DISABLE_ACTIVE_MIGRATION: u64 = 0x0c;
    pub const PREFERRED_ADDRESS: u64 = 0x0d;
    pub const ACTIVE_CONNECTION_ID_LIMIT: u64 = 0x0e;
    pub const INITIAL_SOURCE_CONNECTION_ID: u64 = 0x0f;
    pub const RETRY_SOURCE_CONNECTION_ID: u64 = 0x10;
    /// RFC 9368 §3.
    pub const VERSION_INFORMATION: u64 = 0x11;
    pub const MAX_DATAGRAM_FRAME_SIZE: u64 = 0x20;
    pub const MIN_ACK_DELAY: u64 = 0xff04_de1b;
    /// draft-ietf-quic-multipath-21 §2.1.
    pub const INITIAL_MAX_PATH_ID: u64 = 0x3e;
}

/// At most this many unknown parameters are kept; the rest are ignored.
pub const MAX_EXTENSIONS: usize = 32;
/// Unknown parameters longer than this are ignored.
pub const MAX_EXTENSION_LEN: usize = 1024;

/// At most this many of a peer's Available Versions are kept; the rest are ignored.
pub const MAX_AVAILABLE_VERSIONS: usize = 32;

/// RFC 9368's version_information: the version an endpoint chose (the client: its first
/// Initial's; the server: the negotiated one) and the versions it speaks, most preferred
/// first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionInformation {
    pub chosen: u32,
    pub available: Vec<u32>,
}

/// The server's preferred_address (RFC 9000 §9.6, §18.2). An address is `None` when sent as
/// all zeros with port 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreferredAddress {
    pub ipv4: Option<SocketAddrV4>,
    pub ipv6: Option<SocketAddrV6>,
    pub cid: ConnectionId,
    pub reset_token: [u8; 16],
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportParameters {
    pub original_destination_connection_id: Option<ConnectionId>,
    /// Milliseconds; 0 disables.
    pub max_idle_timeout: u64,
    pub stateless_reset_token: Option<[u8; 16]>,
    pub max_udp_payload_size: u64,
    pub initial_max_data: u64,
    pub initial_max_stream_data_bidi_local: u64,
    pub initial_max_stream_data_bidi_remote: u64,
    pub initial_max_stream_data_uni: u64,
    pub initial_max_streams_bidi: u64,
    pub initial_max_streams_uni: u64,
    pub ack_delay_exponent: u64,
    /// Milliseconds.
    pub max_ack_delay: u64,
    pub disable_active_migration: bool,
    pub preferred_address: Option<PreferredAddress>,
    pub active_connection_id_limit: u64,
    pub initial_source_connection_id: Option<ConnectionId>,
    pub retry_source_connection_id: Option<ConnectionId>,
    /// RFC 9221: present means DATAGRAM frames up to this size are accepted.
    pub max_datagram_frame_size: Option<u64>,
    /// Microseconds; present means ACK_FREQUENCY / IMMEDIATE_ACK are accepted.
    pub min_ack_delay: Option<u64>,
    /// Multipath: the largest path ID the endpoint accepts at first (at most 2^32 - 1); sent
    /// by an endpoint that supports multipath QUIC.
    pub initial_max_path_id: Option<u64>,
    /// Compatible version negotiation (RFC 9368).
    pub version_information: Option<VersionInformation>,
    /// Other parameters, raw, in received order (bounded by [`MAX_EXTENSIONS`] and
    /// [`MAX_EXTENSION_LEN`]).
    pub extensions: Vec<(u64, Vec<u8>)>,
}

impl Default for TransportParameters {
    fn default() -> Self {
        TransportParameters {
            original_destination_connection_id: None,
            max_idle_timeout: 0,
            stateless_reset_token: None,
            max_udp_payload_size: 65527,
            initial_max_data: 0,
            initial_max_stream_data_bidi_local: 0,
            initial_max_stream_data_bidi_remote: 0,
            initial_max_stream_data_uni: 0,
            initial_max_streams_bidi: 0,
            initial_max_streams_uni: 0,
            ack_delay_exponent: 3,
            max_ack_delay: 25,
            disable_active_migration: false,
            preferred_address: None,
            active_connection_id_limit: 2,
            initial_source_connection_id: None,
            retry_source_connection_id: None,
            max_datagram_frame_size: None,
            min_ack_delay: None,
            initial_max_path_id: None,
            version_information: None,
            extensions: Vec::new(),
        }
    }
}

fn tp_error(reason: &'static str) -> TransportError {
    TransportError::new(error_code::TRANSPORT_PARAMETER_ERROR, reason)
}

/// Whether `id` is a parameter this crate reads into a field of [`TransportParameters`]
/// (an extension may not use it).
pub fn is_known_id(id: u64) -> bool {
    known_bit(id).is_some()
}

/// Ids of the form 31 * N + 27, sent only to exercise tolerance of unknown parameters.
pub fn is_reserved_id(id: u64) -> bool {
    id >= 27 && (id - 27).is_multiple_of(31)
}

fn put_param(buf: &mut Vec<u8>, id: u64, value: &[u8]) {
    put_varint(buf, id);
    put_varint(buf, value.len() as u64);
    buf.extend_from_slice(value);
}

fn put_int(buf: &mut Vec<u8>, id: u64, v: u64) {
    put_varint(buf, id);
    put_varint(buf, varint_len(v) as u64);
    put_varint(buf, v);
}

fn put_preferred(buf: &mut Vec<u8>, p: &PreferredAddress) {
    let mut v = Vec::with_capacity(41 + p.cid.len());
    let v4 = p
        .ipv4
        .unwrap_or(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
    let v6 = p
        .ipv6
        .unwrap_or(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 0, 0, 0));
    v.extend_from_slice(&v4.ip().octets());
    v.extend_from_slice(&v4.port().to_be_bytes());
    v.extend_from_slice(&v6.ip().octets());
    v.extend_from_slice(&v6.port().to_be_bytes());
    v.push(p.cid.len() as u8);
    v.extend_from_slice(&p.cid);
    v.extend_from_slice(&p.reset_token);
    put_param(buf, id::PREFERRED_ADDRESS, &v);
}

fn parse_preferred(value: &[u8]) -> Result<PreferredAddress, TransportError> {
    let bad = |_| tp_error("malformed preferred_address");
    let mut r = Reader::new(value);
    let ip4 = Ipv4Addr::from(r.array::<4>().map_err(bad)?);
    let port4 = r.u16().map_err(bad)?;
    let ip6 = Ipv6Addr::from(r.array::<16>().map_err(bad)?);
    let port6 = r.u16().map_err(bad)?;
    let len = usize::from(r.u8().map_err(bad)?);
    if len == 0 || len > MAX_CID_SIZE {
        return Err(tp_error(
            "preferred_address connection ID length not in 1..=20",
        ));
    }
    let cid = ConnectionId::new(r.bytes(len).map_err(bad)?);
    let reset_token = r.array().map_err(bad)?;
    if !r.is_empty() {
        return Err(tp_error("malformed preferred_address"));
    }
    Ok(PreferredAddress {
        ipv4: (!ip4.is_unspecified() || port4 != 0).then(|| SocketAddrV4::new(ip4, port4)),
        ipv6: (!ip6.is_unspecified() || port6 != 0).then(|| SocketAddrV6::new(ip6, port6, 0, 0)),
        cid,
        reset_token,
    })
}

fn parse_version_information(value: &[u8]) -> Result<VersionInformation, TransportError> {
    if value.is_empty() || !value.len().is_multiple_of(4) {
        return Err(tp_error(
            "version_information not a list of 4-byte versions",
        ));
    }
    let mut versions = value
        .chunks_exact(4)
        .map(|v| u32::from_be_bytes([v[0], v[1], v[2], v[3]]));
    let chosen = versions.next().unwrap_or(0);
    if chosen == 0 {
        return Err(tp_error("version_information chooses version 0"));
    }
    let mut available = Vec::new();
    for v in versions {
        if v == 0 {
            return Err(tp_error("version_information lists version 0"));
        }
        if available.len() < MAX_AVAILABLE_VERSIONS {
            available.push(v);
        }
    }
    Ok(VersionInformation { chosen, available })
}

/// A value that must be exactly one varint.
fn int_value(value: &[u8]) -> Result<u64, TransportError> {
    let mut r = Reader::new(value);
    match r.varint() {
        Ok(v) if r.is_empty() => Ok(v),
        _ => Err(tp_error("malformed integer parameter")),
    }
}

fn cid_value(value: &[u8]) -> Result<ConnectionId, TransportError> {
    ConnectionId::try_new(value).ok_or(tp_error("connection ID parameter longer than 20 bytes"))
}

/// Bit in the duplicate-detection mask for a known id.
fn known_bit(id: u64) -> Option<u32> {
    match id {
        0..=0x11 => Some(id as u32),
        id::MAX_DATAGRAM_FRAME_SIZE => Some(18),
        id::MIN_ACK_DELAY => Some(19),
        id::INITIAL_MAX_PATH_ID => Some(20),
        _ => None,
    }
}

impl TransportParameters {
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let d = TransportParameters::default();
        if let Some(c) = &self.original_destination_connection_id {
            put_param(buf, id::ORIGINAL_DESTINATION_CONNECTION_ID, c);
        }
        if let Some(t) = &self.stateless_reset_token {
            put_param(buf, id::STATELESS_RESET_TOKEN, t);
        }
        let ints = [
            (
                id::MAX_IDLE_TIMEOUT,
                self.max_idle_timeout,
                d.max_idle_timeout,
            ),
            (
                id::MAX_UDP_PAYLOAD_SIZE,
                self.max_udp_payload_size,
                d.max_udp_payload_size,
            ),
            (id::INITIAL_MAX_DATA, self.initial_max_data, 0),
            (
                id::INITIAL_MAX_STREAM_DATA_BIDI_LOCAL,
                self.initial_max_stream_data_bidi_local,
                0,
            ),
            (
                id::INITIAL_MAX_STREAM_DATA_BIDI_REMOTE,
                self.initial_max_stream_data_bidi_remote,
                0,
            ),
            (
                id::INITIAL_MAX_STREAM_DATA_UNI,
                self.initial_max_stream_data_uni,
                0,
            ),
            (
                id::INITIAL_MAX_STREAMS_BIDI,
                self.initial_max_streams_bidi,
                0,
            ),
            (id::INITIAL_MAX_STREAMS_UNI, self.initial_max_streams_uni, 0),
            (
                id::ACK_DELAY_EXPONENT,
                self.ack_delay_exponent,
                d.ack_delay_exponent,
            ),
            (id::MAX_ACK_DELAY, self.max_ack_delay, d.max_ack_delay),
            (
                id::ACTIVE_CONNECTION_ID_LIMIT,
                self.active_connection_id_limit,
                d.active_connection_id_limit,
            ),
        ];
        for (id, v, default) in ints {
            if v != default {
                put_int(buf, id, v);
            }
        }
        if self.disable_active_migration {
            put_param(buf, id::DISABLE_ACTIVE_MIGRATION, &[]);
        }
        if let Some(p) = &self.preferred_address {
            put_preferred(buf, p);
        }
        if let Some(c) = &self.initial_source_connection_id {
            put_param(buf, id::INITIAL_SOURCE_CONNECTION_ID, c);
        }
        if let Some(c) = &self.retry_source_connection_id {
            put_param(buf, id::RETRY_SOURCE_CONNECTION_ID, c);
        }
        if let Some(vi) = &self.version_information {
            let v: Vec<u8> = std::iter::once(vi.chosen)
                .chain(vi.available.iter().copied())
                .flat_map(u32::to_be_bytes)
                .collect();
            put_param(buf, id::VERSION_INFORMATION, &v);
        }
        if let Some(v) = self.max_datagram_frame_size {
            put_int(buf, id::MAX_DATAGRAM_FRAME_SIZE, v);
        }
        if let Some(v) = self.initial_max_path_id {
            put_int(buf, id::INITIAL_MAX_PATH_ID, v);
        }
        if let Some(v) = self.min_ack_delay {
            put_int(buf, id::MIN_ACK_DELAY, v);
        }
        for (id, value) in &self.extensions {
            put_param(buf, *id, value);
        }
    }

    /// Decodes the peer's parameters; `sender` is the peer's role, used to reject server-only
    /// parameters from a client. Errors are TRANSPORT_PARAMETER_ERROR.
    pub fn decode(data: &[u8], sender: Side) -> Result<Self, TransportError> {
        let mut tp = TransportParameters::default();
        let mut seen = 0u32;
        let mut r = Reader::new(data);
        let trunc = |_| tp_error("transport parameters truncated");
        while !r.is_empty() {
            let pid = r.varint().map_err(trunc)?;
            let value = r.varint_bytes().map_err(trunc)?;
            if let Some(bit) = known_bit(pid) {
                if seen & (1 << bit) != 0 {
                    return Err(tp_error("duplicate transport parameter"));
                }
                seen |= 1 << bit;
            }
            let server_only = matches!(
                pid,
                id::ORIGINAL_DESTINATION_CONNECTION_ID
                    | id::STATELESS_RESET_TOKEN
                    | id::PREFERRED_ADDRESS
                    | id::RETRY_SOURCE_CONNECTION_ID
            );
            if server_only && sender == Side::Client {
                return Err(tp_error("server-only transport parameter sent by client"));
            }
            match pid {
                id::ORIGINAL_DESTINATION_CONNECTION_ID => {
                    tp.original_destination_connection_id = Some(cid_value(value)?)
                }
                id::MAX_IDLE_TIMEOUT => tp.max_idle_timeout = int_value(value)?,
                id::STATELESS_RESET_TOKEN => {
                    let t = value
                        .try_into()
                        .map_err(|_| tp_error("stateless_reset_token not 16 bytes"))?;
                    tp.stateless_reset_token = Some(t);
                }
                id::MAX_UDP_PAYLOAD_SIZE => tp.max_udp_payload_size = int_value(value)?,
                id::INITIAL_MAX_DATA => tp.initial_max_data = int_value(value)?,
                id::INITIAL_MAX_STREAM_DATA_BIDI_LOCAL => {
                    tp.initial_max_stream_data_bidi_local = int_value(value)?
                }
                id::INITIAL_MAX_STREAM_DATA_BIDI_REMOTE => {
                    tp.initial_max_stream_data_bidi_remote = int_value(value)?
                }
                id::INITIAL_MAX_STREAM_DATA_UNI => {
                    tp.initial_max_stream_data_uni = int_value(value)?
                }
                id::INITIAL_MAX_STREAMS_BIDI => tp.initial_max_streams_bidi = int_value(value)?,
                id::INITIAL_MAX_STREAMS_UNI => tp.initial_max_streams_uni = int_value(value)?,
                id::ACK_DELAY_EXPONENT => tp.ack_delay_exponent = int_value(value)?,
                id::MAX_ACK_DELAY => tp.max_ack_delay = int_value(value)?,
                id::DISABLE_ACTIVE_MIGRATION => {
                    if !value.is_empty() {
                        return Err(tp_error("disable_active_migration must be empty"));
                    }
                    tp.disable_active_migration = true;
                }
                id::PREFERRED_ADDRESS => tp.preferred_address = Some(parse_preferred(value)?),
                id::ACTIVE_CONNECTION_ID_LIMIT => tp.active_connection_id_limit = int_value(value)?,
                id::INITIAL_SOURCE_CONNECTION_ID => {
                    tp.initial_source_connection_id = Some(cid_value(value)?)
                }
                id::RETRY_SOURCE_CONNECTION_ID => {
                    tp.retry_source_connection_id = Some(cid_value(value)?)
                }
                id::VERSION_INFORMATION => {
                    tp.version_information = Some(parse_version_information(value)?)
                }
                id::MAX_DATAGRAM_FRAME_SIZE => tp.max_datagram_frame_size = Some(int_value(value)?),
                id::MIN_ACK_DELAY => tp.min_ack_delay = Some(int_value(value)?),
                id::INITIAL_MAX_PATH_ID => tp.initial_max_path_id = Some(int_value(value)?),
                _ => tp.keep_extension(pid, value)?,
            }
        }
        tp.validate()?;
        Ok(tp)
    }

    fn keep_extension(&mut self, pid: u64, value: &[u8]) -> Result<(), TransportError> {
        if is_reserved_id(pid) {
            return Ok(());
        }
        if self.extensions.iter().any(|(i, _)| *i == pid) {
            return Err(tp_error("duplicate transport parameter"));
        }
        if self.extensions.len() < MAX_EXTENSIONS && value.len() <= MAX_EXTENSION_LEN {
            self.extensions.push((pid, value.to_vec()));
        }
        Ok(())
    }

    /// Value limits of RFC 9000 §18.2 and the ack-frequency draft.
    pub fn validate(&self) -> Result<(), TransportError> {
        if self.max_udp_payload_size < 1200 {
            return Err(tp_error("max_udp_payload_size below 1200"));
        }
        if self.ack_delay_exponent > 20 {
            return Err(tp_error("ack_delay_exponent above 20"));
        }
        if self.max_ack_delay >= 1 << 14 {
            return Err(tp_error("max_ack_delay of 2^14 ms or more"));
        }
        if self.active_connection_id_limit < 2 {
            return Err(tp_error("active_connection_id_limit below 2"));
        }
        if self.initial_max_streams_bidi > 1 << 60 || self.initial_max_streams_uni > 1 << 60 {
            return Err(tp_error("initial_max_streams above 2^60"));
        }
        if self
            .min_ack_delay
            .is_some_and(|m| m > self.max_ack_delay * 1000)
        {
            return Err(tp_error("min_ack_delay above max_ack_delay"));
        }
        if self
            .initial_max_path_id
            .is_some_and(|m| m > crate::frame::MAX_PATH_ID)
        {
            return Err(tp_error("initial_max_path_id above 2^32 - 1"));
        }
        // A known id among the extensions would be sent twice, or read back as the field.
        if self.extensions.iter().any(|(id, _)| is_known_id(*id)) {
            return Err(tp_error(
                "an extension parameter has the id of a known parameter",
            ));
        }
        Ok(())
    }

    /// Raw value of an unknown (extension) parameter.
    pub fn extension(&self, id: u64) -> Option<&[u8]> {
        self.extensions
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, v)| &v[..])
    }

    /// Sets (or replaces) an extension parameter to send.
    pub fn set_extension(&mut self, id: u64, value: Vec<u8>) {
        match self.extensions.iter_mut().find(|(i, _)| *i == id) {
            Some(e) => e.1 = value,
            None => self.extensions.push((id, value)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Regression (fuzz, transport_params): an extension that used the id of
    /// initial_max_path_id passed validation and came back from decode as the field.
    #[test]
    fn an_extension_with_a_known_id_is_not_valid() {
        for id in [
            id::INITIAL_MAX_PATH_ID,
            id::MIN_ACK_DELAY,
            id::MAX_IDLE_TIMEOUT,
        ] {
            let mut tp = TransportParameters::default();
            tp.set_extension(id, vec![1]);
            assert!(tp.validate().is_err(), "{id:#x}");
        }
        let mut tp = TransportParameters::default();
        tp.set_extension(0x3f, vec![1]);
        assert!(tp.validate().is_ok());
    }

    fn enc(tp: &TransportParameters) -> Vec<u8> {
        let mut b = Vec::new();
        tp.encode(&mut b);
        b
    }

    fn full() -> TransportParameters {
        TransportParameters {
            original_destination_connection_id: Some(ConnectionId::new(&[1; 8])),
            max_idle_timeout: 30_000,
            stateless_reset_token: Some([9; 16]),
            max_udp_payload_size: 1452,
            initial_max_data: 1 << 20,
            initial_max_stream_data_bidi_local: 1,
            initial_max_stream_data_bidi_remote: 2,
            initial_max_stream_data_uni: 3,
            initial_max_streams_bidi: 100,
            initial_max_streams_uni: 1 << 60,
            ack_delay_exponent: 20,
            max_ack_delay: 16383,
            disable_active_migration: true,
            preferred_address: Some(PreferredAddress {
                ipv4: Some("192.0.2.1:4433".parse().unwrap()),
                ipv6: None,
                cid: ConnectionId::new(&[4; 20]),
                reset_token: [5; 16],
            }),
            active_connection_id_limit: 8,
            initial_source_connection_id: Some(ConnectionId::new(&[])),
            retry_source_connection_id: Some(ConnectionId::new(&[2; 4])),
            max_datagram_frame_size: Some(65535),
            min_ack_delay: Some(1000),
            initial_max_path_id: Some(2),
            version_information: Some(VersionInformation {
                chosen: 0x6b33_43cf,
                available: vec![0x6b33_43cf, 1, 0x1a2a_3a4a],
            }),
            extensions: vec![(0x238f_fece01, vec![]), (0x238f_fecd, vec![1, 2, 3])],
        }
    }

    fn err(bytes: &[u8], sender: Side) -> String {
        let e = TransportParameters::decode(bytes, sender).unwrap_err();
        assert_eq!(e.code, error_code::TRANSPORT_PARAMETER_ERROR);
        e.reason
    }

    #[test]
    fn roundtrip() {
        let tp = full();
        assert_eq!(
            TransportParameters::decode(&enc(&tp), Side::Server).unwrap(),
            tp
        );
        assert_eq!(tp.extension(0x238f_fecd), Some(&[1u8, 2, 3][..]));
        let d = TransportParameters::default();
        assert!(enc(&d).is_empty());
        assert_eq!(TransportParameters::decode(&[], Side::Client).unwrap(), d);
    }

    #[test]
    fn rejects_invalid() {
        let server_only = full();
        let client = TransportParameters {
            original_destination_connection_id: server_only.original_destination_connection_id,
            ..Default::default()
        };
        err(&enc(&client), Side::Client);
        let mut b = Vec::new();
        put_int(&mut b, id::MAX_IDLE_TIMEOUT, 1);
        put_int(&mut b, id::MAX_IDLE_TIMEOUT, 1);
        assert_eq!(err(&b, Side::Client), "duplicate transport parameter");
        let one = |pid: u64, v: u64| {
            let mut b = Vec::new();
            put_int(&mut b, pid, v);
            b
        };
        err(&one(id::ACK_DELAY_EXPONENT, 21), Side::Client);
        err(&one(id::MAX_ACK_DELAY, 1 << 14), Side::Client);
        err(&one(id::MAX_UDP_PAYLOAD_SIZE, 1199), Side::Client);
        err(&one(id::ACTIVE_CONNECTION_ID_LIMIT, 1), Side::Client);
        err(
            &one(id::INITIAL_MAX_STREAMS_UNI, (1 << 60) + 1),
            Side::Client,
        );
        err(&one(id::MIN_ACK_DELAY, 25_001), Side::Client);
        assert!(TransportParameters::decode(&one(id::MIN_ACK_DELAY, 25_000), Side::Client).is_ok());
        err(&one(id::INITIAL_MAX_PATH_ID, 1 << 32), Side::Client);
        let tp =
            TransportParameters::decode(&one(id::INITIAL_MAX_PATH_ID, (1 << 32) - 1), Side::Client)
                .unwrap();
        assert_eq!(tp.initial_max_path_id, Some((1 << 32) - 1));
        // Integer with trailing garbage; wrong token length; CID too long; non-empty flag.
        err(&[0x01, 0x02, 0x05, 0x00], Side::Client);
        err(&[0x02, 0x03, 1, 2, 3], Side::Server);
        let mut b = vec![0x0f, 21];
        b.extend_from_slice(&[0; 21]);
        err(&b, Side::Client);
        err(&[0x0c, 0x01, 0x00], Side::Client);
        // Truncated parameter.
        err(&[0x04, 0x04, 0x80], Side::Client);
        // preferred_address with an empty CID.
        let mut p = vec![0; 24];
        p.push(0);
        p.extend_from_slice(&[0; 16]);
        let mut b = Vec::new();
        put_param(&mut b, id::PREFERRED_ADDRESS, &p);
        err(&b, Side::Server);
    }

    #[test]
    fn version_information_limits() {
        let vi = |versions: &[u32]| {
            let v: Vec<u8> = versions.iter().flat_map(|v| v.to_be_bytes()).collect();
            let mut b = Vec::new();
            put_param(&mut b, id::VERSION_INFORMATION, &v);
            b
        };
        // RFC 9368 §3: empty, not a multiple of 4, or a zero version is malformed.
        err(&vi(&[]), Side::Client);
        err(&vi(&[0, 1]), Side::Client);
        err(&vi(&[1, 0]), Side::Server);
        let mut b = Vec::new();
        put_param(&mut b, id::VERSION_INFORMATION, &[0, 0, 0, 1, 0]);
        err(&b, Side::Client);
        // Only the chosen version: a valid (if odd) list.
        let tp = TransportParameters::decode(&vi(&[1]), Side::Client).unwrap();
        assert_eq!(tp.version_information.unwrap().available, Vec::<u32>::new());
        // A long list is kept up to the local bound.
        let many: Vec<u32> = (1..=100).collect();
        let tp = TransportParameters::decode(&vi(&many), Side::Client).unwrap();
        let kept = tp.version_information.unwrap();
        assert_eq!(
            (kept.chosen, kept.available.len()),
            (1, MAX_AVAILABLE_VERSIONS)
        );
        let mut twice = vi(&[1]);
        twice.extend(vi(&[1]));
        err(&twice, Side::Client);
    }

    #[test]
    fn unknown_and_reserved_ids() {
        let mut b = Vec::new();
        put_param(&mut b, 27 + 31 * 5, &[1, 2]);
        for i in 0..40u64 {
            put_param(&mut b, 0x1000 + i, &[i as u8]);
        }
        put_param(&mut b, 0x5000, &[0; MAX_EXTENSION_LEN + 1]);
        let tp = TransportParameters::decode(&b, Side::Client).unwrap();
        assert_eq!(tp.extensions.len(), MAX_EXTENSIONS);
        assert_eq!(tp.extension(0x1000), Some(&[0u8][..]));
        assert_eq!(tp.extension(27 + 31 * 5), None);
        assert!(is_reserved_id(27) && is_reserved_id(58) && !is_reserved_id(28));
        let mut b = Vec::new();
        put_param(&mut b, 0x1000, &[]);
        put_param(&mut b, 0x1000, &[]);
        err(&b, Side::Client);
    }

    fn opt_cid() -> impl Strategy<Value = Option<ConnectionId>> {
        proptest::option::of(
            proptest::collection::vec(any::<u8>(), 0..=20).prop_map(|v| ConnectionId::new(&v)),
        )
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), server: bool) {
            let side = if server { Side::Server } else { Side::Client };
            if let Ok(tp) = TransportParameters::decode(&bytes, side) {
                prop_assert_eq!(TransportParameters::decode(&enc(&tp), side).unwrap(), tp);
            }
        }

        /// A valid encoding with a few bytes changed or cut: decoded, it re-encodes to what
        /// it decoded to; unchanged, it must decode (so the check runs in a third of cases).
        #[test]
        fn mutated_params_decode_or_refuse(
            muts in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>()), 0..3),
            cut in proptest::option::of(any::<proptest::sample::Index>()),
        ) {
            let mut bytes = enc(&full());
            let untouched = muts.is_empty() && cut.is_none();
            for (i, v) in muts {
                let i = i.index(bytes.len());
                bytes[i] = v;
            }
            if let Some(c) = cut {
                bytes.truncate(c.index(bytes.len()));
            }
            match TransportParameters::decode(&bytes, Side::Server) {
                Ok(tp) => prop_assert_eq!(TransportParameters::decode(&enc(&tp), Side::Server).unwrap(), tp),
                Err(e) => {
                    prop_assert!(!untouched, "the valid encoding was refused: {}", e.reason);
                    prop_assert_eq!(e.code, error_code::TRANSPORT_PARAMETER_ERROR);
                }
            }
        }

        #[test]
        fn valid_params_roundtrip(
            odcid in opt_cid(), iscid in opt_cid(), rscid in opt_cid(),
            ints in proptest::array::uniform6(0u64..=crate::coding::VARINT_MAX),
            exp in 0u64..=20, mad in 0u64..(1 << 14), limit in 2u64..100, dgram in proptest::option::of(0u64..70000),
            flag: bool, ext in proptest::collection::vec((0x40u64..0x4000, proptest::collection::vec(any::<u8>(), 0..8)), 0..4),
            versions in proptest::option::of(proptest::collection::vec(1u32.., 1..=MAX_AVAILABLE_VERSIONS + 1)),
        ) {
            let mut tp = TransportParameters {
                original_destination_connection_id: odcid,
                max_idle_timeout: ints[0],
                initial_max_data: ints[1],
                initial_max_stream_data_bidi_local: ints[2],
                initial_max_stream_data_uni: ints[3],
                initial_max_streams_bidi: ints[4] >> 2,
                max_udp_payload_size: ints[5].max(1200),
                ack_delay_exponent: exp,
                max_ack_delay: mad,
                active_connection_id_limit: limit,
                initial_source_connection_id: iscid,
                retry_source_connection_id: rscid,
                max_datagram_frame_size: dgram,
                min_ack_delay: flag.then_some(mad * 1000),
                initial_max_path_id: dgram.map(|d| d % 7),
                version_information: versions.map(|v| VersionInformation { chosen: v[0], available: v[1..].to_vec() }),
                disable_active_migration: flag,
                ..Default::default()
            };
            for (i, v) in ext {
                if !is_reserved_id(i) {
                    tp.set_extension(i, v);
                }
            }
            prop_assert_eq!(TransportParameters::decode(&enc(&tp), Side::Server).unwrap(), tp);
        }
    }
}
