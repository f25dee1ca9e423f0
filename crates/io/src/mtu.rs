//! What the host says of the largest datagram a path carries: the upper bound of PMTU
//! discovery ([`qfec_proto::MtuDiscoveryConfig::upper_bound`]) on real sockets.

use std::io;
use std::net::SocketAddr;

/// IPv4 and UDP headers: an IP MTU less this is the largest UDP payload.
const IPV4_UDP: u32 = 28;
/// IPv6 and UDP headers.
const IPV6_UDP: u32 = 48;

/// The largest IP packet searched for by default: a 9000-byte jumbo frame. A loopback
/// device's 65536 would give 64 KB datagrams, larger than any network path carries.
pub const JUMBO_MTU: u32 = 9000;

/// The largest UDP payload towards `remote` that the route's MTU allows (the kernel's
/// IP_MTU / IPV6_MTU of a socket connected there; nothing is sent), at most a jumbo frame.
#[cfg(target_os = "linux")]
pub fn route_max_udp_payload(remote: SocketAddr) -> io::Result<u16> {
    use std::os::fd::AsRawFd;
    let local: SocketAddr = if remote.is_ipv6() {
        "[::]:0".parse().expect("address")
    } else {
        "0.0.0.0:0".parse().expect("address")
    };
    let s = std::net::UdpSocket::bind(local)?;
    s.connect(remote)?;
    let (level, name, headers) = if remote.is_ipv6() {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU, IPV6_UDP)
    } else {
        (libc::IPPROTO_IP, libc::IP_MTU, IPV4_UDP)
    };
    let mut mtu: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: passes a live c_int and its size for the kernel to fill.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            level,
            name,
            &mut mtu as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(payload_of(mtu.max(0) as u32, headers))
}

#[cfg(not(target_os = "linux"))]
pub fn route_max_udp_payload(_remote: SocketAddr) -> io::Result<u16> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "IP_MTU is Linux's",
    ))
}

/// The largest UDP payload any of the host's interfaces that are up carries (IPv4
/// headers; at most a jumbo frame): the bound of a server, which does not know its clients'
/// routes in advance (each client's max_udp_payload_size bounds the search too).
pub fn interfaces_max_udp_payload() -> io::Result<u16> {
    let mut best = 0u32;
    for e in std::fs::read_dir("/sys/class/net")? {
        let dir = e?.path();
        let up = std::fs::read_to_string(dir.join("operstate"))
            .map(|s| s.trim() != "down")
            .unwrap_or(true);
        let mtu = std::fs::read_to_string(dir.join("mtu"))
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        if let (true, Some(m)) = (up, mtu) {
            best = best.max(m);
        }
    }
    if best == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "no network interface with an MTU in /sys/class/net",
        ));
    }
    Ok(payload_of(best, IPV4_UDP))
}

fn payload_of(ip_mtu: u32, headers: u32) -> u16 {
    (ip_mtu.min(JUMBO_MTU).saturating_sub(headers)).max(1200) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_carries_a_jumbo_frame_at_most() {
        // Loopback's MTU (65536 on Linux) is capped at a jumbo frame.
        let v4 = route_max_udp_payload("127.0.0.1:9".parse().unwrap()).unwrap();
        assert_eq!(v4, 8972);
        assert!(interfaces_max_udp_payload().unwrap() >= 1200);
        assert_eq!(payload_of(1500, IPV4_UDP), 1472);
        assert_eq!(payload_of(1280, IPV6_UDP), 1232);
        assert_eq!(payload_of(576, IPV4_UDP), 1200);
    }
}
