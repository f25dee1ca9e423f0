//! `TransportParameters::decode` as sent by a client and by a server, with
//! decode(encode(decode(x))) == decode(x); and, from the same bytes read as a structure,
//! arbitrary valid parameter sets that must survive encode and decode unchanged.

#![no_main]

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use qfec_proto::transport_params::{
    MAX_EXTENSION_LEN, MAX_EXTENSIONS, PreferredAddress, TransportParameters, is_known_id,
    is_reserved_id,
};
use qfec_proto::{ConnectionId, Side};

const VARINT_MAX: u64 = (1 << 62) - 1;

fuzz_target!(|data: &[u8]| {
    let as_client = TransportParameters::decode(data, Side::Client);
    let as_server = TransportParameters::decode(data, Side::Server);
    // A client may send a subset of what a server may: what a client's decode accepts, a
    // server's accepts the same way.
    if let Ok(c) = &as_client {
        assert_eq!(Some(c), as_server.as_ref().ok());
    }
    for (side, res) in [(Side::Client, as_client), (Side::Server, as_server)] {
        match res {
            Ok(tp) => roundtrip(&tp, side),
            Err(e) => assert_eq!(e.code, qfec_proto::error_code::TRANSPORT_PARAMETER_ERROR),
        }
    }
    let _ = structured(&mut Unstructured::new(data));
});

fn roundtrip(tp: &TransportParameters, side: Side) {
    assert!(tp.validate().is_ok());
    assert!(tp.extensions.len() <= MAX_EXTENSIONS);
    for (id, v) in &tp.extensions {
        assert!(v.len() <= MAX_EXTENSION_LEN && !is_reserved_id(*id));
        assert_eq!(tp.extension(*id), Some(&v[..]));
    }
    let mut buf = Vec::new();
    tp.encode(&mut buf);
    match TransportParameters::decode(&buf, side) {
        Ok(again) => assert_eq!(&again, tp, "parameters change through encode/decode"),
        Err(e) => panic!("re-encoded parameters rejected: {e:?}\n{tp:?}"),
    }
}

fn int(u: &mut Unstructured<'_>) -> Result<u64> {
    // Mostly small values, sometimes anything a varint holds.
    Ok(match u.int_in_range(0..=3u8)? {
        0 => u64::from(u.arbitrary::<u8>()?),
        1 => u64::from(u.arbitrary::<u16>()?),
        2 => u64::from(u.arbitrary::<u32>()?),
        _ => u.arbitrary::<u64>()? & VARINT_MAX,
    })
}

fn cid(u: &mut Unstructured<'_>, min: usize) -> Result<ConnectionId> {
    let len = u.int_in_range(min..=20)?;
    Ok(ConnectionId::new(u.bytes(len)?))
}

fn opt<T>(
    u: &mut Unstructured<'_>,
    f: impl FnOnce(&mut Unstructured<'_>) -> Result<T>,
) -> Result<Option<T>> {
    Ok(if u.arbitrary()? { Some(f(u)?) } else { None })
}

/// A parameter set built field by field; kept only if it is one a peer may send (valid, no
/// server-only field from a client, extensions that decode keeps).
fn structured(u: &mut Unstructured<'_>) -> Result<()> {
    let side = if u.arbitrary()? {
        Side::Client
    } else {
        Side::Server
    };
    let server = side == Side::Server;
    let mut tp = TransportParameters {
        max_idle_timeout: int(u)?,
        max_udp_payload_size: int(u)?,
        initial_max_data: int(u)?,
        initial_max_stream_data_bidi_local: int(u)?,
        initial_max_stream_data_bidi_remote: int(u)?,
        initial_max_stream_data_uni: int(u)?,
        initial_max_streams_bidi: int(u)?,
        initial_max_streams_uni: int(u)?,
        ack_delay_exponent: int(u)?,
        max_ack_delay: int(u)?,
        disable_active_migration: u.arbitrary()?,
        active_connection_id_limit: int(u)?,
        initial_source_connection_id: opt(u, |u| cid(u, 0))?,
        max_datagram_frame_size: opt(u, int)?,
        min_ack_delay: opt(u, int)?,
        initial_max_path_id: opt(u, int)?,
        ..TransportParameters::default()
    };
    if server {
        tp.original_destination_connection_id = opt(u, |u| cid(u, 0))?;
        tp.stateless_reset_token = opt(u, |u| u.arbitrary())?;
        tp.retry_source_connection_id = opt(u, |u| cid(u, 0))?;
        tp.preferred_address = opt(u, |u| {
            let ip4 = Ipv4Addr::from(u.arbitrary::<[u8; 4]>()?);
            let ip6 = Ipv6Addr::from(u.arbitrary::<[u8; 16]>()?);
            let (p4, p6) = (u.arbitrary()?, u.arbitrary()?);
            Ok(PreferredAddress {
                // All zeros is how "no address" is sent.
                ipv4: (!ip4.is_unspecified() || p4 != 0).then(|| SocketAddrV4::new(ip4, p4)),
                ipv6: (!ip6.is_unspecified() || p6 != 0).then(|| SocketAddrV6::new(ip6, p6, 0, 0)),
                cid: cid(u, 1)?,
                reset_token: u.arbitrary()?,
            })
        })?;
    }
    let n = u.int_in_range(0..=MAX_EXTENSIONS + 2)?;
    for _ in 0..n {
        let id = int(u)?;
        if is_known_id(id) || is_reserved_id(id) || tp.extension(id).is_some() {
            continue;
        }
        let len = u.int_in_range(0..=64)?;
        let value = u.bytes(len)?.to_vec();
        if tp.extensions.len() < MAX_EXTENSIONS {
            tp.set_extension(id, value);
        }
    }
    if tp.validate().is_err() {
        return Ok(());
    }
    let mut buf = Vec::new();
    tp.encode(&mut buf);
    match TransportParameters::decode(&buf, side) {
        Ok(again) => assert_eq!(
            again, tp,
            "structured parameters change through encode/decode"
        ),
        Err(e) => panic!("valid parameters rejected: {e:?}\n{tp:?}"),
    }
    Ok(())
}
