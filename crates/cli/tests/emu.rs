//! `qfec emu` end to end: QUIC and TCP downloads between two namespaces over an emulated
//! lossy link arrive identical by hash; bad input gets a one-line error.

use std::process::Command;

use sha2::{Digest, Sha256};

mod common;

use common::{QFEC, emulation_available, file_bytes, one_line_error, temp_dir};

/// Downloads a 1 MB file through `qfec emu --preset interop --loss 1%` from `qfec server
/// FLAGS` with `qfec client FLAGS`, checks it by SHA-256 and that the link carried it, and
/// returns the client's report and the emulator's.
fn download_through_the_emulator(flags: &[&str], seed: u8) -> (String, String) {
    // Tests run in parallel: each download has its own directories.
    let root = temp_dir(&format!("emu-root-{seed}"));
    let out = temp_dir(&format!("emu-out-{seed}"));
    let data = file_bytes(1_000_000, seed);
    std::fs::write(root.join("f.bin"), &data).unwrap();
    let server = format!(
        "exec {QFEC} server {} --listen $QFEC_EMU_SERVER:4433 --root {}",
        flags.join(" "),
        root.display()
    );
    let o = Command::new(QFEC)
        .args([
            "emu", "--preset", "interop", "--loss", "1%", "--server", &server,
        ])
        .args(["--", QFEC, "client"])
        .args(flags)
        .args(["--insecure", "--timeout", "30", "-o"])
        .arg(&out)
        .arg("https://10.77.0.1:4433/f.bin")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    eprintln!("{stdout}{stderr}");
    assert!(o.status.success(), "{stdout} {stderr}");
    assert_eq!(
        Sha256::digest(std::fs::read(out.join("f.bin")).unwrap()),
        Sha256::digest(&data)
    );
    assert!(stdout.contains("1 of 1 files"), "{stdout}");
    // The download crossed the link: at least the file's bytes went server -> client.
    let down = stderr
        .lines()
        .find(|l| l.contains("server -> client (down)"))
        .expect("down counters");
    let delivered: u64 = down
        .split(" delivered (")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .expect("delivered bytes");
    assert!(delivered > 1_000_000, "{down}");
    (stdout, stderr)
}

#[test]
fn quic_download_through_the_emulator_arrives_intact() {
    if !emulation_available() {
        return;
    }
    let (_, stderr) = download_through_the_emulator(&[], 3);
    // The link's counters account for what crossed it: its 1 % loss dropped packets on the
    // air (about 11 expected in both directions; none at all has a probability near 2e-5), and every
    // delivered packet has its timing measured.
    let counter = |line: &str, after: &str| -> u64 {
        line.split(after)
            .next()
            .unwrap()
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (mut delivered, mut on_air) = (0, 0);
    for dir in ["(down):", "(up):"] {
        let line = stderr
            .lines()
            .find(|l| l.contains(dir))
            .expect("link counters");
        delivered += counter(line, " delivered (");
        on_air += counter(line, " on the air");
    }
    assert!(on_air > 0, "the 1 % loss dropped nothing: {stderr}");
    let timing = stderr
        .lines()
        .find_map(|l| l.split("timing error (write time - due time) over ").nth(1))
        .expect("timing line");
    assert_eq!(counter(timing, " packets:"), delivered, "{stderr}");
}

/// The same download over kernel TCP (HTTP/2 over TLS 1.3) through the same lossy link.
#[test]
fn tcp_download_through_the_emulator_arrives_intact() {
    if !emulation_available() {
        return;
    }
    let (stdout, _) = download_through_the_emulator(&["--tcp"], 4);
    assert!(stdout.contains("tcp: congestion control "), "{stdout}");
}

#[test]
fn bad_emu_input_gets_a_one_line_error() {
    one_line_error(
        &["emu", "--", "true"],
        "give a scenario file or --preset NAME",
    );
    one_line_error(
        &["emu", "--preset", "nope", "--", "true"],
        "valid presets: wlan, 4g",
    );
    one_line_error(
        &["emu", "--preset", "wlan", "--loss", "2x", "--", "true"],
        "--loss: expected a ratio",
    );
    let dir = temp_dir("emu-scenario");
    let file = dir.join("s.toml");
    // No workload: the emulator needs none.
    let scenario = "[link.down]\ndelay = \"10ms\"\n[link.up]\ndelay = \"10ms\"\n";
    std::fs::write(&file, scenario).unwrap();
    let f = file.to_str().unwrap();
    one_line_error(&["emu", f, "--preset", "wlan", "--", "true"], "not both");
    one_line_error(
        &["emu", f, "--loss", "1%", "--", "true"],
        "--loss needs a preset in the scenario",
    );
    std::fs::write(&file, "[link.down]\ndelay = \"soon\"\n").unwrap();
    one_line_error(&["emu", f, "--", "true"], "link.down.delay");
    one_line_error(
        &[
            "emu",
            "--preset",
            "wlan",
            "--server-wait",
            "soon",
            "--",
            "true",
        ],
        "or give `listening`",
    );
}

/// The client starts once the server listens: a server that exits instead is reported, and
/// the client never runs.
#[test]
fn a_server_that_exits_before_listening_is_reported() {
    if !emulation_available() {
        return;
    }
    let marker = temp_dir("emu-no-client").join("ran");
    let touch = format!("touch {}", marker.display());
    let o = Command::new(QFEC)
        .args(["emu", "--preset", "interop", "--server", "exit 3", "--"])
        .args(["sh", "-c", &touch])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(stderr.contains("exited before"), "{stderr}");
    assert!(!marker.exists(), "the client ran");
}

/// A server that takes a while to start: the client waits for its socket, not a fixed time,
/// and its first request is answered (with a fixed wait of 300 ms it would start too early).
#[test]
fn the_client_starts_once_a_slow_server_listens() {
    if !emulation_available() {
        return;
    }
    let root = temp_dir("emu-slow-root");
    let out = temp_dir("emu-slow-out");
    let data = file_bytes(20_000, 9);
    std::fs::write(root.join("f.bin"), &data).unwrap();
    let server = format!(
        "sleep 1.5; exec {QFEC} server --listen $QFEC_EMU_SERVER:4433 --root {}",
        root.display()
    );
    let o = Command::new(QFEC)
        .args(["emu", "--preset", "interop", "--server", &server, "--"])
        .args([QFEC, "client", "--insecure", "--timeout", "1", "-o"])
        .arg(&out)
        .arg("https://10.77.0.1:4433/f.bin")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert_eq!(std::fs::read(out.join("f.bin")).unwrap(), data);
}

#[test]
fn a_scenario_without_workload_gives_the_links() {
    if !emulation_available() {
        return;
    }
    let dir = temp_dir("emu-scenario-ok");
    let file = dir.join("s.toml");
    std::fs::write(
        &file,
        "[link.down]\nrate = \"5Mbps\"\ndelay = \"10ms\"\n[link.up]\ndelay = \"10ms\"\n",
    )
    .unwrap();
    let o = Command::new(QFEC)
        .arg("emu")
        .arg(&file)
        .args(["--", "sh", "-c", "exit 3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    // The client's exit status is qfec emu's.
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("client exited with status 3"), "{stderr}");
    assert!(stderr.contains("server -> client (down)"), "{stderr}");
}

/// Without the privileges, `qfec emu` says the emulation is unavailable (the one reason
/// tests may skip), and why, before it sets anything up. Run as root, this test drops them
/// with setpriv (util-linux) for the child; otherwise this process lacks them already.
#[test]
fn without_privileges_the_emulation_is_unavailable() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut c = if root {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--",
            QFEC,
        ]);
        c
    } else {
        Command::new(QFEC)
    };
    let o = c
        .args(["emu", "--preset", "interop", "--", "true"])
        .output()
        .expect("run setpriv (util-linux)");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        stderr.contains("emulation unavailable") && stderr.contains("CAP_NET_ADMIN"),
        "{stderr}"
    );
}
