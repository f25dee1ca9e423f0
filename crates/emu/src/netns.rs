//! Named network namespaces (`ip netns`), removed when dropped.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Command, Stdio};

use crate::EmuError;

/// A network namespace created with `ip netns add` and deleted on drop.
#[derive(Debug)]
pub struct NetNs {
    name: String,
}

impl NetNs {
    /// Create the namespace `name` and bring its loopback up.
    pub(crate) fn create(name: &str) -> Result<NetNs, EmuError> {
        ip(&["netns", "add", name])?;
        // From here on, Drop deletes it if a later step fails.
        let ns = NetNs {
            name: name.to_string(),
        };
        ns.ip(&["link", "set", "dev", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Run `ip ARGS` inside this namespace.
    pub(crate) fn ip(&self, args: &[&str]) -> Result<(), EmuError> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// A command that runs `program args..` inside this namespace (`ip netns exec`).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Move the calling thread into this namespace: sockets it creates afterwards live
    /// here. Only for threads made for the purpose (a pooled thread would stay in it).
    pub fn enter_current_thread(&self) -> Result<(), EmuError> {
        let path = format!("/run/netns/{}", self.name);
        let file = std::fs::File::open(&path)
            .map_err(|e| EmuError::Setup(format!("cannot open {path}: {e}")))?;
        let fd: OwnedFd = file.into();
        // SAFETY: setns on a namespace file descriptor we hold; it changes only this thread.
        if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(EmuError::Setup(format!(
                "setns into {}: {}",
                self.name,
                io::Error::last_os_error()
            )));
        }
        Ok(())
    }
}

impl NetNs {
    /// Runs `f` on a new thread inside this namespace and returns its result. Sockets `f`
    /// creates stay in this namespace wherever they are used afterwards.
    pub fn within<T: Send>(&self, f: impl FnOnce() -> T + Send) -> Result<T, EmuError> {
        std::thread::scope(|s| {
            s.spawn(|| {
                self.enter_current_thread()?;
                Ok(f())
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }
}

/// What listens in a namespace: bound UDP ports and TCP ports in LISTEN (IPv4 and IPv6).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listening {
    pub udp: Vec<u16>,
    pub tcp: Vec<u16>,
}

impl Listening {
    pub fn is_empty(&self) -> bool {
        self.udp.is_empty() && self.tcp.is_empty()
    }
}

/// The local ports of a `/proc/net/{udp,tcp}[6]` table, of sockets in `state` if given (hex,
/// "0A" is TCP LISTEN).
fn ports(table: &str, state: Option<&str>) -> Vec<u16> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let local = f.nth(1)?;
            let st = f.nth(1)?;
            if state.is_some_and(|want| want != st) {
                return None;
            }
            u16::from_str_radix(local.rsplit(':').next()?, 16).ok()
        })
        .collect()
}

impl NetNs {
    /// The sockets that listen in this namespace now.
    pub fn listening(&self) -> Result<Listening, EmuError> {
        self.within(|| {
            let read = |name: &str| {
                let path = format!("/proc/thread-self/net/{name}");
                std::fs::read_to_string(&path)
                    .map_err(|e| EmuError::Io("reading the socket table", e))
            };
            let mut l = Listening::default();
            for t in ["udp", "udp6"] {
                l.udp.extend(ports(&read(t)?, None));
            }
            for t in ["tcp", "tcp6"] {
                l.tcp.extend(ports(&read(t)?, Some("0A")));
            }
            l.udp.sort_unstable();
            l.udp.dedup();
            l.tcp.sort_unstable();
            l.tcp.dedup();
            Ok(l)
        })?
    }

    /// Waits until `ready` holds of what listens in this namespace (checked every 5 ms), for
    /// at most `timeout`; `alive` is asked in between and ends the wait with an error when the
    /// program that should listen is gone. Readiness, instead of a sleep that a slow start
    /// outlasts.
    pub fn wait_listening(
        &self,
        timeout: std::time::Duration,
        mut ready: impl FnMut(&Listening) -> bool,
        mut alive: impl FnMut() -> bool,
    ) -> Result<Listening, EmuError> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let l = self.listening()?;
            if ready(&l) {
                return Ok(l);
            }
            if !alive() {
                return Err(EmuError::Setup(format!(
                    "the program in namespace {} exited before it listened",
                    self.name
                )));
            }
            if std::time::Instant::now() >= deadline {
                return Err(EmuError::Setup(format!(
                    "nothing listened in namespace {} within {timeout:?} (listening: {l:?})",
                    self.name
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        // Nothing to report to: a namespace left behind shows in `ip netns list`.
        let _ = ip(&["netns", "delete", &self.name]);
    }
}

/// Delete the namespaces an emulator process left behind when it was killed before its
/// cleanup: those named `qfec-PID-N-l` or `-r` (as [`crate::Emulator::start`] names them)
/// whose PID no longer runs. Errors are ignored: a leftover is untidy, not harmful.
pub(crate) fn remove_stale() {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(pid) = owner_pid(name)
            && !std::path::Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = ip(&["netns", "delete", name]);
        }
    }
}

/// The PID in an emulator's namespace name, or None for any other name.
fn owner_pid(name: &str) -> Option<u32> {
    let mut parts = name.strip_prefix("qfec-")?.split('-');
    let (pid, n, side) = (parts.next()?, parts.next()?, parts.next()?);
    let ours = parts.next().is_none()
        && matches!(side, "l" | "r")
        && n.bytes().all(|b| b.is_ascii_digit())
        && !n.is_empty();
    ours.then(|| pid.parse().ok()).flatten()
}

/// Run `ip ARGS`; its stderr becomes the error.
pub(crate) fn ip(args: &[&str]) -> Result<(), EmuError> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                EmuError::Unavailable("the `ip` program (iproute2) is not installed".into())
            } else {
                EmuError::Setup(format!("cannot run ip: {e}"))
            }
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(EmuError::Setup(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::{owner_pid, ports};

    #[test]
    fn socket_tables_give_local_ports() {
        // Lines as the kernel writes them (a UDP socket on 10.77.0.1:4433, a TCP listener
        // on *:8443 and a TCP connection from port 40000).
        let udp = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
          12: 01004D0A:1151 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1 2 0000000000000000 0\n";
        assert_eq!(ports(udp, None), vec![4433]);
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
           0: 00000000:20FB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1\n\
           1: 0100007F:9C40 0100007F:20FB 01 00000000:00000000 00:00000000 00000000     0        0 2\n";
        assert_eq!(ports(tcp, Some("0A")), vec![8443]);
        assert_eq!(ports(tcp, None), vec![8443, 40000]);
        assert!(ports("header only\n", None).is_empty());
    }

    #[test]
    fn only_emulator_names_have_an_owner() {
        assert_eq!(owner_pid("qfec-1234-0-l"), Some(1234));
        assert_eq!(owner_pid("qfec-99-17-r"), Some(99));
        for other in [
            "qfec-1234-0",
            "qfec-1234-0-x",
            "qfec-abc-0-l",
            "qfec-1-2-l-extra",
            "qfec-1--l",
            "mine",
            "lab-1-0-l",
        ] {
            assert_eq!(owner_pid(other), None, "{other}");
        }
    }
}
