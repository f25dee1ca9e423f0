//! quinn endpoints speaking ALPN h3 on loopback, for the interop tests and the bench: the
//! reference stack h3 runs on through `h3-quinn`.

use std::sync::Arc;

use qfec_http::h3::ALPN_H3;

/// A quinn server endpoint on an ephemeral loopback port, with a self-signed certificate
/// for localhost.
pub fn server() -> quinn::Endpoint {
    let (chain, key) = qfec_proto::self_signed_certificate(&["localhost"]).unwrap();
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    tls.alpn_protocols = vec![ALPN_H3.to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
    quinn::Endpoint::server(
        quinn::ServerConfig::with_crypto(Arc::new(crypto)),
        "127.0.0.1:0".parse().unwrap(),
    )
    .unwrap()
}

/// A quinn client endpoint that does not check the server's certificate.
pub fn client() -> quinn::Endpoint {
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .dangerous()
    .with_custom_certificate_verifier(Arc::new(qfec_proto::crypto::SkipServerVerification))
    .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN_H3.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    ep
}
