//! Building rustls configurations suitable for QUIC (TLS 1.3 only, ALPN required).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// TLS settings of a client: trust roots (or none, for tests) and ALPN protocols.
#[derive(Clone, Debug)]
pub struct ClientCryptoConfig {
    pub(crate) inner: Arc<rustls::ClientConfig>,
}

impl ClientCryptoConfig {
    /// Verifies the server against `roots`.
    pub fn with_roots(roots: rustls::RootCertStore, alpn: &[&[u8]]) -> Result<Self, String> {
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        cfg.enable_early_data = false;
        Ok(ClientCryptoConfig {
            inner: Arc::new(cfg),
        })
    }

    /// Trusts the given certificates: a server presenting one of them byte for byte is
    /// accepted if it holds the server name (pinning, as a self-signed certificate needs, even
    /// one marked as a CA); any other server certificate must chain to one of them as a root.
    /// A pinned certificate's dates are not checked: its exact bytes are the trust.
    pub fn trusting(certs: &[CertificateDer<'static>], alpn: &[&[u8]]) -> Result<Self, String> {
        Ok(Self::with_verifier(
            provider(),
            certificate_verifier(certs)?,
            alpn,
        ))
    }

    /// Accepts any server certificate: for labs, tests and interop runs only.
    pub fn insecure(alpn: &[&[u8]]) -> Self {
        Self::insecure_with(provider(), alpn)
    }

    /// Like `insecure`, with a chosen crypto provider (e.g. the simulator's deterministic one).
    pub fn insecure_with(provider: Arc<rustls::crypto::CryptoProvider>, alpn: &[&[u8]]) -> Self {
        Self::with_verifier(provider, Arc::new(SkipServerVerification), alpn)
    }

    /// TLS 1.3 with `verifier` judging the server's certificate.
    fn with_verifier(
        provider: Arc<rustls::crypto::CryptoProvider>,
        verifier: Arc<dyn ServerCertVerifier>,
        alpn: &[&[u8]],
    ) -> Self {
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("every rustls provider supports TLS 1.3")
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        ClientCryptoConfig {
            inner: Arc::new(cfg),
        }
    }

    /// Writes TLS secrets to the file named by SSLKEYLOGFILE.
    pub fn with_keylog(mut self) -> Self {
        let mut cfg = (*self.inner).clone();
        cfg.key_log = Arc::new(rustls::KeyLogFile::new());
        self.inner = Arc::new(cfg);
        self
    }

    /// Offers 0-RTT when resuming a session whose server allows it (RFC 9001 §4.6): the
    /// application may then send before the handshake completes. Such data can be replayed
    /// by an attacker, so only idempotent requests belong in it.
    pub fn with_early_data(mut self) -> Self {
        let mut cfg = (*self.inner).clone();
        cfg.enable_early_data = true;
        self.inner = Arc::new(cfg);
        self
    }

    pub fn from_rustls(cfg: Arc<rustls::ClientConfig>) -> Self {
        ClientCryptoConfig { inner: cfg }
    }

    /// The rustls configuration, for TLS over TCP with the same trust and ALPN.
    pub fn rustls(&self) -> Arc<rustls::ClientConfig> {
        self.inner.clone()
    }
}

/// TLS settings of a server: certificate chain, key and ALPN protocols.
#[derive(Clone, Debug)]
pub struct ServerCryptoConfig {
    pub(crate) inner: Arc<rustls::ServerConfig>,
}

impl ServerCryptoConfig {
    pub fn new(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        alpn: &[&[u8]],
    ) -> Result<Self, String> {
        Self::with_provider(provider(), chain, key, alpn, true)
    }

    /// With a chosen crypto provider; `tickets` enables session tickets for resumption.
    pub fn with_provider(
        provider: Arc<rustls::crypto::CryptoProvider>,
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        alpn: &[&[u8]],
        tickets: bool,
    ) -> Result<Self, String> {
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| format!("certificate and key do not fit: {e}"))?;
        cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        cfg.max_early_data_size = 0;
        // Session tickets let clients resume (0-RTT only with `with_early_data`).
        if !tickets {
            cfg.send_tls13_tickets = 0;
        } else if let Ok(t) = rustls::crypto::ring::Ticketer::new() {
            cfg.ticketer = t;
            cfg.send_tls13_tickets = 1;
        }
        Ok(ServerCryptoConfig {
            inner: Arc::new(cfg),
        })
    }

    pub fn with_keylog(mut self) -> Self {
        let mut cfg = (*self.inner).clone();
        cfg.key_log = Arc::new(rustls::KeyLogFile::new());
        self.inner = Arc::new(cfg);
        self
    }

    /// Accepts 0-RTT from clients resuming a session (RFC 9001 §4.6.1). Sessions are then
    /// kept in this server's memory (up to `EARLY_DATA_SESSIONS`) and each ticket resumes
    /// once, as RFC 8446 §8.1 asks: a replayed 0-RTT flight is refused by this process. Other
    /// servers sharing no cache, or a restarted one, cannot tell a replay, so enable this
    /// only for applications whose early requests are idempotent.
    pub fn with_early_data(mut self) -> Self {
        let mut cfg = (*self.inner).clone();
        cfg.max_early_data_size = u32::MAX;
        cfg.ticketer = Arc::new(SingleUseSessions);
        cfg.session_storage = rustls::server::ServerSessionMemoryCache::new(EARLY_DATA_SESSIONS);
        self.inner = Arc::new(cfg);
        self
    }

    pub fn from_rustls(cfg: Arc<rustls::ServerConfig>) -> Self {
        ServerCryptoConfig { inner: cfg }
    }

    /// The rustls configuration, for TLS over TCP with the same certificate and ALPN.
    pub fn rustls(&self) -> Arc<rustls::ServerConfig> {
        self.inner.clone()
    }
}

/// The judge of [`ClientCryptoConfig::trusting`], for other TLS clients (such as TLS over
/// TCP): `certs` pinned byte for byte, or roots a server's chain must lead to.
pub fn certificate_verifier(
    certs: &[CertificateDer<'static>],
) -> Result<Arc<dyn ServerCertVerifier>, String> {
    let mut roots = rustls::RootCertStore::empty();
    let mut pinned = Vec::new();
    for c in certs {
        rustls::server::ParsedCertificate::try_from(c)
            .map_err(|e| format!("bad certificate: {e}"))?;
        pinned.push(c.clone());
        // A certificate that cannot be a trust anchor is still trusted when pinned.
        let _ = roots.add(c.clone());
    }
    let chained = if roots.is_empty() {
        None
    } else {
        Some(
            rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots),
                provider(),
            )
            .build()
            .map_err(|e| format!("bad certificate: {e}"))?,
        )
    };
    Ok(Arc::new(TrustedCertificates { pinned, chained }))
}

/// Sessions a 0-RTT server remembers (the oldest are forgotten first).
const EARLY_DATA_SESSIONS: usize = 4096;

/// No stateless tickets: rustls then issues ticket IDs for its session cache, each usable
/// once, which 0-RTT requires.
#[derive(Debug)]
struct SingleUseSessions;

impl rustls::server::ProducesTickets for SingleUseSessions {
    fn enabled(&self) -> bool {
        false
    }

    fn lifetime(&self) -> u32 {
        0
    }

    fn encrypt(&self, _plain: &[u8]) -> Option<Vec<u8>> {
        None
    }

    fn decrypt(&self, _cipher: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

/// A fresh self-signed certificate for `names` (DER chain of one, PKCS#8 key).
pub fn self_signed_certificate(
    names: &[&str],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let ck = rcgen::generate_simple_self_signed(names).map_err(|e| e.to_string())?;
    let key = PrivateKeyDer::Pkcs8(ck.key_pair.serialize_der().into());
    Ok((vec![ck.cert.der().clone()], key))
}

/// Verifier of [`ClientCryptoConfig::trusting`]: pinned certificates, else a chain to them.
#[derive(Debug)]
struct TrustedCertificates {
    pinned: Vec<CertificateDer<'static>>,
    chained: Option<Arc<rustls::client::WebPkiServerVerifier>>,
}

impl ServerCertVerifier for TrustedCertificates {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self
            .pinned
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref())
        {
            let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
            rustls::client::verify_server_name(&cert, server_name)?;
            return Ok(ServerCertVerified::assertion());
        }
        match &self.chained {
            Some(v) => v.verify_server_cert(end_entity, intermediates, server_name, ocsp, now),
            None => Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer,
            )),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        SkipServerVerification.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        SkipServerVerification.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        SkipServerVerification.supported_verify_schemes()
    }
}

/// Certificate verifier that accepts anything (signatures are still checked for form).
#[derive(Debug)]
pub struct SkipServerVerification;

impl ServerCertVerifier for SkipServerVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &provider().signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &provider().signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
