//! A minimal HTTP/3 server on qfec: serves a directory over HTTP/3 (and hq-interop) with a
//! self-signed certificate, a line per request.
//!
//! `cargo run --release -p qfec-http --example h3_server -- DIR [ADDR]`
//! then `cargo run --release -p qfec-http --example h3_client -- https://127.0.0.1:4433/FILE`.

use std::rc::Rc;
use std::sync::Arc;

use qfec_http::Server;
use qfec_http::content::Files;
use qfec_http::h3::ALPN_H3;
use qfec_http::hq::ALPN_HQ;
use qfec_io::{Driver, os_secrets};
use qfec_proto::{Endpoint, EndpointConfig, ServerConfig, ServerCryptoConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let root = args.next().ok_or("usage: h3_server DIR [ADDR]")?;
    let addr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:4433".into())
        .parse()?;
    // A certificate for localhost; a real server loads its own chain and key.
    let (chain, key) = qfec_proto::self_signed_certificate(&["localhost"])?;
    let crypto = ServerCryptoConfig::new(chain, key, &[ALPN_H3, ALPN_HQ])?;
    // Connection IDs and token keys from the operating system's random source.
    let endpoint = Endpoint::with_secrets(
        Arc::new(EndpointConfig::default()),
        Some(Arc::new(ServerConfig::new(crypto))),
        os_secrets()?,
    );
    let files = Files::new(root.as_ref())?;
    // The application is single-threaded (Rc): a current-thread runtime drives it.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut driver = Driver::bind(addr, endpoint)?;
        eprintln!("listening on {}", driver.local_addr()?);
        let mut server = Server::new(Rc::new(files)).on_request(|peer, r| {
            eprintln!("{peer} {} {} {} {} B", r.method, r.path, r.status, r.bytes);
        });
        driver.run(&mut server).await?;
        Ok(())
    })
}
