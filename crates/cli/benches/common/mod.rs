//! What the `qfec` benches share: a server child process and its memory, a timed
//! download with `qfec client`, environment knobs and medians.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

pub const QFEC: &str = env!("CARGO_BIN_EXE_qfec");

/// `name` from the environment as a number, else `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A server child process and its UDP address (read from its first output lines).
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub fn spawn(mut cmd: Command) -> Server {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start server");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = loop {
            let line = lines.next().expect("server exited").unwrap();
            if let Some(rest) = line.split("listening on ").nth(1) {
                break rest.split_whitespace().next().unwrap().parse().unwrap();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Server { child, addr }
    }

    /// `qfec server` serving `root`, or the binary named by the environment variable
    /// `bin_var` (an older build, to compare), with `extra` arguments.
    pub fn qfec(root: &std::path::Path, bin_var: &str, extra: &[&str]) -> Server {
        let bin = std::env::var(bin_var).unwrap_or_else(|_| QFEC.to_string());
        let mut cmd = Command::new(bin);
        cmd.args(["server", "--listen", "127.0.0.1:0", "--root"])
            .arg(root)
            .args(extra);
        Server::spawn(cmd)
    }

    /// Resident memory in bytes.
    pub fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("read /proc status");
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .expect("VmRSS");
        kb * 1024
    }
}

/// Goodput in Mb/s of one `qfec client` download of `url`.
pub fn download(url: &str) -> f64 {
    let o = Command::new(QFEC)
        .args(["client", "--insecure", "--timeout", "120", url])
        .output()
        .expect("run qfec client");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "download failed: {out}");
    let total = out
        .lines()
        .find(|l| l.starts_with("total "))
        .expect("total");
    total
        .split('(')
        .nth(1)
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .expect("goodput")
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
