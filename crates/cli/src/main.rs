//! The `qfec` command-line program.

mod emu;
mod fetch;
mod figure;
mod hq;
mod lab;
mod tcp;
mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "qfec",
    version,
    about = "QUIC with forward erasure correction, and a lab to measure it",
    after_help = "Logging: QFEC_LOG sets what is logged to standard error, a level or a \
                  tracing filter (QFEC_LOG=debug, QFEC_LOG=qfec_proto=trace); default: warn."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve files over QUIC: HTTP/3 (ALPN h3) or HTTP/0.9 (hq-interop, as the QUIC interop
    /// runner), as each client chooses; a line per request on standard error.
    Server(hq::ServerArgs),
    /// Fetch URLs over QUIC (HTTP/3, or hq-interop), concurrently on one connection, and
    /// report bytes, time and goodput per URL.
    Client(hq::ClientArgs),
    /// Run as an endpoint of the QUIC interop runner (ROLE, TESTCASE, REQUESTS, ... from the
    /// environment; exits 127 for test cases qfec does not support).
    Interop(hq::InteropArgs),
    /// Experiments in the deterministic virtual-time lab.
    #[command(subcommand)]
    Lab(lab::LabCommand),
    /// Run a server and a client in two network namespaces joined by an emulated link (a
    /// preset or a scenario's links, in real time), then report the link's counters and
    /// timing error. Needs root.
    Emu(Box<emu::EmuArgs>),
}

/// A reader that stops early (`qfec lab presets | head`) makes `println!` panic with a broken
/// pipe (Rust ignores SIGPIPE, and sockets need it ignored). Such a panic ends the program
/// quietly with the status a shell gives SIGPIPE (141), as other Unix tools do; every
/// other panic reports as usual.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    quiet_on_closed_stdout();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("QFEC_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal, never in a log file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Server(args) => hq::run_server(args),
        Command::Client(args) => hq::run_client(args),
        Command::Interop(args) => hq::run_interop(args),
        Command::Lab(cmd) => lab::run(cmd),
        Command::Emu(args) => emu::run(*args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("qfec: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Parses `host:port` with a message that says how to fix it.
pub fn parse_socket_addr(s: &str) -> Result<SocketAddr, String> {
    s.parse().map_err(|_| {
        format!("invalid address {s:?}: expected IP:PORT such as 127.0.0.1:4433 or [::1]:4433")
    })
}

/// A local address: IP:PORT, or an IP alone (any free port).
pub fn parse_local_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(ip) = s.parse::<std::net::IpAddr>() {
        return Ok(SocketAddr::new(ip, 0));
    }
    s.parse().map_err(|_| {
        format!("invalid address {s:?}: expected an IP (127.0.0.2) or IP:PORT (127.0.0.2:5000)")
    })
}

/// `--timeout`: seconds ("60", "0.5") or a duration with its unit ("500ms", "2min"); more
/// than zero.
pub fn parse_timeout(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let d = if t.parse::<f64>().is_ok() {
        qfec_lab::units::parse_duration(&format!("{t}s"))
    } else {
        qfec_lab::units::parse_duration(t)
    }
    .map_err(|e| format!("{e} (give seconds, e.g. 60, or a duration, e.g. 500ms)"))?;
    if d.is_zero() {
        return Err(format!(
            "{s:?} would give up before starting: give more than zero, e.g. 60 or 500ms"
        ));
    }
    Ok(d)
}

/// A duration for a person: "60 s", "0.5 s".
pub fn fmt_secs(d: std::time::Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

pub fn existing_dir(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    if p.is_dir() {
        Ok(p)
    } else {
        Err(format!("{s:?} is not a directory"))
    }
}

/// The CLI's own argument parsers (the lab's are tested in qfec-lab): whatever string a
/// user types, none panics, and a refusal is one line that says something.
#[cfg(test)]
mod parser_tests {
    use proptest::prelude::*;

    fn one_line<T>(r: Result<T, String>) -> Result<(), TestCaseError> {
        if let Err(e) = r {
            prop_assert!(!e.is_empty() && !e.contains('\n'), "{e:?}");
        }
        Ok(())
    }

    fn check(s: &str) -> Result<(), TestCaseError> {
        one_line(super::parse_timeout(s))?;
        one_line(super::parse_socket_addr(s))?;
        one_line(super::parse_local_addr(s))?;
        one_line(super::existing_dir(s))?;
        one_line(crate::hq::client::parse_seconds(s))?;
        one_line(crate::hq::client::parse_abandon(s))?;
        one_line(crate::hq::client::parse_quic_version(s))?;
        one_line(crate::hq::parse_pmtu(s))?;
        Ok(())
    }

    proptest! {
        #[test]
        fn any_string(s in ".{0,40}") {
            check(&s)?;
        }

        /// Strings that look like numbers, with units, signs, exponents and separators.
        #[test]
        fn number_like(s in "[-+]?[0-9.eE_]{0,24}(ns|us|ms|s|min|h|x)?") {
            check(&s)?;
        }
    }

    #[test]
    fn what_users_type() {
        for s in [
            "-1", "1e300", "1e20s", "NaN", "inf", "0", "0.05", "5x", "", "65536",
        ] {
            check(s).unwrap();
        }
        assert!(super::parse_timeout("0.05").is_ok());
        assert!(
            super::parse_timeout("-1")
                .unwrap_err()
                .contains("non-negative")
        );
        assert!(crate::hq::client::parse_seconds("1e300").is_err());
    }
}
