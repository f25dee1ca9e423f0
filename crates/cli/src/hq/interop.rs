//! `qfec interop`: the endpoint contract of the QUIC interop runner. The role and the test
//! case come from the environment (`ROLE`, `TESTCASE`, `REQUESTS`, `DOWNLOADS`, `WWW`,
//! `CERTS`, `SSLKEYLOGFILE`, `QLOGDIR`); a test case qfec cannot run exits with 127, as the
//! runner expects.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;
use qfec_proto::{ClientConfig, ClientCryptoConfig, ServerConfig, ServerCryptoConfig};

use super::{AppProtocol, FetchOptions, TransportArgs, fetch, parse_url, runtime, serve};
use crate::tls;

/// Exit code for a test case the endpoint does not implement.
const UNSUPPORTED: u8 = 127;

/// What `qfec interop --help` says after the options: the environment and the cases.
const ENVIRONMENT_HELP: &str = "\
Environment (as the QUIC interop runner sets it):
  ROLE           client or server (required)
  TESTCASE       the test case (required): handshake, transfer, retry, resumption, keyupdate,
                 chacha20, zerortt, multiconnect, http3, ecn, versionnegotiation, v2,
                 connectionmigration; any other exits 127 (unsupported)
  REQUESTS       client: the URLs to fetch, separated by spaces (required)
  DOWNLOADS      client: where the files are saved (default /downloads)
  WWW            server: the directory served (default /www)
  CERTS          server: the directory holding cert.pem and priv.key (default /certs)
  SSLKEYLOGFILE  both: write the TLS secrets there
  QLOGDIR        both: write qlog files there

Example: ROLE=client TESTCASE=transfer REQUESTS=https://127.0.0.1:4433/a.bin \
DOWNLOADS=out qfec interop";

#[derive(Args, Debug)]
#[command(after_help = ENVIRONMENT_HELP)]
pub struct InteropArgs {
    /// Address the server listens on (the runner's servers use port 443).
    #[arg(long, default_value = "[::]:443", value_parser = crate::parse_socket_addr)]
    listen: SocketAddr,
    /// How long a client waits for its downloads: seconds (60) or a duration with its
    /// unit (90s, 2min).
    #[arg(long, default_value = "60", value_parser = crate::parse_timeout)]
    timeout: std::time::Duration,
    #[command(flatten)]
    transport: TransportArgs,
}

/// The test cases, by the names the runner gives endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Handshake,
    Transfer,
    Retry,
    Resumption,
    KeyUpdate,
    ChaCha20,
    /// Like `Resumption`, the second connection's requests in 0-RTT.
    ZeroRtt,
    /// One connection per request (the runner's handshakeloss and handshakecorruption).
    MultiConnect,
    /// The transfer over HTTP/3 (ALPN h3) instead of hq-interop.
    Http3,
    /// The transfer with ECN (marked ECT(0), ACK_ECN counts), which qfec does by default:
    /// refused with `--no-ecn`.
    Ecn,
    /// The client opens with a reserved version to elicit a Version Negotiation, then goes
    /// on in version 1; a handshake is what counts (the runner requests no file). A server
    /// answers any unknown version anyway.
    VersionNegotiation,
    /// The transfer, opened in version 1 offering version 2 first; the server moves the
    /// connection to version 2 (compatible version negotiation, RFC 9368), and a client
    /// fails the case if it did not.
    V2,
    /// The transfer; the server offers a preferred address (RFC 9000 §9.6) and the client
    /// moves there once the handshake is confirmed, failing the case if it did not.
    ConnectionMigration,
}

/// Every case by its runner name (the help text lists the same names: a test checks it).
const CASES: [(&str, Case); 13] = [
    ("handshake", Case::Handshake),
    ("transfer", Case::Transfer),
    ("retry", Case::Retry),
    ("resumption", Case::Resumption),
    ("keyupdate", Case::KeyUpdate),
    ("chacha20", Case::ChaCha20),
    ("zerortt", Case::ZeroRtt),
    ("multiconnect", Case::MultiConnect),
    ("http3", Case::Http3),
    ("ecn", Case::Ecn),
    ("versionnegotiation", Case::VersionNegotiation),
    ("v2", Case::V2),
    ("connectionmigration", Case::ConnectionMigration),
];

impl Case {
    fn parse(name: &str) -> Option<Case> {
        CASES.iter().find(|(n, _)| *n == name).map(|&(_, c)| c)
    }
}

impl Case {
    /// The application protocol: HTTP/3 for `http3`, hq-interop for every other case.
    fn protocol(self) -> AppProtocol {
        match self {
            Case::Http3 => AppProtocol::H3,
            _ => AppProtocol::HqInterop,
        }
    }
}

fn env_path(name: &str, default: &str) -> PathBuf {
    std::env::var_os(name)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default))
}

pub fn run(args: InteropArgs) -> Result<ExitCode> {
    let (Ok(role), Ok(testcase)) = (std::env::var("ROLE"), std::env::var("TESTCASE")) else {
        bail!(
            "the interop endpoint's role and test case come from the environment: set ROLE \
             (client or server) and TESTCASE (e.g. transfer); see qfec interop --help"
        );
    };
    let Some(case) = Case::parse(&testcase) else {
        eprintln!("qfec interop: test case {testcase:?} is not supported");
        return Ok(ExitCode::from(UNSUPPORTED));
    };
    // QLOGDIR is honoured by the transport options (as --qlog).
    let keylog = args.transport.keylog()?;
    if case == Case::Ecn && !args.transport.transport()?.ecn {
        eprintln!("qfec interop: the ecn test case needs ECN: drop --no-ecn");
        return Ok(ExitCode::from(UNSUPPORTED));
    }
    match role.as_str() {
        "server" => server(args, case, keylog),
        "client" => client(args, case, keylog),
        other => bail!("ROLE must be client or server, not {other:?}"),
    }
}

fn server(args: InteropArgs, case: Case, keylog: bool) -> Result<ExitCode> {
    let certs = env_path("CERTS", "/certs");
    let chain = tls::load_certs(&certs.join("cert.pem"))?;
    let key = tls::load_key(&certs.join("priv.key"))?;
    let alpn = case.protocol().alpn();
    let mut crypto = ServerCryptoConfig::new(chain, key, &[alpn]).map_err(anyhow::Error::msg)?;
    if keylog {
        crypto = crypto.with_keylog();
    }
    if case == Case::ZeroRtt {
        crypto = crypto.with_early_data();
    }
    let mut server = ServerConfig::new(crypto);
    server.transport = Arc::new(args.transport.transport()?);
    server.retry = case == Case::Retry;
    if case == Case::V2 {
        server.preferred_version = Some(qfec_proto::packet::VERSION_2);
    }
    // connectionmigration: a preferred address on the next port (any free one when the
    // listening port is), for the client to move to.
    let preferred = (case == Case::ConnectionMigration).then(|| {
        let port = match args.listen.port() {
            0 => 0,
            p => p.wrapping_add(1),
        };
        SocketAddr::new(args.listen.ip(), port)
    });
    serve(
        args.listen,
        &env_path("WWW", "/www"),
        server,
        None,
        preferred,
    )
}

fn client(args: InteropArgs, case: Case, keylog: bool) -> Result<ExitCode> {
    let requests = std::env::var("REQUESTS").context("REQUESTS is not set")?;
    let urls = requests
        .split_whitespace()
        .map(parse_url)
        .collect::<Result<Vec<_>>>()?;
    if urls.is_empty() {
        bail!("REQUESTS holds no URL");
    }
    // The runner's certificates name hosts the client cannot check; every interop client
    // skips verification.
    let mut crypto = if case == Case::ChaCha20 {
        let mut provider = rustls::crypto::ring::default_provider();
        provider
            .cipher_suites
            .retain(|s| s.suite() == rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256);
        ClientCryptoConfig::insecure_with(Arc::new(provider), &[case.protocol().alpn()])
    } else {
        ClientCryptoConfig::insecure(&[case.protocol().alpn()])
    };
    if keylog {
        crypto = crypto.with_keylog();
    }
    if case == Case::ZeroRtt {
        crypto = crypto.with_early_data();
    }
    let mut config = ClientConfig::new(crypto);
    config.transport = Arc::new(args.transport.transport()?);
    config.elicit_version_negotiation = case == Case::VersionNegotiation;
    if case == Case::V2 {
        use qfec_proto::packet::{VERSION_1, VERSION_2};
        config.version = VERSION_1;
        config.offered_versions = vec![VERSION_2, VERSION_1];
    }
    let options = FetchOptions {
        output: Some(env_path("DOWNLOADS", "/downloads")),
        timeout: args.timeout,
        key_update: case == Case::KeyUpdate,
        alpn: Some(case.protocol()),
        pmtu_from_route: args.transport.pmtu_auto(),
        ..FetchOptions::default()
    };
    // Which requests go over which connection, in order.
    let groups: Vec<Vec<_>> = match case {
        Case::MultiConnect => urls.into_iter().map(|u| vec![u]).collect(),
        Case::Resumption | Case::ZeroRtt => {
            let mut rest = urls;
            let first = rest.remove(0);
            [vec![first], rest]
                .into_iter()
                .filter(|g| !g.is_empty())
                .collect()
        }
        _ => vec![urls],
    };
    let rt = runtime()?;
    let mut failed = false;
    for (i, group) in groups.into_iter().enumerate() {
        // The same TLS configuration (and so session cache) and the server's latest token
        // serve every connection: the second one of `resumption` resumes.
        let outcome = rt
            .block_on(fetch(group, config.clone(), &options))
            .inspect_err(crate::fetch::print_failed_lines)?;
        outcome.print();
        if matches!(case, Case::Resumption | Case::ZeroRtt) && i > 0 && !outcome.resumed {
            eprintln!("qfec interop: the second connection did not resume the TLS session");
            failed = true;
        }
        if case == Case::ZeroRtt && i > 0 && outcome.early_data != Some(true) {
            eprintln!("qfec interop: the server did not accept the 0-RTT requests");
            failed = true;
        }
        if case == Case::ConnectionMigration && !outcome.moved_to_preferred_address {
            eprintln!(
                "qfec interop: the connection did not move to the server's preferred address"
            );
            failed = true;
        }
        if case == Case::V2 && outcome.version != Some(qfec_proto::packet::VERSION_2) {
            eprintln!("qfec interop: the server did not move the connection to version 2");
            failed = true;
        }
        config.token = outcome.token.clone().or(config.token);
        failed |= if case == Case::VersionNegotiation {
            !outcome.established
        } else {
            outcome.failed > 0
        };
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_lists_every_case() {
        let listed: String = ENVIRONMENT_HELP
            .lines()
            .skip_while(|l| !l.starts_with("  TESTCASE"))
            .take_while(|l| !l.starts_with("  REQUESTS"))
            .collect();
        for (name, case) in CASES {
            assert!(
                listed.split([' ', ',', ':', ';']).any(|w| w == name),
                "{name} missing from the help"
            );
            assert_eq!(Case::parse(name), Some(case));
        }
        assert_eq!(Case::parse(""), None);
    }
}
