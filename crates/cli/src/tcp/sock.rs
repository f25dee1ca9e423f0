//! Kernel TCP socket options: the congestion control (TCP_CONGESTION) and the connection's
//! counters (TCP_INFO).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

use anyhow::{Result, bail};

/// Where Linux lists the congestion controls it can use.
const AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
/// Where Linux lists those an unprivileged process may choose.
const ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// A kernel TCP congestion control, by the name Linux gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TcpCc {
    Cubic,
    Bbr,
    Reno,
}

impl TcpCc {
    pub(crate) fn name(self) -> &'static str {
        match self {
            TcpCc::Cubic => "cubic",
            TcpCc::Bbr => "bbr",
            TcpCc::Reno => "reno",
        }
    }
}

/// Sets the socket's congestion control; the error names what the kernel offers.
pub(crate) fn set_congestion(fd: BorrowedFd<'_>, name: &str) -> Result<()> {
    // SAFETY: the option value is `name`'s bytes with their length; the descriptor is open.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    let list = |path: &str| {
        std::fs::read_to_string(path)
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(", "))
            .unwrap_or_else(|e| format!("unknown ({path}: {e})"))
    };
    let extra = if err.raw_os_error() == Some(libc::EPERM) {
        format!("; without CAP_NET_ADMIN only {} ({ALLOWED})", list(ALLOWED))
    } else {
        String::new()
    };
    bail!(
        "the kernel refuses TCP congestion control {name} ({err}): it offers {} ({AVAILABLE}){extra}; \
         load the module (modprobe tcp_{name}) or pick another --tcp-cc",
        list(AVAILABLE)
    )
}

/// The socket's congestion control as the kernel reports it.
pub(crate) fn congestion(fd: BorrowedFd<'_>) -> io::Result<String> {
    // TCP_CA_NAME_MAX is 16.
    let mut name = [0u8; 16];
    let mut len = name.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `name` and updates `len`.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let name = &name[..(len as usize).min(name.len())];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

/// A TCP connection's counters (TCP_INFO) and congestion control, as one socket sees them:
/// a sender's retransmissions and RTT are its own, so for a download the server's count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TcpInfo {
    /// The congestion control, read back with TCP_CONGESTION.
    pub congestion: String,
    /// Segments this socket retransmitted over the connection's life (`tcpi_total_retrans`).
    pub total_retrans: u32,
    /// Smoothed RTT (`tcpi_rtt`).
    pub srtt: Duration,
    /// RTT variation (`tcpi_rttvar`).
    pub rttvar: Duration,
    /// Smallest RTT seen (`tcpi_min_rtt`).
    pub min_rtt: Duration,
    /// Congestion window in segments (`tcpi_snd_cwnd`).
    pub snd_cwnd: u32,
    /// Bytes sent, retransmissions included (`tcpi_bytes_sent`).
    pub bytes_sent: u64,
    /// Bytes retransmitted (`tcpi_bytes_retrans`).
    pub bytes_retrans: u64,
    /// Bytes received in order (`tcpi_bytes_received`).
    pub bytes_received: u64,
}

/// Reads the socket's TCP_INFO and congestion control.
pub(crate) fn tcp_info(fd: BorrowedFd<'_>) -> io::Result<TcpInfo> {
    // SAFETY: tcp_info is plain integers, for which all zeros is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `info` (fewer on older kernels,
    // leaving the rest zero) and updates `len`.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let us = |v: u32| Duration::from_micros(u64::from(v));
    Ok(TcpInfo {
        congestion: congestion(fd)?,
        total_retrans: info.tcpi_total_retrans,
        srtt: us(info.tcpi_rtt),
        rttvar: us(info.tcpi_rttvar),
        min_rtt: us(info.tcpi_min_rtt),
        snd_cwnd: info.tcpi_snd_cwnd,
        bytes_sent: info.tcpi_bytes_sent,
        bytes_retrans: info.tcpi_bytes_retrans,
        bytes_received: info.tcpi_bytes_received,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn congestion_control_is_set_and_read_back() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        set_congestion(listener.as_fd(), "reno").unwrap();
        assert_eq!(congestion(listener.as_fd()).unwrap(), "reno");
        let info = tcp_info(listener.as_fd()).unwrap();
        assert_eq!(info.congestion, "reno");
        assert_eq!(info.total_retrans, 0);
    }

    #[test]
    fn a_refused_congestion_control_names_what_the_kernel_offers() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let err = set_congestion(listener.as_fd(), "no-such-cc")
            .unwrap_err()
            .to_string();
        assert!(err.contains(AVAILABLE), "{err}");
        assert!(err.contains("no-such-cc"), "{err}");
        assert!(!err.contains('\n'), "{err}");
        let offered = std::fs::read_to_string(AVAILABLE).unwrap();
        for name in offered.split_whitespace() {
            assert!(err.contains(name), "{err} lacks {name}");
        }
    }
}
