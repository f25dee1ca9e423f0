//! Deterministic TLS for the simulator: the same seed must give the same bytes on the wire,
//! and TLS draws randomness for its client random, session IDs and ephemeral keys. This
//! provider takes all of it from a per-thread ChaCha20 generator that the caller seeds before
//! each run, uses X25519 key shares generated from it, and a fixed Ed25519 certificate (whose
//! signatures are deterministic). Never use it on a real network: its randomness is public.

use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rustls::crypto::{
    ActiveKeyExchange, CryptoProvider, GetRandomFailed, SecureRandom, SharedSecret,
    SupportedKxGroup,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{Error, NamedGroup};

thread_local! {
    static RNG: RefCell<ChaCha20Rng> = RefCell::new(ChaCha20Rng::seed_from_u64(0));
}

/// Seeds this thread's TLS randomness; call before creating the endpoints of a run.
pub fn seed_thread(seed: u64) {
    RNG.with(|r| *r.borrow_mut() = ChaCha20Rng::seed_from_u64(seed ^ 0x7151_c0de));
}

fn fill(buf: &mut [u8]) {
    RNG.with(|r| r.borrow_mut().fill_bytes(buf));
}

#[derive(Debug)]
struct ThreadRandom;

impl SecureRandom for ThreadRandom {
    fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
        fill(buf);
        Ok(())
    }
}

#[derive(Debug)]
struct SeededX25519;

struct X25519Exchange {
    secret: x25519_dalek::StaticSecret,
    public: [u8; 32],
}

impl SupportedKxGroup for SeededX25519 {
    fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, Error> {
        let mut bytes = [0u8; 32];
        fill(&mut bytes);
        let secret = x25519_dalek::StaticSecret::from(bytes);
        let public = x25519_dalek::PublicKey::from(&secret).to_bytes();
        Ok(Box::new(X25519Exchange { secret, public }))
    }

    fn name(&self) -> NamedGroup {
        NamedGroup::X25519
    }
}

impl ActiveKeyExchange for X25519Exchange {
    fn complete(self: Box<Self>, peer_pub_key: &[u8]) -> Result<SharedSecret, Error> {
        let peer: [u8; 32] = peer_pub_key
            .try_into()
            .map_err(|_| Error::from(rustls::PeerMisbehaved::InvalidKeyShare))?;
        let shared = self
            .secret
            .diffie_hellman(&x25519_dalek::PublicKey::from(peer));
        if !shared.was_contributory() {
            return Err(rustls::PeerMisbehaved::InvalidKeyShare.into());
        }
        Ok(SharedSecret::from(&shared.as_bytes()[..]))
    }

    fn pub_key(&self) -> &[u8] {
        &self.public
    }

    fn group(&self) -> NamedGroup {
        NamedGroup::X25519
    }
}

static SEEDED_X25519: SeededX25519 = SeededX25519;
static THREAD_RANDOM: ThreadRandom = ThreadRandom;

/// ring's ciphers with seeded randomness and key exchange.
pub fn provider() -> Arc<CryptoProvider> {
    let mut p = rustls::crypto::ring::default_provider();
    p.kx_groups = vec![&SEEDED_X25519];
    p.secure_random = &THREAD_RANDOM;
    Arc::new(p)
}

/// A fixed Ed25519 key, public on purpose: lab certificates protect nothing.
const LAB_KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEINhAJjqAMm1maoNKELdOxYSIa9pKOxmJYzIYA56UGaTT
-----END PRIVATE KEY-----
";

/// The lab's certificate for "localhost", identical in every process.
pub fn certificate() -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    static CERT: OnceLock<(CertificateDer<'static>, Vec<u8>)> = OnceLock::new();
    let (cert, key) = CERT.get_or_init(build_certificate);
    (vec![cert.clone()], PrivateKeyDer::Pkcs8(key.clone().into()))
}

/// The certificate and its PKCS#8 key, made from the fixed key and fixed parameters (rcgen's
/// default validity dates are fixed too, so nothing depends on the clock).
fn build_certificate() -> (CertificateDer<'static>, Vec<u8>) {
    let key = rcgen::KeyPair::from_pem(LAB_KEY_PEM).expect("embedded Ed25519 key");
    let mut params =
        rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("valid name");
    params.serial_number = Some(rcgen::SerialNumber::from(1u64));
    let cert = params
        .self_signed(&key)
        .expect("self-signed Ed25519 certificate");
    (cert.der().clone(), key.serialize_der())
}

/// Client TLS settings for simulated runs: deterministic, no verification, no resumption (a
/// resumed handshake would make a run depend on the runs before it).
pub fn client_config(alpn: &[&[u8]]) -> super::ClientCryptoConfig {
    let base = super::ClientCryptoConfig::insecure_with(provider(), alpn);
    let mut cfg = (*base.inner).clone();
    cfg.resumption = rustls::client::Resumption::disabled();
    super::ClientCryptoConfig::from_rustls(Arc::new(cfg))
}

/// Server TLS settings for simulated runs: the fixed certificate, no session tickets.
pub fn server_config(alpn: &[&[u8]]) -> super::ServerCryptoConfig {
    let (chain, key) = certificate();
    super::ServerCryptoConfig::with_provider(provider(), chain, key, alpn, false)
        .expect("the lab certificate fits its key")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_randomness_and_certificate() {
        seed_thread(5);
        let mut a = [0u8; 16];
        fill(&mut a);
        seed_thread(5);
        let mut b = [0u8; 16];
        fill(&mut b);
        assert_eq!(a, b);
        seed_thread(6);
        fill(&mut b);
        assert_ne!(a, b);
    }

    /// Built afresh, the certificate has the same bytes, and they are the bytes every
    /// process and machine makes (a digest taken once and written down here).
    #[test]
    fn the_certificate_is_the_same_everywhere() {
        let (a, _) = build_certificate();
        let (b, _) = build_certificate();
        assert_eq!(a, b);
        let digest = ring::digest::digest(&ring::digest::SHA256, &a);
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, CERTIFICATE_SHA256, "the lab certificate changed");
        assert_eq!(certificate().0, vec![a]);
    }

    const CERTIFICATE_SHA256: &str =
        "0117e588d971c6cdc3a3ab420c3a2ef1503f90391baeff9c73bca70cf7f27b39";

    #[test]
    fn x25519_agrees() {
        seed_thread(1);
        let a = SEEDED_X25519.start().unwrap();
        let b = SEEDED_X25519.start().unwrap();
        let (pa, pb) = (a.pub_key().to_vec(), b.pub_key().to_vec());
        let sa = a.complete(&pb).unwrap();
        let sb = b.complete(&pa).unwrap();
        assert_eq!(sa.secret_bytes(), sb.secret_bytes());
        let c = SEEDED_X25519.start().unwrap();
        assert!(c.complete(&[0u8; 32]).is_err(), "low-order point rejected");
    }

    /// Two handshakes with the same seed put the same bytes on the wire.
    #[test]
    fn handshake_bytes_repeat_with_the_seed() {
        use crate::{ClientConfig, Endpoint, EndpointConfig, Instant, ServerConfig};
        fn first_flights(seed: u64) -> (Vec<u8>, Vec<u8>) {
            seed_thread(seed);
            let sc = ServerConfig::new(server_config(&[b"t"]));
            let mut server = Endpoint::new(
                Arc::new(EndpointConfig::default()),
                Some(Arc::new(sc)),
                seed,
            );
            let mut client = Endpoint::new(Arc::new(EndpointConfig::default()), None, seed + 1);
            let cc = ClientConfig::new(client_config(&[b"t"]));
            let addr = "10.0.0.1:443".parse().unwrap();
            client
                .connect(Instant::ZERO, cc, addr, "localhost")
                .unwrap();
            let mut c1 = Vec::new();
            client.poll_transmit(Instant::ZERO, 1, &mut c1).unwrap();
            let from: std::net::SocketAddr = "10.0.0.2:5000".parse().unwrap();
            server.handle(Instant::ZERO, from, &c1);
            let mut s1 = Vec::new();
            server.poll_transmit(Instant::ZERO, 1, &mut s1).unwrap();
            (c1, s1)
        }
        assert_eq!(first_flights(3), first_flights(3));
        assert_ne!(first_flights(3).1, first_flights(4).1);
    }
}
