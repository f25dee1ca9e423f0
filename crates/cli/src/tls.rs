//! Certificates and keys for the CLI: PEM files, or a fresh self-signed certificate.

use std::path::Path;

use anyhow::{Context, Result, bail};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let data = std::fs::read(path)
        .with_context(|| format!("cannot read certificate file {}", path.display()))?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut data.as_slice())
        .collect::<Result<_, _>>()
        .with_context(|| format!("{} is not a PEM certificate file", path.display()))?;
    if certs.is_empty() {
        bail!(
            "{} holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)",
            path.display()
        );
    }
    Ok(certs)
}

pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>> {
    let data =
        std::fs::read(path).with_context(|| format!("cannot read key file {}", path.display()))?;
    rustls_pemfile::private_key(&mut data.as_slice())
        .with_context(|| format!("{} is not a PEM key file", path.display()))?
        .with_context(|| {
            format!(
                "{} holds no private key (expected PKCS#8, PKCS#1 or SEC1 PEM)",
                path.display()
            )
        })
}

pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, cert.as_ref());
    d.as_ref()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A fresh self-signed certificate for `names` (DNS names or IP addresses): the DER chain,
/// its key, and the certificate as PEM for clients to trust.
pub fn self_signed(
    names: &[&str],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>, String)> {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let ck = rcgen::generate_simple_self_signed(names).context("cannot make a certificate")?;
    let key = PrivateKeyDer::Pkcs8(ck.key_pair.serialize_der().into());
    Ok((vec![ck.cert.der().clone()], key, ck.cert.pem()))
}
