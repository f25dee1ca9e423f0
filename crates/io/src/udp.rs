//! UDP with Linux segmentation offload: one `sendmsg` carries a batch of equal-size
//! datagrams (UDP_SEGMENT), and GRO lets one `recvmsg` return several (UDP_GRO). Elsewhere,
//! or when the kernel refuses, plain datagrams are used. On Linux each received datagram also
//! reports the local address it came to (IP_PKTINFO / IPV6_RECVPKTINFO) and its ECN codepoint
//! (IP_RECVTOS / IPV6_RECVTCLASS), and a send can choose its source address and ECN codepoint
//! (the same control messages on `sendmsg`).

use std::io;
use std::net::SocketAddr;

use bytes::BytesMut;
use qfec_proto::{DatagramInfo, EcnCodepoint};
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// Room for one GRO batch (the kernel coalesces up to 64 KiB).
const RECV_BUF: usize = 65536;
/// Block from which received datagrams are cut.
const RECV_BLOCK: usize = 2 << 20;

/// Most bytes one GSO `sendmsg` may carry: the segments together form one UDP datagram
/// before the kernel splits it, so they must fit its 16-bit length (65,535 less the IPv4 and
/// UDP headers). Sixteen 9,000-byte segments do not: the kernel refused such a batch whole
/// (EMSGSIZE), which on jumbo-frame paths lost every batch of more than seven packets.
pub const MAX_GSO_BYTES: usize = 65_507;
/// Most segments one GSO `sendmsg` may carry (the kernel's UDP_MAX_SEGMENTS).
const MAX_GSO_SEGMENT_COUNT: usize = 64;

/// Room for the control messages of one `recvmsg` or `sendmsg`: a GRO or GSO size, a packet
/// info and a TOS / traffic class.
const CONTROL_LEN: usize = 128;

pub struct UdpIo {
    socket: UdpSocket,
    gso: bool,
    /// The bound port (a received datagram's local address is its destination IP and this).
    local_port: u16,
}

impl UdpIo {
    /// Takes over a bound socket (one made in another network namespace, for instance).
    pub fn from_std(std_sock: std::net::UdpSocket) -> io::Result<Self> {
        std_sock.set_nonblocking(true)?;
        #[cfg(not(target_os = "linux"))]
        let gso = false;
        #[cfg(target_os = "linux")]
        let gso = {
            use std::os::fd::AsRawFd;
            let fd = std_sock.as_raw_fd();
            // Larger buffers absorb bursts at multi-gigabit rates; failures are harmless.
            // The FORCE variants pass the system maximum when privileged (root in a lab).
            if set_int_opt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 8 << 20).is_err() {
                let _ = set_int_opt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 8 << 20);
            }
            if set_int_opt(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 8 << 20).is_err() {
                let _ = set_int_opt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, 8 << 20);
            }
            let gso = std::env::var_os("QFEC_NO_GSO").is_none()
                && set_int_opt(fd, libc::SOL_UDP, libc::UDP_SEGMENT, 0).is_ok();
            // GRO batches arrive with their segment size in a control message; recvmsg
            // reads it whether or not the kernel coalesced anything.
            if std::env::var_os("QFEC_NO_GSO").is_none() {
                let _ = set_int_opt(fd, libc::SOL_UDP, libc::UDP_GRO, 1);
            }
            // Each datagram's local address and ECN bits. An IPv6 socket may also carry IPv4
            // (mapped addresses): ask for both families' control messages.
            let v6 = std_sock.local_addr()?.is_ipv6();
            let _ = set_int_opt(fd, libc::IPPROTO_IP, libc::IP_PKTINFO, 1);
            let _ = set_int_opt(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1);
            // Don't fragment, and don't cap at the kernel's path MTU estimate: PMTU
            // discovery is the connection's (RFC 9000 §14); a datagram above the interface's
            // MTU fails with EMSGSIZE.
            let _ = set_int_opt(
                fd,
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                libc::IP_PMTUDISC_PROBE,
            );
            if v6 {
                let _ = set_int_opt(
                    fd,
                    libc::IPPROTO_IPV6,
                    libc::IPV6_MTU_DISCOVER,
                    libc::IPV6_PMTUDISC_PROBE,
                );
                let _ = set_int_opt(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO, 1);
                let _ = set_int_opt(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, 1);
            }
            gso
        };
        let local_port = std_sock.local_addr()?.port();
        Ok(UdpIo {
            socket: UdpSocket::from_std(std_sock)?,
            gso,
            local_port,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Fixes the peer: the kernel then reports its ICMP errors (port unreachable) to us.
    pub fn connect(&self, remote: SocketAddr) -> io::Result<()> {
        as_std(&self.socket).connect(remote)
    }

    pub fn gso_supported(&self) -> bool {
        self.gso
    }

    pub async fn readable(&self) -> io::Result<()> {
        self.socket.readable().await
    }

    /// Sends `data`, split by the kernel into `segment_size` datagrams when given, from
    /// `source` when given (one of our addresses), with `ecn` in the IP header. A batch
    /// larger than one GSO call carries ([`MAX_GSO_BYTES`]) goes in several calls.
    pub async fn send(
        &mut self,
        dest: SocketAddr,
        source: Option<SocketAddr>,
        ecn: Option<EcnCodepoint>,
        data: &[u8],
        segment_size: Option<usize>,
    ) -> io::Result<()> {
        let per_call = gso_call_bytes(segment_size.filter(|_| self.gso));
        if data.len() > per_call {
            for chunk in data.chunks(per_call) {
                self.send_batch(dest, source, ecn, chunk, segment_size)
                    .await?;
            }
            return Ok(());
        }
        self.send_batch(dest, source, ecn, data, segment_size).await
    }

    /// One `sendmsg` (or, where the device refuses offload, one per segment).
    async fn send_batch(
        &mut self,
        dest: SocketAddr,
        source: Option<SocketAddr>,
        ecn: Option<EcnCodepoint>,
        data: &[u8],
        segment_size: Option<usize>,
    ) -> io::Result<()> {
        loop {
            let r = self.socket.try_io(Interest::WRITABLE, || {
                self.send_now(dest, source, ecn, data, segment_size)
            });
            match r {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.socket.writable().await?,
                Err(e) if segment_size.is_some() && e.raw_os_error() == Some(libc::EIO) => {
                    // The device refused offload: fall back to single datagrams for good.
                    self.gso = false;
                    let seg = segment_size.unwrap_or(data.len());
                    for chunk in data.chunks(seg) {
                        self.send_one(dest, source, ecn, chunk).await?;
                    }
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn send_one(
        &self,
        dest: SocketAddr,
        source: Option<SocketAddr>,
        ecn: Option<EcnCodepoint>,
        data: &[u8],
    ) -> io::Result<()> {
        loop {
            let r = self.socket.try_io(Interest::WRITABLE, || {
                self.send_now(dest, source, ecn, data, None)
            });
            match r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.socket.writable().await?,
                r => return r,
            }
        }
    }

    #[cfg(target_os = "linux")]
    fn send_now(
        &self,
        dest: SocketAddr,
        source: Option<SocketAddr>,
        ecn: Option<EcnCodepoint>,
        data: &[u8],
        segment_size: Option<usize>,
    ) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let seg = segment_size.filter(|_| self.gso);
        if seg.is_none() && source.is_none() && ecn.is_none() {
            return std::net::UdpSocket::send_to(&as_std(&self.socket), data, dest).map(|_| ());
        }
        let (addr, addr_len) = sockaddr(dest);
        let mut iov = libc::iovec {
            iov_base: data.as_ptr() as *mut _,
            iov_len: data.len(),
        };
        let mut control = Control([0u8; CONTROL_LEN]);
        // SAFETY: all pointers reference live locals of the right sizes for sendmsg; the
        // control messages written fit CONTROL_LEN (checked by `put_cmsg`).
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_name = &addr as *const _ as *mut _;
            msg.msg_namelen = addr_len;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.0.as_mut_ptr() as *mut _;
            msg.msg_controllen = CONTROL_LEN as _;
            let mut len = 0usize;
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            if let Some(seg) = seg {
                put_cmsg(
                    &mut cmsg,
                    &msg,
                    &mut len,
                    libc::SOL_UDP,
                    libc::UDP_SEGMENT,
                    seg as u16,
                );
            }
            // The IP header's family follows the destination (an IPv6 socket sends IPv4 to
            // a mapped address).
            let v4 = match dest {
                SocketAddr::V4(_) => true,
                SocketAddr::V6(a) => a.ip().to_ipv4_mapped().is_some(),
            };
            if let Some(src) = source {
                match (src.ip(), v4) {
                    (std::net::IpAddr::V4(ip), true) => {
                        let info = libc::in_pktinfo {
                            ipi_ifindex: 0,
                            ipi_spec_dst: libc::in_addr {
                                s_addr: u32::from_ne_bytes(ip.octets()),
                            },
                            ipi_addr: libc::in_addr { s_addr: 0 },
                        };
                        put_cmsg(
                            &mut cmsg,
                            &msg,
                            &mut len,
                            libc::IPPROTO_IP,
                            libc::IP_PKTINFO,
                            info,
                        );
                    }
                    (std::net::IpAddr::V6(ip), false) => {
                        let info = libc::in6_pktinfo {
                            ipi6_addr: libc::in6_addr {
                                s6_addr: ip.octets(),
                            },
                            ipi6_ifindex: 0,
                        };
                        put_cmsg(
                            &mut cmsg,
                            &msg,
                            &mut len,
                            libc::IPPROTO_IPV6,
                            libc::IPV6_PKTINFO,
                            info,
                        );
                    }
                    // A source of the other family than the datagram: the socket's choice.
                    _ => {}
                }
            }
            if let Some(ecn) = ecn {
                let bits = libc::c_int::from(ecn.bits());
                if v4 {
                    put_cmsg(
                        &mut cmsg,
                        &msg,
                        &mut len,
                        libc::IPPROTO_IP,
                        libc::IP_TOS,
                        bits,
                    );
                } else {
                    put_cmsg(
                        &mut cmsg,
                        &msg,
                        &mut len,
                        libc::IPPROTO_IPV6,
                        libc::IPV6_TCLASS,
                        bits,
                    );
                }
            }
            msg.msg_controllen = len as _;
            if len == 0 {
                msg.msg_control = std::ptr::null_mut();
            }
            let n = libc::sendmsg(self.socket.as_raw_fd(), &msg, 0);
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    fn send_now(
        &self,
        dest: SocketAddr,
        _source: Option<SocketAddr>,
        _ecn: Option<EcnCodepoint>,
        data: &[u8],
        _segment_size: Option<usize>,
    ) -> io::Result<()> {
        std::net::UdpSocket::send_to(&as_std(&self.socket), data, dest).map(|_| ())
    }

    /// Receives one datagram (or a GRO batch) into `buf`'s spare room and splits it off, so
    /// the packets can be decrypted in place and handed on without copies.
    pub fn try_recv_buf(
        &self,
        buf: &mut BytesMut,
    ) -> io::Result<Option<(BytesMut, DatagramInfo, Option<usize>)>> {
        // Datagrams are split off one large block: allocating per receive would cost more
        // than the copy it saves. The block is freed once every packet cut from it is gone.
        if buf.capacity() - buf.len() < RECV_BUF {
            *buf = BytesMut::with_capacity(RECV_BLOCK);
        }
        #[cfg(not(target_os = "linux"))]
        buf.resize(RECV_BUF, 0);
        let r = self
            .socket
            .try_io(Interest::READABLE, || self.recv_into(buf));
        match r {
            Ok((n, info, seg)) => Ok(Some((buf.split_to(n), info, seg))),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    #[cfg(target_os = "linux")]
    fn recv_into(&self, buf: &mut BytesMut) -> io::Result<(usize, DatagramInfo, Option<usize>)> {
        let spare = buf.spare_capacity_mut();
        let (ptr, cap) = (spare.as_mut_ptr() as *mut u8, spare.len());
        let (n, info, seg) = self.recvmsg_raw(ptr, cap)?;
        // SAFETY: the kernel initialised the first n bytes of the spare capacity.
        unsafe { buf.set_len(n) };
        Ok((n, info, seg))
    }

    #[cfg(not(target_os = "linux"))]
    fn recv_into(&self, buf: &mut BytesMut) -> io::Result<(usize, DatagramInfo, Option<usize>)> {
        let (n, from) = std::net::UdpSocket::recv_from(&as_std(&self.socket), &mut buf[..])?;
        buf.truncate(n);
        Ok((n, DatagramInfo::from(from), None))
    }

    /// `recvmsg` into `cap` bytes at `ptr`, reading the GRO segment size, the local address
    /// and the ECN bits from the control messages.
    #[cfg(target_os = "linux")]
    fn recvmsg_raw(
        &self,
        ptr: *mut u8,
        cap: usize,
    ) -> io::Result<(usize, DatagramInfo, Option<usize>)> {
        use std::os::fd::AsRawFd;
        // SAFETY: msghdr points at live locals and at `cap` writable bytes at `ptr`; the
        // kernel writes at most those sizes.
        unsafe {
            let mut addr: libc::sockaddr_storage = std::mem::zeroed();
            let mut iov = libc::iovec {
                iov_base: ptr as *mut _,
                iov_len: cap,
            };
            let mut control = Control([0u8; CONTROL_LEN]);
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_name = &mut addr as *mut _ as *mut _;
            msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as _;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.0.as_mut_ptr() as *mut _;
            msg.msg_controllen = CONTROL_LEN as _;
            let n = libc::recvmsg(self.socket.as_raw_fd(), &mut msg, 0);
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let (mut segment, mut local_ip, mut ecn) = (None, None, None);
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                let data = libc::CMSG_DATA(cmsg);
                match ((*cmsg).cmsg_level, (*cmsg).cmsg_type) {
                    (libc::SOL_UDP, libc::UDP_GRO) => {
                        let v = std::ptr::read_unaligned(data as *const libc::c_int);
                        segment = Some(v as usize);
                    }
                    (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                        let info = std::ptr::read_unaligned(data as *const libc::in_pktinfo);
                        let ip = std::net::Ipv4Addr::from(info.ipi_addr.s_addr.to_ne_bytes());
                        local_ip = Some(std::net::IpAddr::V4(ip));
                    }
                    (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                        let info = std::ptr::read_unaligned(data as *const libc::in6_pktinfo);
                        let ip = std::net::Ipv6Addr::from(info.ipi6_addr.s6_addr);
                        local_ip = Some(std::net::IpAddr::V6(ip));
                    }
                    // The kernel writes IP_TOS as one byte, IPV6_TCLASS as an int.
                    (libc::IPPROTO_IP, libc::IP_TOS) => {
                        ecn = EcnCodepoint::from_bits(*data);
                    }
                    (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => {
                        let v = std::ptr::read_unaligned(data as *const libc::c_int);
                        ecn = EcnCodepoint::from_bits(v as u8);
                    }
                    _ => {}
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
            let from = from_sockaddr(&addr).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidData, "unknown address family")
            })?;
            let info = DatagramInfo {
                remote: from,
                local: local_ip.map(|ip| SocketAddr::new(ip, self.local_port)),
                ecn,
            };
            Ok((n as usize, info, segment))
        }
    }
}

/// A control-message buffer, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct Control([u8; CONTROL_LEN]);

/// Writes one control message of `value` at `*cmsg` and moves `*cmsg` to the next; `len`
/// grows by its space.
///
/// # Safety
/// `*cmsg` is a header inside `msg`'s control buffer (from `CMSG_FIRSTHDR` or this function),
/// a [`Control`] of `CONTROL_LEN` bytes.
#[cfg(target_os = "linux")]
unsafe fn put_cmsg<T: Copy>(
    cmsg: &mut *mut libc::cmsghdr,
    msg: &libc::msghdr,
    len: &mut usize,
    level: libc::c_int,
    ty: libc::c_int,
    value: T,
) {
    let size = std::mem::size_of::<T>() as u32;
    // SAFETY: the caller's contract; the assertion keeps the write inside the buffer.
    unsafe {
        let space = libc::CMSG_SPACE(size) as usize;
        assert!(!cmsg.is_null() && *len + space <= CONTROL_LEN);
        (**cmsg).cmsg_level = level;
        (**cmsg).cmsg_type = ty;
        (**cmsg).cmsg_len = libc::CMSG_LEN(size) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(*cmsg) as *mut T, value);
        *len += space;
        *cmsg = libc::CMSG_NXTHDR(msg, *cmsg);
    }
}

/// A borrowed std view of the tokio socket for non-async calls inside `try_io`.
fn as_std(s: &UdpSocket) -> std::mem::ManuallyDrop<std::net::UdpSocket> {
    #[cfg(unix)]
    {
        use std::os::fd::{AsRawFd, FromRawFd};
        // SAFETY: the fd stays owned by the tokio socket; ManuallyDrop prevents closing it.
        std::mem::ManuallyDrop::new(unsafe { std::net::UdpSocket::from_raw_fd(s.as_raw_fd()) })
    }
}

#[cfg(target_os = "linux")]
fn set_int_opt(fd: i32, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int of the declared size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &value as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(target_os = "linux")]
fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is large enough for both address families.
    unsafe {
        let mut storage: libc::sockaddr_storage = std::mem::zeroed();
        let len = match addr {
            SocketAddr::V4(a) => {
                let sin = &mut storage as *mut _ as *mut libc::sockaddr_in;
                (*sin).sin_family = libc::AF_INET as _;
                (*sin).sin_port = a.port().to_be();
                (*sin).sin_addr = libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                };
                std::mem::size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(a) => {
                let sin6 = &mut storage as *mut _ as *mut libc::sockaddr_in6;
                (*sin6).sin6_family = libc::AF_INET6 as _;
                (*sin6).sin6_port = a.port().to_be();
                (*sin6).sin6_addr = libc::in6_addr {
                    s6_addr: a.ip().octets(),
                };
                (*sin6).sin6_flowinfo = a.flowinfo();
                (*sin6).sin6_scope_id = a.scope_id();
                std::mem::size_of::<libc::sockaddr_in6>()
            }
        };
        (storage, len as libc::socklen_t)
    }
}

#[cfg(target_os = "linux")]
fn from_sockaddr(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    // SAFETY: the family field tells which layout the kernel wrote.
    unsafe {
        match i32::from(s.ss_family) {
            libc::AF_INET => {
                let sin = &*(s as *const _ as *const libc::sockaddr_in);
                let ip = std::net::Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                Some(SocketAddr::new(ip.into(), u16::from_be(sin.sin_port)))
            }
            libc::AF_INET6 => {
                let sin6 = &*(s as *const _ as *const libc::sockaddr_in6);
                let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                Some(SocketAddr::V6(std::net::SocketAddrV6::new(
                    ip,
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

/// How many bytes of a batch of `segment`-byte datagrams one GSO call takes: whole
/// segments, within the kernel's limits (everything, without GSO).
fn gso_call_bytes(segment: Option<usize>) -> usize {
    match segment {
        Some(seg) if seg > 0 => (MAX_GSO_BYTES / seg).clamp(1, MAX_GSO_SEGMENT_COUNT) * seg,
        _ => usize::MAX,
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// Waits up to 5 s for one datagram.
    async fn recv(io: &UdpIo) -> (Vec<u8>, DatagramInfo) {
        let wait = async {
            let mut buf = BytesMut::new();
            loop {
                if let Some((data, info, _)) = io.try_recv_buf(&mut buf).unwrap() {
                    return (data.to_vec(), info);
                }
                io.readable().await.unwrap();
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(5), wait)
            .await
            .expect("no datagram within 5 s")
    }

    #[test]
    fn local_address_and_ecn_travel_with_each_datagram() {
        runtime().block_on(async {
            // A receiver on every address: which one a datagram came to is in its info.
            let rx = UdpIo::from_std(std::net::UdpSocket::bind("0.0.0.0:0").unwrap()).unwrap();
            let port = rx.local_addr().unwrap().port();
            let mut tx =
                UdpIo::from_std(std::net::UdpSocket::bind("127.0.0.1:0").unwrap()).unwrap();
            let from = tx.local_addr().unwrap();
            for (to, ecn) in [
                ("127.0.0.2", Some(EcnCodepoint::Ect0)),
                ("127.0.0.3", Some(EcnCodepoint::Ce)),
                ("127.0.0.2", None),
            ] {
                let dest = SocketAddr::new(to.parse().unwrap(), port);
                tx.send(dest, Some(from), ecn, b"hello", None)
                    .await
                    .unwrap();
                let (data, info) = recv(&rx).await;
                assert_eq!(data, b"hello");
                assert_eq!(info.remote, from);
                assert_eq!(info.local, Some(dest), "the address it was sent to");
                assert_eq!(info.ecn, ecn);
            }
        });
    }

    #[test]
    fn a_reply_leaves_from_the_address_it_answers() {
        runtime().block_on(async {
            // The client talks to 127.0.0.5 only (a connected socket drops anything else);
            // the wildcard server must answer from that address, not its default 127.0.0.1.
            let mut server =
                UdpIo::from_std(std::net::UdpSocket::bind("0.0.0.0:0").unwrap()).unwrap();
            let port = server.local_addr().unwrap().port();
            let target = SocketAddr::new("127.0.0.5".parse().unwrap(), port);
            let client_sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            client_sock.connect(target).unwrap();
            let mut client = UdpIo::from_std(client_sock).unwrap();
            client
                .send(target, None, None, b"ping", None)
                .await
                .unwrap();
            let (_, info) = recv(&server).await;
            assert_eq!(info.local, Some(target));
            // Ten GSO segments from the same source address.
            let batch = vec![7u8; 1000];
            server
                .send(info.remote, info.local, None, &batch, Some(100))
                .await
                .unwrap();
            let mut got = 0;
            while got < 1000 {
                let (data, info) = recv(&client).await;
                assert_eq!(info.remote, target);
                got += data.len();
            }
        });
    }

    #[test]
    fn a_gso_call_stays_within_the_kernels_limits() {
        assert_eq!(gso_call_bytes(None), usize::MAX);
        assert_eq!(gso_call_bytes(Some(1452)), 45 * 1452);
        assert_eq!(gso_call_bytes(Some(8972)), 7 * 8972);
        assert_eq!(gso_call_bytes(Some(100)), 64 * 100);
        assert_eq!(gso_call_bytes(Some(65_527)), 65_527);
    }

    /// Regression (issue 54): sixteen 8,972-byte datagrams in one batch, as PMTU discovery
    /// on loopback or a jumbo-frame network gives, all arrive; the kernel refused the whole
    /// batch in one call (EMSGSIZE), and the driver counted it as an oversize probe.
    #[test]
    fn a_batch_of_jumbo_datagrams_arrives_whole() {
        runtime().block_on(async {
            let rx = UdpIo::from_std(std::net::UdpSocket::bind("127.0.0.1:0").unwrap()).unwrap();
            let to = rx.local_addr().unwrap();
            let mut tx =
                UdpIo::from_std(std::net::UdpSocket::bind("127.0.0.1:0").unwrap()).unwrap();
            let seg = 8972;
            let batch: Vec<u8> = (0..16 * seg).map(|i| (i / seg) as u8).collect();
            tx.send(to, None, None, &batch, Some(seg)).await.unwrap();
            let mut got = Vec::new();
            while got.len() < batch.len() {
                let (data, _) = recv(&rx).await;
                assert_eq!(data.len() % seg, 0, "whole datagrams");
                got.extend_from_slice(&data);
            }
            assert_eq!(got, batch, "every datagram, in order");
        });
    }
}
