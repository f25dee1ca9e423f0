//! Packet protection for a QUIC version other than the one a TLS session was created for.
//!
//! A client that opens in version 1 and is moved to version 2 by compatible version
//! negotiation (RFC 9368) keeps its TLS handshake (its ClientHello is already on the wire),
//! but version 2 derives packet keys from the handshake's secrets with other labels
//! (RFC 9369 §3.3.2). rustls fixes the labels when a session is created and has no way to
//! change them, so the session records its traffic secrets through rustls's key log
//! ([`SecretLog`]) and qfec derives the packet keys for the new version here
//! ([`VersionKeys`]), with ring's AEADs, as RFC 9001 §5.1 describes.

use std::sync::{Arc, Mutex};

use ring::aead;
use rustls::KeyLog;
use rustls::crypto::tls13::OkmBlock;
use rustls::quic::{self as rq, Tag};

use super::{DirectionalKeys, SpaceKeys};
use crate::packet::VERSION_2;
use crate::types::Side;

/// The key log's names of the secrets qfec needs (RFC 8446 §7.1, NSS key log format).
pub(super) const CLIENT_HANDSHAKE: &str = "CLIENT_HANDSHAKE_TRAFFIC_SECRET";
pub(super) const SERVER_HANDSHAKE: &str = "SERVER_HANDSHAKE_TRAFFIC_SECRET";
pub(super) const CLIENT_TRAFFIC: &str = "CLIENT_TRAFFIC_SECRET_0";
pub(super) const SERVER_TRAFFIC: &str = "SERVER_TRAFFIC_SECRET_0";

/// A key log for one TLS session: keeps the handshake and first traffic secrets until they
/// are taken, and passes every line on to the configuration's own key log (SSLKEYLOGFILE).
pub(super) struct SecretLog {
    next: Arc<dyn KeyLog>,
    secrets: Mutex<Vec<(&'static str, Vec<u8>)>>,
}

impl std::fmt::Debug for SecretLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretLog").finish_non_exhaustive()
    }
}

impl SecretLog {
    pub(super) fn new(next: Arc<dyn KeyLog>) -> Self {
        SecretLog {
            next,
            secrets: Mutex::new(Vec::new()),
        }
    }

    /// Forgets every secret kept.
    pub(super) fn clear(&self) {
        self.secrets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Removes and returns the secret logged under `label`.
    pub(super) fn take(&self, label: &str) -> Option<Vec<u8>> {
        let mut s = self.secrets.lock().unwrap_or_else(|e| e.into_inner());
        let i = s.iter().position(|(l, _)| *l == label)?;
        Some(s.swap_remove(i).1)
    }
}

impl KeyLog for SecretLog {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        if self.next.will_log(label) {
            self.next.log(label, client_random, secret);
        }
        let Some(label) = [
            CLIENT_HANDSHAKE,
            SERVER_HANDSHAKE,
            CLIENT_TRAFFIC,
            SERVER_TRAFFIC,
        ]
        .into_iter()
        .find(|l| *l == label) else {
            return;
        };
        let mut s = self.secrets.lock().unwrap_or_else(|e| e.into_inner());
        s.retain(|(l, _)| *l != label);
        s.push((label, secret.to_vec()));
    }
}

/// The AEAD of a TLS 1.3 cipher suite, as QUIC uses it (RFC 9001 §5.3, §6.6).
#[derive(Clone, Copy)]
struct Aead {
    packet: &'static aead::Algorithm,
    header: &'static aead::quic::Algorithm,
    confidentiality_limit: u64,
    integrity_limit: u64,
}

impl Aead {
    fn of(suite: rustls::CipherSuite) -> Option<Self> {
        use rustls::CipherSuite as S;
        let aes = |packet, header| Aead {
            packet,
            header,
            confidentiality_limit: 1 << 23,
            integrity_limit: 1 << 52,
        };
        Some(match suite {
            S::TLS13_AES_128_GCM_SHA256 => aes(&aead::AES_128_GCM, &aead::quic::AES_128),
            S::TLS13_AES_256_GCM_SHA384 => aes(&aead::AES_256_GCM, &aead::quic::AES_256),
            S::TLS13_CHACHA20_POLY1305_SHA256 => Aead {
                packet: &aead::CHACHA20_POLY1305,
                header: &aead::quic::CHACHA20,
                confidentiality_limit: u64::MAX,
                integrity_limit: 1 << 36,
            },
            _ => return None,
        })
    }
}

/// Derives a version's packet protection keys from TLS traffic secrets of one cipher suite.
#[derive(Clone, Copy)]
pub(super) struct VersionKeys {
    suite: &'static rustls::Tls13CipherSuite,
    aead: Aead,
    labels: Labels,
}

/// The HKDF labels of a version (RFC 9001 §5.1, RFC 9369 §3.3.2).
#[derive(Clone, Copy)]
struct Labels {
    key: &'static [u8],
    iv: &'static [u8],
    hp: &'static [u8],
    ku: &'static [u8],
}

impl VersionKeys {
    /// `None` for a cipher suite whose AEAD QUIC does not define.
    pub(super) fn new(suite: &'static rustls::Tls13CipherSuite, version: u32) -> Option<Self> {
        let labels = if version == VERSION_2 {
            Labels {
                key: b"quicv2 key",
                iv: b"quicv2 iv",
                hp: b"quicv2 hp",
                ku: b"quicv2 ku",
            }
        } else {
            Labels {
                key: b"quic key",
                iv: b"quic iv",
                hp: b"quic hp",
                ku: b"quic ku",
            }
        };
        Some(VersionKeys {
            suite,
            aead: Aead::of(suite.common.suite)?,
            labels,
        })
    }

    /// HKDF-Expand-Label(secret, label, "", out.len()) (RFC 8446 §7.1).
    fn expand(&self, secret: &[u8], label: &[u8], out: &mut [u8]) {
        let expander = self
            .suite
            .hkdf_provider
            .expander_for_okm(&OkmBlock::new(secret));
        let len = (out.len() as u16).to_be_bytes();
        let label_len = [(b"tls13 ".len() + label.len()) as u8];
        let info: [&[u8]; 5] = [&len, &label_len, b"tls13 ", label, &[0]];
        expander
            .expand_slice(&info, out)
            .expect("QUIC keys are far shorter than HKDF's limit");
    }

    fn packet_key(&self, secret: &[u8]) -> Box<dyn rq::PacketKey> {
        let mut key = [0u8; 32];
        let key = &mut key[..self.aead.packet.key_len()];
        self.expand(secret, self.labels.key, key);
        let mut iv = [0u8; aead::NONCE_LEN];
        self.expand(secret, self.labels.iv, &mut iv);
        let key =
            aead::UnboundKey::new(self.aead.packet, key).expect("the key has the AEAD's length");
        Box::new(PacketKey {
            key: aead::LessSafeKey::new(key),
            iv,
            aead: self.aead,
        })
    }

    fn directional(&self, secret: &[u8]) -> DirectionalKeys {
        let mut hp = [0u8; 32];
        let hp = &mut hp[..self.aead.header.key_len()];
        self.expand(secret, self.labels.hp, hp);
        let header = aead::quic::HeaderProtectionKey::new(self.aead.header, hp)
            .expect("the key has the algorithm's length");
        DirectionalKeys {
            header: Box::new(HeaderKey(header)),
            packet: self.packet_key(secret),
        }
    }

    /// The keys of a packet-number space from the client's and the server's secrets.
    pub(super) fn space_keys(&self, side: Side, client: &[u8], server: &[u8]) -> SpaceKeys {
        let (local, remote) = match side {
            Side::Client => (client, server),
            Side::Server => (server, client),
        };
        SpaceKeys {
            local: self.directional(local),
            remote: self.directional(remote),
        }
    }

    /// The next generation's secret (RFC 9001 §6.1).
    fn next_secret(&self, secret: &[u8]) -> Vec<u8> {
        let mut next = vec![0u8; secret.len()];
        self.expand(secret, self.labels.ku, &mut next);
        next
    }
}

/// 1-RTT secrets of both directions, from which each key update derives the next keys.
pub(super) struct Generations {
    keys: VersionKeys,
    side: Side,
    client: Vec<u8>,
    server: Vec<u8>,
}

impl Generations {
    /// Secrets of generation 0 (the handshake's): the first [`Self::next_packet_keys`] gives
    /// generation 1's keys, as rustls's `Secrets` do.
    pub(super) fn after(keys: VersionKeys, side: Side, client: &[u8], server: &[u8]) -> Self {
        Generations {
            side,
            client: keys.next_secret(client),
            server: keys.next_secret(server),
            keys,
        }
    }

    pub(super) fn next_packet_keys(&mut self) -> super::PacketKeyPair {
        let client = self.keys.packet_key(&self.client);
        let server = self.keys.packet_key(&self.server);
        self.client = self.keys.next_secret(&self.client);
        self.server = self.keys.next_secret(&self.server);
        let (local, remote) = match self.side {
            Side::Client => (client, server),
            Side::Server => (server, client),
        };
        super::PacketKeyPair { local, remote }
    }
}

struct PacketKey {
    key: aead::LessSafeKey,
    iv: [u8; aead::NONCE_LEN],
    aead: Aead,
}

impl PacketKey {
    /// The IV XOR the 96-bit big-endian path ID (0 on a single path) and packet number
    /// (RFC 9001 §5.3, draft-ietf-quic-multipath-21 §2.4).
    fn nonce(&self, path_id: u32, pn: u64) -> aead::Nonce {
        let mut n = [0u8; aead::NONCE_LEN];
        n[..4].copy_from_slice(&path_id.to_be_bytes());
        n[4..].copy_from_slice(&pn.to_be_bytes());
        for (b, iv) in n.iter_mut().zip(self.iv) {
            *b ^= iv;
        }
        aead::Nonce::assume_unique_for_key(n)
    }

    fn seal(
        &self,
        path_id: u32,
        pn: u64,
        header: &[u8],
        payload: &mut [u8],
    ) -> Result<Tag, rustls::Error> {
        let tag = self
            .key
            .seal_in_place_separate_tag(self.nonce(path_id, pn), aead::Aad::from(header), payload)
            .map_err(|_| rustls::Error::EncryptError)?;
        Ok(Tag::from(tag.as_ref()))
    }

    fn open<'a>(
        &self,
        path_id: u32,
        pn: u64,
        header: &[u8],
        payload: &'a mut [u8],
    ) -> Result<&'a [u8], rustls::Error> {
        let plain = self
            .key
            .open_in_place(self.nonce(path_id, pn), aead::Aad::from(header), payload)
            .map_err(|_| rustls::Error::DecryptError)?;
        Ok(plain)
    }
}

impl rq::PacketKey for PacketKey {
    fn encrypt_in_place(
        &self,
        packet_number: u64,
        header: &[u8],
        payload: &mut [u8],
    ) -> Result<Tag, rustls::Error> {
        self.seal(0, packet_number, header, payload)
    }

    fn encrypt_in_place_for_path(
        &self,
        path_id: u32,
        packet_number: u64,
        header: &[u8],
        payload: &mut [u8],
    ) -> Result<Tag, rustls::Error> {
        self.seal(path_id, packet_number, header, payload)
    }

    fn decrypt_in_place<'a>(
        &self,
        packet_number: u64,
        header: &[u8],
        payload: &'a mut [u8],
    ) -> Result<&'a [u8], rustls::Error> {
        self.open(0, packet_number, header, payload)
    }

    fn decrypt_in_place_for_path<'a>(
        &self,
        path_id: u32,
        packet_number: u64,
        header: &[u8],
        payload: &'a mut [u8],
    ) -> Result<&'a [u8], rustls::Error> {
        self.open(path_id, packet_number, header, payload)
    }

    fn tag_len(&self) -> usize {
        self.aead.packet.tag_len()
    }

    fn confidentiality_limit(&self) -> u64 {
        self.aead.confidentiality_limit
    }

    fn integrity_limit(&self) -> u64 {
        self.aead.integrity_limit
    }
}

struct HeaderKey(aead::quic::HeaderProtectionKey);

impl HeaderKey {
    /// RFC 9001 §5.4.1: the low 4 (long header) or 5 (short) bits of the first byte and the
    /// packet number's bytes, XORed with the mask; the packet number's length is read from
    /// the first byte as it is unprotected (before masking, after unmasking).
    fn xor(
        &self,
        sample: &[u8],
        first: &mut u8,
        pn: &mut [u8],
        unmask: bool,
    ) -> Result<(), rustls::Error> {
        let mask = self.0.new_mask(sample).map_err(|_| {
            rustls::Error::General("header protection sample of wrong length".into())
        })?;
        let bits = if *first & 0x80 != 0 { 0x0f } else { 0x1f };
        let plain_first = if unmask {
            *first ^ (mask[0] & bits)
        } else {
            *first
        };
        let pn_len = usize::from(plain_first & 0x03) + 1;
        if pn.len() < pn_len {
            return Err(rustls::Error::General("packet number cut short".into()));
        }
        *first ^= mask[0] & bits;
        for (b, m) in pn[..pn_len].iter_mut().zip(&mask[1..]) {
            *b ^= m;
        }
        Ok(())
    }
}

impl rq::HeaderProtectionKey for HeaderKey {
    fn encrypt_in_place(
        &self,
        sample: &[u8],
        first: &mut u8,
        packet_number: &mut [u8],
    ) -> Result<(), rustls::Error> {
        self.xor(sample, first, packet_number, false)
    }

    fn decrypt_in_place(
        &self,
        sample: &[u8],
        first: &mut u8,
        packet_number: &mut [u8],
    ) -> Result<(), rustls::Error> {
        self.xor(sample, first, packet_number, true)
    }

    fn sample_len(&self) -> usize {
        self.0.algorithm().sample_len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::VERSION_1;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The client's Initial secret of `dcid` under `salt` (RFC 9001 §5.2).
    fn client_initial_secret(salt: &[u8], dcid: &[u8]) -> Vec<u8> {
        let suite = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
            .tls13()
            .unwrap();
        let initial = suite.hkdf_provider.extract_from_secret(Some(salt), dcid);
        let mut out = vec![0u8; 32];
        let label = b"tls13 client in";
        initial
            .expand_slice(&[&[0, 32], &[label.len() as u8], label, &[0]], &mut out)
            .unwrap();
        out
    }

    /// Keys derived here from a client's Initial secret protect a packet byte for byte as
    /// rustls's Initial keys of the same version do (version 1's labels and version 2's),
    /// header protection included; the secret itself is RFC 9001 Appendix A's.
    #[test]
    fn keys_match_rustls_initial_keys_in_both_versions() {
        let dcid = hex("8394c8f03e515708");
        let v1_salt = hex("38762cf7f55934b34d179ae6a4c80cadccbb7f0a");
        let v2_salt = hex("0dede3def700a6db819381be6e269dcbf9bd2ed9");
        assert_eq!(
            client_initial_secret(&v1_salt, &dcid),
            hex("c00cf151ca5be075ed0ebfb5c80323c42d6b7db67881289af4008f1f6c357aea")
        );
        let suite = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
            .tls13()
            .unwrap();
        for (version, salt) in [(VERSION_1, v1_salt), (VERSION_2, v2_salt)] {
            let secret = client_initial_secret(&salt, &dcid);
            let ours = VersionKeys::new(suite, version)
                .unwrap()
                .directional(&secret);
            let theirs = super::super::initial_keys(&dcid, Side::Client, version).local;
            let header = [
                0xc3u8, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0x44, 0x9e, 0, 0, 0, 2,
            ];
            let mut a = *b"a payload of a few bytes, padded";
            let mut b = a;
            let ta = ours.packet.encrypt_in_place(2, &header, &mut a).unwrap();
            let tb = theirs.packet.encrypt_in_place(2, &header, &mut b).unwrap();
            assert_eq!((a, ta.as_ref()), (b, tb.as_ref()), "version {version:#x}");
            let mut back = a.to_vec();
            back.extend_from_slice(ta.as_ref());
            let plain = ours.packet.decrypt_in_place(2, &header, &mut back).unwrap();
            assert_eq!(plain, b"a payload of a few bytes, padded");
            let (mut fa, mut pa, mut fb, mut pb) = (0xc3u8, [0, 0, 0, 2], 0xc3u8, [0, 0, 0, 2]);
            ours.header
                .encrypt_in_place(&a[..16], &mut fa, &mut pa)
                .unwrap();
            theirs
                .header
                .encrypt_in_place(&a[..16], &mut fb, &mut pb)
                .unwrap();
            assert_eq!((fa, pa), (fb, pb), "version {version:#x}");
            ours.header
                .decrypt_in_place(&a[..16], &mut fa, &mut pa)
                .unwrap();
            assert_eq!((fa, pa), (0xc3, [0, 0, 0, 2]));
        }
    }

    /// A key update derives the next generation with the version's "ku" label: our two
    /// ends agree, and version 2's keys differ from version 1's.
    #[test]
    fn generations_agree_between_ends_and_differ_between_versions() {
        use rustls::crypto::ring::cipher_suite as cs;
        for s in [
            cs::TLS13_AES_128_GCM_SHA256,
            cs::TLS13_AES_256_GCM_SHA384,
            cs::TLS13_CHACHA20_POLY1305_SHA256,
        ] {
            let suite = s.tls13().unwrap();
            let len = suite.common.hash_provider.output_len();
            let (c, sv) = (vec![1u8; len], vec![2u8; len]);
            let k2 = VersionKeys::new(suite, VERSION_2).unwrap();
            let k1 = VersionKeys::new(suite, VERSION_1).unwrap();
            let mut client = Generations::after(k2, Side::Client, &c, &sv);
            let mut server = Generations::after(k2, Side::Server, &c, &sv);
            let mut v1 = Generations::after(k1, Side::Client, &c, &sv);
            for pn in 0..3u64 {
                let (kc, ks, k1) = (
                    client.next_packet_keys(),
                    server.next_packet_keys(),
                    v1.next_packet_keys(),
                );
                let mut p = *b"one packet";
                let tag = kc
                    .local
                    .encrypt_in_place_for_path(1, pn, b"h", &mut p)
                    .unwrap();
                let mut sealed = p.to_vec();
                sealed.extend_from_slice(tag.as_ref());
                let mut copy = sealed.clone();
                assert!(
                    k1.remote
                        .decrypt_in_place_for_path(1, pn, b"h", &mut copy)
                        .is_err()
                );
                assert!(
                    ks.remote
                        .decrypt_in_place(pn, b"h", &mut sealed.clone())
                        .is_err()
                );
                let plain = ks
                    .remote
                    .decrypt_in_place_for_path(1, pn, b"h", &mut sealed);
                assert_eq!(plain.unwrap(), b"one packet");
            }
        }
    }
}
