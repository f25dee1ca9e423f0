//! qfec against other QUIC stacks through `qfec emu --preset interop --loss 1%`, both ways:
//! `qfec client` downloads from the peer's server and the peer's client from `qfec server`,
//! two files at once, intact by SHA-256; with quinn (h3 over h3-quinn), quic-go and aioquic
//! also over HTTP/3 (their `--http3`), three files at once and, from the peer's server, a
//! missing one (HTTP 404).
//! quinn (`quinn-peer`, crates/peers) always runs; quic-go and aioquic (peers/) when
//! QFEC_PEERS_GO or QFEC_PEERS_AIOQUIC says where they were installed (.ci/run builds both).
//! Without them the tests say they skipped, and in CI (CI=true) they fail.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

mod common;

use common::{QFEC, emulation_available, file_bytes, skip, start_server, succeeded, temp_dir};

/// A peer that was not installed: a failure in CI, a visible skip elsewhere.
fn missing(how: &str) -> Option<Peer> {
    skip(how);
    None
}

/// A peer program: the command that starts it (its `server` and `client` subcommands
/// follow). `qfec emu` starts the client once the peer's server socket exists.
struct Peer {
    name: &'static str,
    program: Vec<PathBuf>,
}

impl Peer {
    /// `quinn-peer`, built by cargo into the directory of the `qfec` binary.
    fn quinn() -> Peer {
        let bin = Path::new(QFEC).with_file_name("quinn-peer");
        assert!(
            bin.is_file(),
            "{} is missing: build it with `cargo build -p qfec-peers` in the same profile \
             (`cargo test --workspace` builds it)",
            bin.display()
        );
        Peer {
            name: "quinn",
            program: vec![bin],
        }
    }

    /// `noq-peer` (crates/noq-peer: noq from crates.io, with multipath), built by cargo next
    /// to `qfec`.
    fn noq() -> Peer {
        let bin = Path::new(QFEC).with_file_name("noq-peer");
        assert!(
            bin.is_file(),
            "{} is missing: build it with `cargo build -p qfec-noq-peer` in the same profile \
             (`cargo test --workspace` builds it)",
            bin.display()
        );
        Peer {
            name: "noq",
            program: vec![bin],
        }
    }

    /// The quic-go peer that peers/quic-go/build.sh built, if QFEC_PEERS_GO names it.
    fn quic_go() -> Option<Peer> {
        let Some(bin) = std::env::var_os("QFEC_PEERS_GO") else {
            return missing(
                "QFEC_PEERS_GO is not set: set it to the quic-go peer built by \
                 `peers/quic-go/build.sh DIR` (DIR/quic-go-peer) to run this test",
            );
        };
        let bin = PathBuf::from(bin);
        assert!(
            bin.is_file(),
            "QFEC_PEERS_GO={}: no such file",
            bin.display()
        );
        Some(Peer {
            name: "quic-go",
            program: vec![bin],
        })
    }

    /// The aioquic peer in the venv that peers/aioquic/setup.sh made, if QFEC_PEERS_AIOQUIC
    /// names it.
    fn aioquic() -> Option<Peer> {
        let Some(venv) = std::env::var_os("QFEC_PEERS_AIOQUIC") else {
            return missing(
                "QFEC_PEERS_AIOQUIC is not set: set it to the venv made by \
                 `peers/aioquic/setup.sh DIR` (DIR) to run this test",
            );
        };
        let python = Path::new(&venv).join("bin/python");
        assert!(
            python.is_file(),
            "QFEC_PEERS_AIOQUIC={}: no bin/python there; make the venv with \
             peers/aioquic/setup.sh",
            python.display()
        );
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../peers/aioquic/peer.py");
        Some(Peer {
            name: "aioquic",
            program: vec![python, script],
        })
    }

    fn shell_words(&self) -> String {
        self.program
            .iter()
            .map(|p| format!("'{}'", p.display()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Two files, 1 MB and 200 kB, in a new root directory.
fn site(name: &str) -> (PathBuf, Vec<(&'static str, Vec<u8>)>) {
    site_with(name, &[("f.bin", 1_000_000), ("g.bin", 200_000)])
}

/// The files of the HTTP/3 tests: 3 MB, 200 kB and 1 kB.
const H3_FILES: &[(&str, usize)] = &[
    ("big.bin", 3_000_000),
    ("mid.bin", 200_000),
    ("small.bin", 1_000),
];

/// Files of the given names and sizes in a new root directory.
fn site_with(
    name: &str,
    sizes: &[(&'static str, usize)],
) -> (PathBuf, Vec<(&'static str, Vec<u8>)>) {
    let root = temp_dir(name);
    let files: Vec<_> = sizes
        .iter()
        .zip(11..)
        .map(|(&(n, len), seed)| (n, file_bytes(len, seed)))
        .collect();
    for (n, data) in &files {
        std::fs::write(root.join(n), data).unwrap();
    }
    (root, files)
}

fn urls(files: &[(&str, Vec<u8>)]) -> Vec<String> {
    files
        .iter()
        .map(|(n, _)| format!("https://10.77.0.1:4433/{n}"))
        .collect()
}

/// Runs `server` (a shell command) and `client` through the emulated interop link with 1 %
/// loss each way; returns what the client printed and its exit status (`qfec emu`'s).
fn emulate(server: &str, client: &[String]) -> std::process::Output {
    let o = Command::new(QFEC)
        .args(["emu", "--preset", "interop", "--loss", "1%", "--seed", "7"])
        .args(["--server", server, "--"])
        .args(client)
        .output()
        .unwrap();
    eprintln!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// `emulate`, checking that the client succeeded; returns its standard output.
fn through_emulator(server: &str, client: &[String]) -> String {
    let o = emulate(server, client);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{client:?} failed: {stdout} {stderr}");
    stdout.into_owned()
}

/// Checks that a client's report names each file with its size and SHA-256.
fn assert_reported(stdout: &str, files: &[(&str, Vec<u8>)], who: &str) {
    for (n, data) in files {
        let expect = format!("/{n}  {} bytes  ", data.len());
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&expect))
            .unwrap_or_else(|| panic!("no line {expect:?} from {who}: {stdout}"));
        let sha: String = Sha256::digest(data)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert!(line.ends_with(&format!("sha256 {sha}")), "{n}: {line}");
    }
}

/// `qfec client` downloads both files from the peer's server.
fn qfec_client_from(peer: &Peer) {
    qfec_client_from_with(peer, &[]);
}

/// `qfec_client_from`, with `extra` options for `qfec client`.
fn qfec_client_from_with(peer: &Peer, extra: &[&str]) -> String {
    let tag = extra.concat().replace('-', "");
    let (root, files) = site(&format!("peers-{}-server-root{tag}", peer.name));
    let out = temp_dir(&format!("peers-{}-server-out{tag}", peer.name));
    let server = format!(
        "exec {} server --listen $QFEC_EMU_SERVER:4433 --root '{}'",
        peer.shell_words(),
        root.display()
    );
    let mut client: Vec<String> = [QFEC, "client", "--insecure", "--timeout", "60", "-o"]
        .map(String::from)
        .to_vec();
    client.push(out.display().to_string());
    client.extend(extra.iter().map(|s| s.to_string()));
    client.extend(urls(&files));
    let stdout = through_emulator(&server, &client);
    assert!(stdout.contains("2 of 2 files"), "{stdout}");
    for (n, data) in &files {
        let got = std::fs::read(out.join(n)).unwrap();
        assert_eq!(got.len(), data.len(), "{n} from {}", peer.name);
        assert_eq!(Sha256::digest(&got), Sha256::digest(data), "{n}");
    }
    stdout
}

/// The peer's client downloads both files from `qfec server`; its report names each file
/// with its size and SHA-256, as qfec client's does.
fn peer_client_from_qfec(peer: &Peer) -> String {
    peer_client_from_qfec_with(peer, &[])
}

/// `peer_client_from_qfec`, with `extra` options for the peer's client.
fn peer_client_from_qfec_with(peer: &Peer, extra: &[&str]) -> String {
    peer_client_from_qfec_server_with(peer, &[], extra)
}

/// `peer_client_from_qfec_with`, with `server_extra` options for `qfec server`; returns the
/// peer's report.
fn peer_client_from_qfec_server_with(peer: &Peer, server_extra: &[&str], extra: &[&str]) -> String {
    let tag = [server_extra, extra].concat().concat().replace('-', "");
    let (root, files) = site(&format!("peers-{}-client-root{tag}", peer.name));
    let server = format!(
        "exec {QFEC} server --listen $QFEC_EMU_SERVER:4433 --root '{}' {}",
        root.display(),
        server_extra.join(" ")
    );
    let mut client: Vec<String> = peer
        .program
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    client.extend(["client".to_string(), "--insecure".to_string()]);
    client.extend(extra.iter().map(|s| s.to_string()));
    client.extend(urls(&files));
    let stdout = through_emulator(&server, &client);
    assert_reported(&stdout, &files, peer.name);
    assert!(stdout.contains("2 of 2 files"), "{stdout}");
    stdout
}

/// `qfec client`, offering h3 and hq-interop as it does by default, downloads three files at
/// once from the peer's HTTP/3 server (which offers only h3) and asks for a missing one: the
/// three arrive intact, the missing one fails with HTTP 404 (so h3 it was) and leaves no
/// file, and that failure alone makes the exit status 1.
fn qfec_client_over_http3_from(peer: &Peer) {
    let (root, files) = site_with(&format!("peers-{}-h3-server-root", peer.name), H3_FILES);
    let out = temp_dir(&format!("peers-{}-h3-server-out", peer.name));
    let server = format!(
        "exec {} server --http3 --listen $QFEC_EMU_SERVER:4433 --root '{}'",
        peer.shell_words(),
        root.display()
    );
    let mut client: Vec<String> = [
        QFEC,
        "client",
        "--insecure",
        "--sha256",
        "--timeout",
        "60",
        "-o",
    ]
    .map(String::from)
    .to_vec();
    client.push(out.display().to_string());
    client.extend(urls(&files));
    client.push("https://10.77.0.1:4433/nope.bin".to_string());
    let o = emulate(&server, &client);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    let failed: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("  failed: "))
        .collect();
    assert_eq!(
        failed,
        ["/nope.bin  failed: not found (HTTP 404)"],
        "{stdout}"
    );
    assert!(stdout.contains("3 of 4 files"), "{stdout}");
    assert_reported(&stdout, &files, "qfec client");
    for (n, data) in &files {
        let got = std::fs::read(out.join(n)).unwrap();
        assert_eq!(got.len(), data.len(), "{n} from {}", peer.name);
        assert_eq!(Sha256::digest(&got), Sha256::digest(data), "{n}");
    }
    assert!(!out.join("nope.bin").exists());
}

/// The peer's HTTP/3 client (`--http3`) downloads three files at once from `qfec server`.
fn peer_http3_client_from_qfec(peer: &Peer) {
    let (root, files) = site_with(&format!("peers-{}-h3-client-root", peer.name), H3_FILES);
    let server = format!(
        "exec {QFEC} server --listen $QFEC_EMU_SERVER:4433 --root '{}'",
        root.display()
    );
    let mut client: Vec<String> = peer
        .program
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    client.extend(["client", "--http3", "--insecure"].map(String::from));
    client.extend(urls(&files));
    let stdout = through_emulator(&server, &client);
    assert_reported(&stdout, &files, peer.name);
    assert!(stdout.contains("3 of 3 files"), "{stdout}");
}

#[test]
fn qfec_client_downloads_from_quinn_server_through_the_emulator() {
    if emulation_available() {
        qfec_client_from(&Peer::quinn());
    }
}

#[test]
fn quinn_client_downloads_from_qfec_server_through_the_emulator() {
    if emulation_available() {
        peer_client_from_qfec(&Peer::quinn());
    }
}

#[test]
fn qfec_client_downloads_from_quic_go_server_through_the_emulator() {
    if let Some(peer) = Peer::quic_go()
        && emulation_available()
    {
        qfec_client_from(&peer);
    }
}

/// QUIC version 2 (RFC 9369) against quic-go's server, which speaks it: `qfec client
/// --quic-version 2` never falls back to version 1 (a server without version 2 answers with
/// Version Negotiation and the client stops), so files that arrive came over version 2.
#[test]
fn qfec_client_downloads_over_quic_v2_from_quic_go_server_through_the_emulator() {
    if let Some(peer) = Peer::quic_go()
        && emulation_available()
    {
        qfec_client_from_with(&peer, &["--quic-version", "2"]);
    }
}

/// The same against aioquic's server (which speaks version 2 too).
#[test]
fn qfec_client_downloads_over_quic_v2_from_aioquic_server_through_the_emulator() {
    if let Some(peer) = Peer::aioquic()
        && emulation_available()
    {
        qfec_client_from_with(&peer, &["--quic-version", "2"]);
    }
}

/// Compatible version negotiation (RFC 9368) with aioquic, which implements it on both
/// ends: a qfec client opening in version 1 and preferring 2 is moved to version 2 by
/// aioquic's server (which follows the client's preference); aioquic's client opening in
/// version 1 is moved to version 2 by `qfec server`, whether the client prefers it or the
/// server does (`--prefer-version 2`). Files intact by SHA-256 each time.
#[test]
fn compatible_version_negotiation_with_aioquic_both_ways_through_the_emulator() {
    let Some(peer) = Peer::aioquic() else { return };
    if !emulation_available() {
        return;
    }
    let out = qfec_client_from_with(&peer, &["--quic-version", "1", "--prefer-version", "2"]);
    assert!(
        out.contains("QUIC version 2: the server moved the connection from version 1"),
        "{out}"
    );
    let moved = format!("QUIC version {:#x}", qfec_proto::packet::VERSION_2);
    let out = peer_client_from_qfec_with(&peer, &["--prefer-version", "2"]);
    assert!(out.contains(&moved), "{out}");
    let out = peer_client_from_qfec_server_with(&peer, &["--prefer-version", "2"], &[]);
    assert!(out.contains(&moved), "{out}");
    // Without a preference on either side, version 1 throughout.
    let out = peer_client_from_qfec(&peer);
    assert!(out.contains("QUIC version 0x1"), "{out}");
}

/// quic-go's and aioquic's clients speaking version 2 only (their `--quic-version 2`):
/// `qfec server` answers in version 2.
#[test]
fn quic_v2_clients_of_quic_go_and_aioquic_download_from_qfec_server_through_the_emulator() {
    for peer in [Peer::quic_go(), Peer::aioquic()].into_iter().flatten() {
        if emulation_available() {
            peer_client_from_qfec_with(&peer, &["--quic-version", "2"]);
        }
    }
}

#[test]
fn quic_go_client_downloads_from_qfec_server_through_the_emulator() {
    if let Some(peer) = Peer::quic_go()
        && emulation_available()
    {
        peer_client_from_qfec(&peer);
    }
}

#[test]
fn qfec_client_downloads_from_aioquic_server_through_the_emulator() {
    if let Some(peer) = Peer::aioquic()
        && emulation_available()
    {
        qfec_client_from(&peer);
    }
}

#[test]
fn aioquic_client_downloads_from_qfec_server_through_the_emulator() {
    if let Some(peer) = Peer::aioquic()
        && emulation_available()
    {
        peer_client_from_qfec(&peer);
    }
}

#[test]
fn qfec_client_downloads_over_http3_from_quinn_server_through_the_emulator() {
    if emulation_available() {
        qfec_client_over_http3_from(&Peer::quinn());
    }
}

#[test]
fn quinn_http3_client_downloads_from_qfec_server_through_the_emulator() {
    if emulation_available() {
        peer_http3_client_from_qfec(&Peer::quinn());
    }
}

#[test]
fn qfec_client_downloads_over_http3_from_quic_go_server_through_the_emulator() {
    if let Some(peer) = Peer::quic_go()
        && emulation_available()
    {
        qfec_client_over_http3_from(&peer);
    }
}

#[test]
fn quic_go_http3_client_downloads_from_qfec_server_through_the_emulator() {
    if let Some(peer) = Peer::quic_go()
        && emulation_available()
    {
        peer_http3_client_from_qfec(&peer);
    }
}

#[test]
fn qfec_client_downloads_over_http3_from_aioquic_server_through_the_emulator() {
    if let Some(peer) = Peer::aioquic()
        && emulation_available()
    {
        qfec_client_over_http3_from(&peer);
    }
}

#[test]
fn aioquic_http3_client_downloads_from_qfec_server_through_the_emulator() {
    if let Some(peer) = Peer::aioquic()
        && emulation_available()
    {
        peer_http3_client_from_qfec(&peer);
    }
}

/// Starts `peer`'s server on 127.0.0.1 (any port) with `extra` options; returns it and the
/// address it listens on.
fn peer_server_on_loopback(
    peer: &Peer,
    root: &Path,
    extra: &[&str],
) -> (std::process::Child, String) {
    let mut server = Command::new(&peer.program[0])
        .args(&peer.program[1..])
        .arg("server")
        .args(extra)
        .args(["--listen", "127.0.0.1:0", "--root"])
        .arg(root)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(server.stderr.take().unwrap()));
    let first = lines.next().unwrap().unwrap();
    let addr = first
        .split("listening on ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("{first}"))
        .to_string();
    (server, addr)
}

/// The bytes a client's `path ID ...` report line says the path received.
fn path_received(stdout: &str, id: u32) -> u64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("path {id}  ")))
        .unwrap_or_else(|| panic!("no line for path {id}: {stdout}"));
    let w: Vec<&str> = line.split_whitespace().collect();
    let i = w.iter().position(|x| *x == "received").unwrap();
    w[i + 1].parse().unwrap()
}

#[test]
fn qfec_client_downloads_from_noq_server_through_the_emulator() {
    if emulation_available() {
        qfec_client_from(&Peer::noq());
    }
}

#[test]
fn noq_client_downloads_from_qfec_server_through_the_emulator() {
    if emulation_available() {
        peer_client_from_qfec(&Peer::noq());
    }
}

/// Multipath QUIC (draft-21) with noq, both ways, over loopback: the client opens a second
/// path from 127.0.0.2, abandons path 0 after 3 MB (once path 1 is validated), and the file
/// arrives intact over the other path. qfec's client fetches 20 MB: on loopback its
/// abandonment can land as late as 5.3 MB with 7.3 MB already sent on path 0 (seen in CI with
/// 8 MB, which left path 1 under 1 MB). noq's client fetches 8 MB: with 20 MB it sometimes
/// fails on its own ("too many gaps in stream buffer": 1 run in 37 here, under load; two noq
/// peers did the same to each other, 2 runs in 10, which is why `crates/noq-peer/tests`
/// abandons no path). 30 runs of this test passed, 20 of them with both cores busy.
#[test]
fn multipath_with_noq_both_ways_survives_abandoning_a_path() {
    let noq = Peer::noq();
    let root = temp_dir("peers-noq-mp-root");
    let big = file_bytes(20_000_000, 21);
    std::fs::write(root.join("big.bin"), &big).unwrap();
    let data = file_bytes(8_000_000, 21);
    std::fs::write(root.join("f.bin"), &data).unwrap();
    let sha: String = Sha256::digest(&data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();

    // qfec client, noq server.
    let (mut server, addr) = peer_server_on_loopback(&noq, &root, &["--multipath"]);
    let out = temp_dir("peers-noq-mp-out");
    let o = Command::new(QFEC)
        .args(["client", "--insecure", "--timeout", "30", "--multipath"])
        .args(["--bind", "127.0.0.1", "--bind", "127.0.0.2"])
        .args(["--abandon-path", "0@3000000", "-o"])
        .arg(&out)
        .arg(format!("https://{addr}/big.bin"))
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let stdout = succeeded(&o);
    assert_eq!(
        Sha256::digest(std::fs::read(out.join("big.bin")).unwrap()),
        Sha256::digest(&big)
    );
    assert!(stdout.contains("path 0 abandoned after"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("path 1  127.0.0.2:") && l.contains("validated")),
        "{stdout}"
    );
    assert!(path_received(&stdout, 1) > 1_000_000, "{stdout}");

    // noq client, qfec server.
    let qfec = start_server(&root, &["--multipath"]);
    let fetch = || {
        Command::new(&noq.program[0])
            .args(["client", "--multipath", "--insecure", "--bind", "127.0.0.2"])
            .args(["--abandon-path", "0@3000000"])
            .arg(format!("https://{}/f.bin", qfec.addr))
            .output()
            .unwrap()
    };
    let mut o = fetch();
    // noq's own failure (above, and once in CI): one more try, and only for it.
    let noqs_own = |o: &std::process::Output| {
        !o.status.success()
            && [&o.stdout, &o.stderr]
                .iter()
                .any(|b| String::from_utf8_lossy(b).contains("too many gaps in stream buffer"))
    };
    if noqs_own(&o) {
        o = fetch();
    }
    let stdout = succeeded(&o);
    assert!(
        stdout.contains(&format!("/f.bin  {} bytes", data.len()))
            && stdout.contains(&format!("sha256 {sha}")),
        "{stdout}"
    );
    assert!(stdout.contains("path 1 opened from 127.0.0.2"), "{stdout}");
    assert!(stdout.contains("path 0 abandoned after"), "{stdout}");
    assert!(path_received(&stdout, 1) > 1_000_000, "{stdout}");
}

/// A missing file is a stream reset with code 0x404 both ways, which each client reports as
/// not found; over loopback.
#[test]
fn missing_files_are_not_found_between_qfec_and_quinn() {
    let quinn = Peer::quinn();
    let (root, _) = site("peers-missing-root");
    let (mut server, addr) = peer_server_on_loopback(&quinn, &root, &[]);
    let o = Command::new(QFEC)
        .args(["client", "--insecure", "--timeout", "10"])
        .arg(format!("https://{addr}/f.bin"))
        .arg(format!("https://{addr}/nope.bin"))
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success(), "{stdout}");
    assert!(stdout.contains("/nope.bin  failed: not found"), "{stdout}");
    assert!(stdout.contains("/f.bin  1000000 bytes"), "{stdout}");

    let qfec = start_server(&root, &[]);
    let o = Command::new(&quinn.program[0])
        .args(["client", "--insecure"])
        .arg(format!("https://{}/g.bin", qfec.addr))
        .arg(format!("https://{}/nope.bin", qfec.addr))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success(), "{stdout}");
    assert!(stdout.contains("/nope.bin  failed: not found"), "{stdout}");
    assert!(stdout.contains("1 of 2 files"), "{stdout}");
    let o = Command::new(&quinn.program[0])
        .args(["client", "--insecure"])
        .arg(format!("https://{}/g.bin", qfec.addr))
        .output()
        .unwrap();
    assert!(succeeded(&o).contains("/g.bin  200000 bytes"));
}
