//! `qfec server` and `qfec client` as a user meets them: HTTP/3 by default, hq-interop on
//! request, several URLs at once, a 404 that leaves no file behind, a log line per request
//! on the server (without colour codes in a log file), and one-line errors.

mod common;

use std::process::Command;

use common::{QFEC, file_bytes, one_line_error, start_server_env, temp_dir};
use sha2::{Digest, Sha256};

#[test]
fn client_and_server_speak_http3_and_hq_interop() {
    let root = temp_dir("http-root");
    let a = file_bytes(2_000_000, 1);
    let b = file_bytes(5_000, 2);
    std::fs::write(root.join("a.bin"), &a).unwrap();
    std::fs::write(root.join("b.txt"), &b).unwrap();
    let server = start_server_env(&root, &[], &[("QFEC_LOG", "info")]);
    let url = |p: &str| format!("https://{}/{p}", server.addr);
    for alpn in [None, Some("h3"), Some("hq-interop")] {
        let out = temp_dir(&format!("http-out-{}", alpn.unwrap_or("default")));
        let o = Command::new(QFEC)
            .args(["client", "--insecure", "-o"])
            .arg(&out)
            .args(alpn.map(|a| vec!["--alpn", a]).unwrap_or_default())
            .args([url("a.bin"), url("nope.bin"), url("b.txt")])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        // One URL failed: exit status 1, and a line that says why.
        assert_eq!(o.status.code(), Some(1), "{stdout}");
        assert!(stdout.contains("2 of 3 files"), "{stdout}");
        assert!(stdout.contains("/nope.bin  failed: not found"), "{stdout}");
        assert_eq!(
            Sha256::digest(std::fs::read(out.join("a.bin")).unwrap()),
            Sha256::digest(&a)
        );
        assert_eq!(std::fs::read(out.join("b.txt")).unwrap(), b);
        // Hashing is asked for, not done by default.
        assert!(!stdout.contains("sha256"), "{stdout}");
        assert!(
            !out.join("nope.bin").exists(),
            "a failed download left a file"
        );
    }
    // --sha256: each file's line ends with its digest.
    let o = Command::new(QFEC)
        .args(["client", "--insecure", "--sha256", &url("b.txt")])
        .output()
        .unwrap();
    let sha: String = Sha256::digest(&b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("/b.txt  5000 bytes") && l.ends_with(&format!("sha256 {sha}"))),
        "{stdout}"
    );
    // A line per request: the client's address, method, path, status, bytes.
    let line = server.wait_for_log("GET /a.bin 200 2000000 B");
    assert!(line.contains("127.0.0.1:"), "{line}");
    server.wait_for_log("GET /nope.bin 404 0 B");
    // stderr is a pipe here: no colour codes, though QFEC_LOG made it log.
    let log = server.log.lock().unwrap().join("\n");
    assert!(!log.contains('\x1b'), "colour codes in a log file: {log}");
}

#[test]
fn keylog_without_sslkeylogfile_is_a_one_line_error() {
    one_line_error(
        &["client", "--insecure", "--keylog", "https://127.0.0.1:9/x"],
        "SSLKEYLOGFILE is not set",
    );
}

#[test]
fn help_names_qfec_log() {
    let o = Command::new(QFEC).arg("--help").output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("QFEC_LOG"));
}
