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
    use super::owner_pid;

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
