//! Helpers shared by the CLI's end-to-end tests: a `qfec server` child process, scratch
//! directories, checks on a command's output, and whether `qfec emu` can run here.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const QFEC: &str = env!("CARGO_BIN_EXE_qfec");

pub struct Server {
    pub child: Child,
    pub addr: String,
    /// The server's standard error lines so far.
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Waits up to 5 s for a line of the server's standard error that contains `text`.
    pub fn wait_for_log(&self, text: &str) -> String {
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(l) = self.log.lock().unwrap().iter().find(|l| l.contains(text)) {
                return l.clone();
            }
            assert!(
                Instant::now() < until,
                "the server never logged {text:?}: {:?}",
                self.log.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start_server(root: &Path, extra: &[&str]) -> Server {
    start_server_env(root, extra, &[])
}

/// `start_server` with environment variables set for the server.
pub fn start_server_env(root: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
    start_server_on("127.0.0.1:0", root, extra, env)
}

/// `qfec server --listen LISTEN --root ROOT EXTRA...`, once it says it listens.
pub fn start_server_on(listen: &str, root: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
    let mut child = Command::new(QFEC)
        .args(["server", "--listen", listen, "--root"])
        .arg(root)
        .args(extra)
        .envs(env.iter().copied())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start qfec server");
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let mut early = Vec::new();
    let addr = loop {
        let line = lines.next().expect("server exited").unwrap();
        let addr = line
            .split("listening on ")
            .nth(1)
            .map(|rest| rest.split_whitespace().next().unwrap().to_string());
        early.push(line);
        if let Some(addr) = addr {
            break addr;
        }
    };
    // Keep draining stderr so the server never blocks on a full pipe.
    let log = Arc::new(Mutex::new(early));
    let sink = log.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    Server { child, addr, log }
}

pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("qfec-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn file_bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2654435761).to_le_bytes()[i % 4] ^ seed)
        .collect()
}

/// The command's standard output, after checking that it succeeded.
pub fn succeeded(o: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
}

pub fn one_line_error(args: &[&str], expect: &str) {
    let o = Command::new(QFEC).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{args:?} should fail");
    assert!(
        err.contains(expect),
        "{args:?}: expected {expect:?} in {err:?}"
    );
}

/// Says why a test did not run, on the real standard error (the harness captures
/// `eprintln!` of passing tests, which would hide the skip). In CI (CI=true) nothing may
/// skip: the CI machine has every peer and can emulate, so a skip there is a failure.
pub fn skip(why: &str) {
    use std::io::Write;
    assert!(!in_ci(), "CI=true, and this test would skip: {why}");
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED: {why}");
}

/// Whether CI runs the tests (CI=true): there, a missing test peer is a failure, not a skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Whether this machine can emulate (root, /dev/net/tun, iproute2): a trial run of `qfec
/// emu` tells. Skips, saying why, only when qfec emu itself reports the emulation
/// unavailable (a missing capability); any other failure fails the test.
pub fn emulation_available() -> bool {
    let o = Command::new(QFEC)
        .args(["emu", "--preset", "interop", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    if o.status.success() {
        return true;
    }
    assert!(
        stderr.contains("emulation unavailable"),
        "qfec emu failed: {stderr}"
    );
    skip(stderr.trim());
    false
}

/// What a `qfec emu ...` command printed: exit success, stdout, stderr. None (with the
/// reason printed) when the machine cannot emulate.
pub fn run_emu(args: &[&str]) -> Option<(bool, String, String)> {
    let o = Command::new(QFEC).args(args).output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    if stderr.contains("emulation unavailable") {
        skip(stderr.trim());
        return None;
    }
    eprintln!("{stdout}{stderr}");
    Some((o.status.success(), stdout, stderr))
}
