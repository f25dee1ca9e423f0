//! `qfec server --tcp` and `qfec client --tcp` end to end over loopback: HTTP/2 over TLS 1.3
//! (or 1.2 with `--tls12`) on kernel TCP moves files identical by hash with the congestion
//! control asked for, refuses what the hq server refuses, and QUIC-only options are rejected.

use std::process::Command;

use sha2::{Digest, Sha256};

mod common;

use common::{QFEC, file_bytes, one_line_error, start_server_env, succeeded, temp_dir};

fn hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Two files over one connection with `cc` on both ends (the kernel's default when `None`),
/// intact by hash; both ends must report `expect`, read back from their sockets. With
/// `tls12` the client offers only TLS 1.2 (and checks the server's certificate with it).
fn transfer(name: &str, cc: Option<&str>, expect: &str, tls12: bool) {
    let root = temp_dir(&format!("tcp-root-{name}"));
    let out = temp_dir(&format!("tcp-out-{name}"));
    let big = file_bytes(3_000_000, 7);
    let small = file_bytes(100_000, 8);
    std::fs::write(root.join("big.bin"), &big).unwrap();
    std::fs::write(root.join("small.bin"), &small).unwrap();
    let pem = out.join("cert.pem");
    let pem_arg = pem.to_str().unwrap();
    let mut server_args = vec!["--tcp", "--cert-out", pem_arg];
    let mut client_cc = Vec::new();
    if tls12 {
        client_cc.push("--tls12");
    }
    if let Some(cc) = cc {
        server_args.extend(["--tcp-cc", cc]);
        client_cc.extend(["--tcp-cc", cc]);
    }
    let server = start_server_env(&root, &server_args, &[("QFEC_LOG", "info")]);
    let listening = server.wait_for_log("listening on");
    assert!(
        listening.contains(&format!(
            "(TCP, HTTP/2 over TLS 1.3 or 1.2, congestion control {expect})"
        )),
        "{listening}"
    );
    let url = |p: &str| format!("https://{}/{p}", server.addr);
    let o = Command::new(QFEC)
        .args([
            "client",
            "--tcp",
            "--sha256",
            "--ca",
            pem_arg,
            "--timeout",
            "30",
        ])
        .args(&client_cc)
        .arg("-o")
        .arg(out.join("files"))
        .args([url("big.bin"), url("small.bin")])
        .output()
        .unwrap();
    let stdout = succeeded(&o);
    for (file, data) in [("big.bin", &big), ("small.bin", &small)] {
        let got = std::fs::read(out.join("files").join(file)).unwrap();
        assert_eq!(hex(&got), hex(data), "{file}");
        assert!(
            stdout.contains(&format!("/{file}  {} bytes", data.len())),
            "{stdout}"
        );
        assert!(
            stdout.contains(&hex(data)),
            "the report has {file}'s SHA-256"
        );
    }
    assert!(stdout.contains("2 of 2 files"), "{stdout}");
    let version = if tls12 { "TLS 1.2" } else { "TLS 1.3" };
    assert!(
        stdout.contains(&format!("(TCP and {version}), 2 of 2 files")),
        "{stdout}"
    );
    // Both ends read their socket's congestion control back from the kernel.
    assert!(
        stdout.contains(&format!("tcp: congestion control {expect},")),
        "{stdout}"
    );
    let accepted = server.wait_for_log(&format!("congestion control {expect}, "));
    assert!(accepted.contains("closed:"), "{accepted}");
    let accepted = server.wait_for_log("tcp connection from 127.0.0.1:");
    assert!(
        accepted.ends_with(&format!("congestion control {expect}")),
        "{accepted}"
    );
}

#[test]
fn tcp_moves_files_intact_with_cubic() {
    transfer("cubic", Some("cubic"), "cubic", false);
}

#[test]
fn tcp_moves_files_intact_with_reno() {
    transfer("reno", Some("reno"), "reno", false);
}

#[test]
fn tcp_moves_files_intact_with_bbr() {
    transfer("bbr", Some("bbr"), "bbr", false);
}

#[test]
fn tcp_moves_files_intact_over_tls12() {
    transfer("tls12", Some("cubic"), "cubic", true);
}

#[test]
fn tcp_without_tcp_cc_uses_the_kernels_default() {
    let default = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
    transfer("default", None, default.trim(), false);
}

#[test]
fn tcp_missing_file_and_escaping_paths_fail_cleanly() {
    let dir = temp_dir("tcp-escape");
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.txt"), b"a").unwrap();
    // Files beside the root, which `..` would reach (two names: -o refuses two URLs that
    // would be saved under one).
    std::fs::write(dir.join("secret.txt"), b"secret").unwrap();
    std::fs::write(dir.join("secret2.txt"), b"secret").unwrap();
    let out = dir.join("out");
    let server = start_server_env(&root, &["--tcp"], &[]);
    let url = |p: &str| format!("https://{}/{p}", server.addr);
    let o = Command::new(QFEC)
        .args(["client", "--tcp", "--insecure", "--timeout", "10", "-o"])
        .arg(&out)
        .args([
            url("a.txt"),
            url("missing"),
            url("../secret.txt"),
            url("sub/../../secret2.txt"),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("/missing  failed: not found (HTTP 404)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("/../secret.txt  failed: not found (HTTP 404)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("/sub/../../secret2.txt  failed: not found (HTTP 404)"),
        "{stdout}"
    );
    assert!(stdout.contains("1 of 4 files"), "{stdout}");
    assert_eq!(std::fs::read(out.join("a.txt")).unwrap(), b"a");
    // Failed downloads leave no file behind.
    assert!(!out.join("missing").exists());
    assert!(!out.join("secret.txt").exists());
    assert!(!out.join("secret2.txt").exists());
}

#[test]
fn tcp_rejects_quic_only_options() {
    let url = "https://127.0.0.1:9/x";
    one_line_error(
        &["client", "--tcp", "--insecure", "--fec", "rlc", url],
        "'--tcp' cannot be used with '--fec <FEC>'",
    );
    one_line_error(
        &["client", "--tcp", "--insecure", "--cc", "bbr", url],
        "cannot be used with",
    );
    one_line_error(
        &["client", "--tcp", "--insecure", "--seed", "1", url],
        "cannot be used with",
    );
    one_line_error(
        &["server", "--tcp", "--root", ".", "--early-data"],
        "cannot be used with '--early-data'",
    );
    one_line_error(
        &["server", "--tcp", "--root", ".", "--retry"],
        "cannot be used with '--retry'",
    );
    one_line_error(
        &["client", "--tcp-cc", "bbr", "--insecure", url],
        "the following required arguments were not provided",
    );
    one_line_error(
        &["client", "--tcp", "--tcp-cc", "vegas", "--insecure", url],
        "[possible values: cubic, bbr, reno]",
    );
    one_line_error(&["client", "--tcp", url], "--insecure");
}

/// A port with nothing behind it, and a TCP listener that never speaks TLS.
#[test]
fn tcp_client_failures_say_what_is_wrong() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let url = format!("https://127.0.0.1:{port}/x");
    one_line_error(
        &["client", "--tcp", "--insecure", &url],
        "refused the connection: no TCP server listens there",
    );
    // The kernel completes the TCP handshake from the backlog; nobody answers TLS.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}/x", silent.local_addr().unwrap());
    let o = Command::new(QFEC)
        .args(["client", "--tcp", "--insecure", "--timeout", "1", &url])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no TLS answer from"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

/// The QUIC client's certificate checks hold over TCP too.
#[test]
fn tcp_client_checks_the_certificate() {
    let root = temp_dir("tcp-cert-root");
    std::fs::write(root.join("a.txt"), b"a").unwrap();
    let pem = root.join("cert.pem");
    let server = start_server_env(&root, &["--tcp", "--cert-out", pem.to_str().unwrap()], &[]);
    let url = format!("https://{}/a.txt", server.addr);
    let o = Command::new(QFEC)
        .args(["client", "--tcp", "--ca"])
        .arg(&pem)
        .args(["--server-name", "example.com", &url])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the certificate does not hold the name \"example.com\""),
        "{stderr}"
    );
    // Another server's certificate is not this one's.
    let other = temp_dir("tcp-cert-other");
    let other_pem = other.join("cert.pem");
    let _other = start_server_env(
        &other,
        &["--tcp", "--cert-out", other_pem.to_str().unwrap()],
        &[],
    );
    let o = Command::new(QFEC)
        .args(["client", "--tcp", "--ca"])
        .arg(&other_pem)
        .arg(&url)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("neither the one given with --ca"),
        "{stderr}"
    );
}
