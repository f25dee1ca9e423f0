//! A TUN device (layer 3, no packet-information header) opened through `/dev/net/tun`.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::EmuError;

/// `_IOW('T', 202, int)`: not exported by the libc crate for every target.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

/// An open TUN device. The device exists while the descriptor is open (it is not made
/// persistent), so dropping this removes the interface wherever it lives by then.
#[derive(Debug)]
pub(crate) struct Tun {
    fd: OwnedFd,
    name: String,
}

impl Tun {
    /// Create the interface `name` (at most 15 bytes) in the current network namespace,
    /// non-blocking.
    pub(crate) fn create(name: &str) -> Result<Tun, EmuError> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(EmuError::Setup(format!(
                "interface name {name:?} must have 1 to 15 bytes"
            )));
        }
        // SAFETY: a NUL-terminated literal path; the flags ask for a close-on-exec fd so the
        // commands run in the namespaces do not inherit the device.
        let raw = unsafe {
            libc::open(
                c"/dev/net/tun".as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(EmuError::Setup(format!(
                "cannot open /dev/net/tun: {}",
                io::Error::last_os_error()
            )));
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ifreq is plain old data; all-zero is a valid value.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, &b) in req.ifr_name.iter_mut().zip(name.as_bytes()) {
            *dst = b as libc::c_char;
        }
        req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads and writes one ifreq, which outlives the call.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req) } < 0 {
            return Err(EmuError::Setup(format!(
                "TUNSETIFF {name}: {}",
                io::Error::last_os_error()
            )));
        }
        // The kernel may have changed the name (it does not when given one, but be exact).
        // SAFETY: the kernel NUL-terminates ifr_name.
        let actual = unsafe { CStr::from_ptr(req.ifr_name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Ok(Tun { fd, name: actual })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// One IP packet, or `Ok(None)` when none is waiting.
    pub(crate) fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            // SAFETY: `buf` is valid for `buf.len()` bytes of writes.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n >= 0 {
                return Ok(Some(n as usize));
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(None),
                _ => return Err(e),
            }
        }
    }

    /// Hand one IP packet to the kernel of the device's namespace.
    pub(crate) fn send(&self, packet: &[u8]) -> io::Result<()> {
        loop {
            // SAFETY: `packet` is valid for `packet.len()` bytes of reads.
            let n =
                unsafe { libc::write(self.fd.as_raw_fd(), packet.as_ptr().cast(), packet.len()) };
            if n >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
