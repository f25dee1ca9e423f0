//! TLS and transport settings of both ends: a self-signed certificate for the server, the
//! client's trust (a PEM file, or none at all), and flow-control windows. Built on rustls
//! directly rather than on qfec-proto's builders: a test peer shares no code with the stack
//! it tests.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Windows of 16 MiB per stream and 32 MiB per connection, above the bandwidth-delay product
/// of every preset and of a 1 Gb/s path with 100 ms RTT (12.5 MB), so that flow control never
/// sets the pace of a transfer (quinn's default stream window, 1.25 MB, would past 100 Mb/s
/// at 100 ms).
/// The peer binary adds its own settings (`crate::tune_transport`: noq-peer's multipath).
pub fn transport() -> Arc<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    t.stream_receive_window(quinn::VarInt::from_u32(16 << 20))
        .receive_window(quinn::VarInt::from_u32(32 << 20))
        .send_window(32 << 20);
    crate::tune_transport(&mut t);
    Arc::new(t)
}

/// A server configuration with a fresh self-signed certificate for localhost, 127.0.0.1,
/// ::1 and `listen_ip` (unless unspecified), offering the application protocol `alpn`;
/// returns it and the certificate as PEM.
pub fn server_config(listen_ip: IpAddr, alpn: &[u8]) -> Result<(quinn::ServerConfig, String)> {
    let mut names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    if !listen_ip.is_unspecified() && !listen_ip.is_loopback() {
        names.push(listen_ip.to_string());
    }
    let ck = rcgen::generate_simple_self_signed(names).context("cannot make a certificate")?;
    let key = PrivateKeyDer::Pkcs8(ck.key_pair.serialize_der().into());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(vec![ck.cert.der().clone()], key)?;
    tls.alpn_protocols = vec![alpn.to_vec()];
    let crypto = QuicServerConfig::try_from(tls)?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(transport());
    Ok((config, ck.cert.pem()))
}

/// A client configuration offering `alpn` and trusting the certificates in `ca`, or any
/// certificate when `insecure`.
pub fn client_config(
    insecure: bool,
    ca: Option<&Path>,
    alpn: &[u8],
) -> Result<quinn::ClientConfig> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?;
    let mut tls = match (insecure, ca) {
        (true, _) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider())))
            .with_no_client_auth(),
        (false, Some(ca)) => {
            let mut roots = rustls::RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(ca)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .with_context(|| {
                    format!("cannot read PEM certificates from --ca {}", ca.display())
                })?;
            if certs.is_empty() {
                bail!("--ca {} holds no PEM certificate", ca.display());
            }
            for c in certs {
                roots
                    .add(c)
                    .with_context(|| format!("--ca {}: unusable certificate", ca.display()))?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        (false, None) => bail!(
            "cannot verify the server's certificate: pass --ca FILE (e.g. written by the \
             server's --cert-out) or --insecure"
        ),
    };
    tls.alpn_protocols = vec![alpn.to_vec()];
    let crypto = QuicClientConfig::try_from(tls)?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(transport());
    Ok(config)
}

/// `--insecure`: any certificate is taken, but the handshake signature must still be valid
/// for the key it presents.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
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
            &self.0.signature_verification_algorithms,
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
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
