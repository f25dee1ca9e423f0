//! Helpers of the peers' loopback tests (quinn-peer's here, noq-peer's through `#[path]`):
//! a server on an ephemeral loopback port, scratch directories, file contents, SHA-256.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Lines};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};

pub struct Server {
    child: Child,
    pub addr: String,
    /// Kept open so that the server can still write to its standard error.
    _stderr: Lines<BufReader<ChildStderr>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `peer server --listen 127.0.0.1:0 --root ROOT EXTRA...`, once it says where it listens.
pub fn start(peer: &str, root: &Path, extra: &[&str]) -> Server {
    let mut child = Command::new(peer)
        .args(["server", "--listen", "127.0.0.1:0", "--root"])
        .arg(root)
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().expect("the server exited").unwrap();
    let addr = first
        .split("listening on ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("unexpected first line: {first}"))
        .to_string();
    Server {
        child,
        addr,
        _stderr: lines,
    }
}

/// A fresh directory for test `name` of `peer`.
pub fn scratch(peer: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("{peer}-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[i % 4] ^ seed)
        .collect()
}

pub fn sha256(data: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, data)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
