//! `quinn-peer server` and `quinn-peer client` against each other over loopback: files
//! intact by SHA-256, certificates checked with --ca, nothing served from outside the root,
//! one-line errors. (Also what makes `cargo test` build the binary for crates/cli's tests.)

mod common;

use std::process::{Command, Output};

use common::{Server, bytes, sha256};

const PEER: &str = env!("CARGO_BIN_EXE_quinn-peer");

fn start(root: &std::path::Path, extra: &[&str]) -> Server {
    common::start(PEER, root, extra)
}

fn scratch(name: &str) -> std::path::PathBuf {
    common::scratch("quinn-peer", name)
}

fn client(args: &[&str]) -> Output {
    Command::new(PEER)
        .arg("client")
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn concurrent_downloads_arrive_intact_and_the_certificate_is_checked() {
    let dir = scratch("intact");
    let root = dir.join("www");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    let a = bytes(3_000_000, 1);
    let b = bytes(10_000, 2);
    std::fs::write(root.join("a.bin"), &a).unwrap();
    std::fs::write(root.join("sub/b.bin"), &b).unwrap();
    std::fs::write(root.join("empty"), b"").unwrap();
    let cert = dir.join("cert.pem");
    let server = start(&root, &["--cert-out", cert.to_str().unwrap()]);
    let url = |p: &str| format!("https://{}{p}", server.addr);

    let o = client(&[
        "--ca",
        cert.to_str().unwrap(),
        &url("/a.bin"),
        &url("/sub/b.bin"),
        &url("/empty"),
    ]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}{stderr}");
    for (path, data) in [
        ("/a.bin", &a[..]),
        ("/sub/b.bin", &b[..]),
        ("/empty", &[][..]),
    ] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{path}  ")))
            .unwrap_or_else(|| panic!("no line for {path}: {stdout}"));
        assert!(
            line.starts_with(&format!("{path}  {} bytes  ", data.len())),
            "{line}"
        );
        assert!(
            line.ends_with(&format!("sha256 {}", sha256(data))),
            "{line}"
        );
    }
    assert!(stdout.contains("3 of 3 files"), "{stdout}");

    // Another certificate than the server's is refused, as is no choice of trust at all.
    let other = dir.join("other.pem");
    let _second = start(&root, &["--cert-out", other.to_str().unwrap()]);
    let o = client(&["--ca", other.to_str().unwrap(), &url("/a.bin")]);
    let (stdout, stderr) = text(&o);
    assert!(!o.status.success(), "{stdout}");
    assert!(stderr.contains("cannot connect to"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let o = client(&[&url("/a.bin")]);
    let (_, stderr) = text(&o);
    assert!(!o.status.success());
    assert!(stderr.contains("pass --ca FILE"), "{stderr}");
}

#[test]
fn nothing_outside_the_root_is_served() {
    let dir = scratch("root");
    let root = dir.join("www");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("in.bin"), b"inside").unwrap();
    std::fs::write(dir.join("secret"), b"outside").unwrap();
    std::os::unix::fs::symlink(dir.join("secret"), root.join("link")).unwrap();
    let server = start(&root, &[]);
    let url = |p: &str| format!("https://{}{p}", server.addr);
    let o = client(&[
        "--insecure",
        &url("/in.bin"),
        &url("/../secret"),
        &url("/link"),
        &url("/missing"),
    ]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("/in.bin  6 bytes"), "{stdout}");
    for p in ["/../secret", "/link", "/missing"] {
        assert!(
            stdout.contains(&format!("{p}  failed: not found")),
            "{p}: {stdout}"
        );
    }
    assert!(stdout.contains("1 of 4 files"), "{stdout}");
}

#[test]
fn bad_input_gets_a_one_line_error() {
    let dir = scratch("errors");
    let missing = dir.join("none.pem");
    let missing = missing.to_str().unwrap();
    for (args, expect) in [
        (
            vec![
                "server",
                "--listen",
                "127.0.0.1:0",
                "--root",
                "/nonexistent/www",
            ],
            "cannot open --root /nonexistent/www",
        ),
        (
            vec!["client", "--insecure", "http://127.0.0.1:1/x"],
            "expected https://HOST:PORT/PATH",
        ),
        (
            vec![
                "client",
                "--insecure",
                "https://127.0.0.1:1/x",
                "https://127.0.0.2:1/y",
            ],
            "all URLs must name the same server",
        ),
        (
            vec!["client", "--ca", missing, "https://127.0.0.1:1/x"],
            "cannot read PEM certificates from --ca",
        ),
    ] {
        let o = Command::new(PEER).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    }
}
