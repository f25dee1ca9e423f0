//! What a server reads of a ClientHello before it starts TLS: the QUIC transport parameters
//! (whose version_information decides the version of the connection, RFC 9368 §2.1) and
//! whether the client attempts 0-RTT. The bytes are the peer's: every length is checked.

use crate::coding::Reader;

/// TLS handshake message type of a ClientHello (RFC 8446 §4).
const CLIENT_HELLO: u8 = 1;
/// Extension types (RFC 8446 §4.2, RFC 9001 §8.2).
const EARLY_DATA: u16 = 42;
const QUIC_TRANSPORT_PARAMETERS: u16 = 57;

/// How much of the CRYPTO stream's start holds the ClientHello: `Some(len)` once its header
/// is there (`len` counts the header), `None` before. A stream that does not start with a
/// ClientHello gives `Some(0)`: nothing to wait for.
pub fn client_hello_len(stream: &[u8]) -> Option<usize> {
    match stream {
        [] => None,
        [t, ..] if *t != CLIENT_HELLO => Some(0),
        [_, a, b, c, ..] => {
            Some(4 + (usize::from(*a) << 16 | usize::from(*b) << 8 | usize::from(*c)))
        }
        _ => None,
    }
}

/// A ClientHello's QUIC parts.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ClientHello<'a> {
    pub transport_parameters: Option<&'a [u8]>,
    pub early_data: bool,
}

/// Parses a whole ClientHello message (its 4-byte header included); `None` if malformed
/// (TLS then refuses it with the right alert).
pub fn parse_client_hello(msg: &[u8]) -> Option<ClientHello<'_>> {
    let mut r = Reader::new(msg);
    if r.u8().ok()? != CLIENT_HELLO {
        return None;
    }
    let len = r.bytes(3).ok()?;
    let len = usize::from(len[0]) << 16 | usize::from(len[1]) << 8 | usize::from(len[2]);
    let mut r = Reader::new(r.bytes(len).ok()?);
    r.skip(2 + 32).ok()?; // legacy_version, random
    let session_id = usize::from(r.u8().ok()?);
    r.skip(session_id).ok()?;
    let suites = usize::from(r.u16().ok()?);
    r.skip(suites).ok()?;
    let compression = usize::from(r.u8().ok()?);
    r.skip(compression).ok()?;
    let mut hello = ClientHello::default();
    if r.is_empty() {
        return Some(hello);
    }
    let ext_len = usize::from(r.u16().ok()?);
    let mut exts = Reader::new(r.bytes(ext_len).ok()?);
    while !exts.is_empty() {
        let ty = exts.u16().ok()?;
        let len = usize::from(exts.u16().ok()?);
        let body = exts.bytes(len).ok()?;
        match ty {
            QUIC_TRANSPORT_PARAMETERS => hello.transport_parameters = Some(body),
            EARLY_DATA => hello.early_data = true,
            _ => {}
        }
    }
    Some(hello)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hello(exts: &[(u16, &[u8])]) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend_from_slice(&[9; 32]);
        body.extend_from_slice(&[1, 0xaa]); // session ID
        body.extend_from_slice(&[0, 2, 0x13, 0x01]);
        body.extend_from_slice(&[1, 0]);
        let mut e = Vec::new();
        for (ty, v) in exts {
            e.extend_from_slice(&ty.to_be_bytes());
            e.extend_from_slice(&(v.len() as u16).to_be_bytes());
            e.extend_from_slice(v);
        }
        body.extend_from_slice(&(e.len() as u16).to_be_bytes());
        body.extend_from_slice(&e);
        let mut m = vec![CLIENT_HELLO];
        m.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        m.extend_from_slice(&body);
        m
    }

    #[test]
    fn finds_transport_parameters_and_early_data() {
        let m = hello(&[(10, &[0, 2, 0, 29]), (57, &[1, 2, 3]), (42, &[])]);
        assert_eq!(client_hello_len(&m), Some(m.len()));
        assert_eq!(client_hello_len(&m[..3]), None);
        assert_eq!(client_hello_len(&[2, 0, 0, 1]), Some(0));
        let h = parse_client_hello(&m).unwrap();
        assert_eq!(h.transport_parameters, Some(&[1u8, 2, 3][..]));
        assert!(h.early_data);
        let m = hello(&[(57, &[])]);
        let h = parse_client_hello(&m).unwrap();
        assert_eq!(
            (h.transport_parameters, h.early_data),
            (Some(&[][..]), false)
        );
        assert!(parse_client_hello(&m[..m.len() - 1]).is_none());
    }

    proptest! {
        /// Any bytes: no panic; a valid message cut or changed parses or is refused.
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300), i: proptest::sample::Index, v: u8) {
            let _ = parse_client_hello(&bytes);
            let _ = client_hello_len(&bytes);
            let mut m = hello(&[(57, &[1, 4, 0x80, 0, 0x75, 0x30]), (42, &[])]);
            let i = i.index(m.len());
            m[i] = v;
            let _ = parse_client_hello(&m);
            m.truncate(i);
            let _ = parse_client_hello(&m);
        }
    }
}
