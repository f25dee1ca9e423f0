//! `qfec server` and `qfec client`: HTTP/0.9 over QUIC with ALPN `hq-interop`, as the QUIC
//! interop runner uses it. A request is `GET /path\r\n` on a bidirectional stream; the answer
//! is the file's bytes, then FIN.

mod client;
mod interop;
mod server;

pub use client::{ClientArgs, run_client};
pub use interop::{InteropArgs, run as run_interop};
pub use server::{ServerArgs, run_server};

use client::{FetchOptions, fetch, parse_url};
use server::serve;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use qfec_fec::FecConfig;
use qfec_proto::{
    Endpoint, EndpointConfig, RecoveredLossMode, ServerConfig, TransportConfig,
    recovery::cc::CongestionControl,
};

pub const ALPN_HQ: &[u8] = b"hq-interop";
/// Application error code for "file not found" (HTTP/0.9 has none; the interop runner uses
/// stream resets for errors).
pub(crate) const CODE_NOT_FOUND: u64 = 0x404;

/// Transport options shared by client and server.
#[derive(Args, Clone, Debug)]
pub struct TransportArgs {
    /// Congestion controller: newreno, cubic or bbr.
    #[arg(long, default_value = "cubic")]
    cc: CongestionControl,
    /// Disable pacing (send whole congestion windows in bursts).
    #[arg(long)]
    no_pacing: bool,
    /// Write TLS secrets to the file named by SSLKEYLOGFILE (for Wireshark).
    #[arg(long)]
    keylog: bool,
    /// Idle timeout in seconds.
    #[arg(long, default_value_t = 30)]
    idle_timeout: u64,
    /// FEC to send when the peer decodes it: on (= adaptive, ours), rquic, rquic(ss=off),
    /// xor, xor(K,DEPTH), rs, rs(K,M), rlc, rlc(WINDOW,INTERVAL[,REPAIRS][,gf2][,dt=N]), or none.
    #[arg(long, default_value = "none", value_parser = parse_fec)]
    fec: FecArg,
    /// How losses the peer recovered reach congestion control: signal or mask (default:
    /// mask for rquic, as paper 000 does, signal otherwise).
    #[arg(long)]
    fec_cc: Option<RecoveredLossMode>,
    /// Do not offer to decode the peer's FEC (plain QUIC unless --fec is given).
    #[arg(long)]
    no_fec_decode: bool,
}

/// A `--fec` value: `None` for "none".
#[derive(Clone, Copy, Debug)]
struct FecArg(Option<qfec_fec::Redundancy>);

fn parse_fec(s: &str) -> Result<FecArg, String> {
    qfec_fec::parse_fec(s)
        .map(FecArg)
        .map_err(|e| e.to_string())
}

impl TransportArgs {
    fn transport(&self) -> TransportConfig {
        let mut t = TransportConfig {
            congestion_controller: self.cc.factory(),
            pacing: !self.no_pacing,
            max_idle_timeout: Duration::from_secs(self.idle_timeout),
            receive_window: 16 << 20,
            stream_receive_window: 8 << 20,
            ..TransportConfig::default()
        };
        if self.fec.0.is_some() || !self.no_fec_decode {
            let mut f = FecConfig::new(self.fec.0);
            f.mode = self
                .fec_cc
                .or_else(|| self.fec.0.map(|r| r.default_mode()))
                .unwrap_or(RecoveredLossMode::Signal);
            if self.no_fec_decode {
                f.decode.clear();
            }
            f.install(&mut t);
        }
        t
    }
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start tokio")
}

/// An endpoint keyed from the OS random source, or from `seed` when one is given.
pub(crate) fn new_endpoint(
    server: Option<Arc<ServerConfig>>,
    seed: Option<u64>,
) -> Result<Endpoint> {
    let config = Arc::new(EndpointConfig::default());
    Ok(match seed {
        Some(seed) => Endpoint::new(config, server, seed),
        None => Endpoint::with_secrets(config, server, qfec_io::os_secrets()?),
    })
}
