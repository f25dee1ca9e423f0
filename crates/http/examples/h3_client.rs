//! A minimal HTTP/3 client on qfec: GETs the URLs (one server) concurrently on one
//! connection and prints each response's status and size. It does not check the server's
//! certificate: for a local test server only.
//!
//! `cargo run --release -p qfec-http --example h3_client -- https://127.0.0.1:4433/FILE ...`

use std::sync::Arc;

use qfec_http::Client;
use qfec_http::h3::ALPN_H3;
use qfec_io::{Driver, os_secrets};
use qfec_proto::{ClientConfig, ClientCryptoConfig, Endpoint, EndpointConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let urls: Vec<http::Uri> = std::env::args()
        .skip(1)
        .map(|u| u.parse())
        .collect::<Result<_, _>>()?;
    let first = urls.first().ok_or("usage: h3_client URL...")?;
    let authority = first.authority().ok_or("a URL needs a host")?.clone();
    let server = std::net::ToSocketAddrs::to_socket_addrs(&(
        authority.host(),
        authority.port_u16().unwrap_or(443),
    ))?
    .next()
    .ok_or("no address for the host")?;
    let paths: Vec<String> = urls.iter().map(|u| u.path().to_string()).collect();
    let endpoint = Endpoint::with_secrets(Arc::new(EndpointConfig::default()), None, os_secrets()?);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut driver = Driver::bind("0.0.0.0:0".parse()?, endpoint)?;
        let config = ClientConfig::new(ClientCryptoConfig::insecure(&[ALPN_H3]));
        let now = driver.now();
        let conn = driver
            .endpoint
            .connect(now, config, server, authority.host())?;
        let mut client = Client::new(conn, authority.as_str(), paths);
        driver.run(&mut client).await?;
        if let Some(e) = client.error() {
            return Err(e.into());
        }
        for (r, body) in client.responses().iter().zip(client.bodies()) {
            let status = r.status.map_or("-".into(), |s| s.to_string());
            println!("{} {status} {} bytes", r.path, body.len());
        }
        Ok(())
    })
}
