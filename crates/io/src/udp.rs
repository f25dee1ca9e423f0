//! UDP with Linux segmentation offload: one `sendmsg` carries a batch of equal-size
//! datagrams (UDP_SEGMENT), and GRO lets one `recvmsg` return several (UDP_GRO). Elsewhere,
//! or when the kernel refuses, plain datagrams are used.

use std::io;
use std::net::SocketAddr;

use bytes::BytesMut;
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// Room for one GRO batch (the kernel coalesces up to 64 KiB).
const RECV_BUF: usize = 65536;
/// Block from which received datagrams are cut.
const RECV_BLOCK: usize = 2 << 20;

pub struct UdpIo {
    socket: UdpSocket,
    gso: bool,
}

impl UdpIo {
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        Self::from_std(std::net::UdpSocket::bind(addr)?)
    }

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
            gso
        };
        Ok(UdpIo {
            socket: UdpSocket::from_std(std_sock)?,
            gso,
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

    /// Sends `data`, split by the kernel into `segment_size` datagrams when given.
    pub async fn send(
        &mut self,
        dest: SocketAddr,
        data: &[u8],
        segment_size: Option<usize>,
    ) -> io::Result<()> {
        loop {
            let r = self.socket.try_io(Interest::WRITABLE, || {
                self.send_now(dest, data, segment_size)
            });
            match r {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.socket.writable().await?,
                Err(e) if segment_size.is_some() && e.raw_os_error() == Some(libc::EIO) => {
                    // The device refused offload: fall back to single datagrams for good.
                    self.gso = false;
                    let seg = segment_size.unwrap_or(data.len());
                    for chunk in data.chunks(seg) {
                        self.send_one(dest, chunk).await?;
                    }
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn send_one(&self, dest: SocketAddr, data: &[u8]) -> io::Result<()> {
        self.socket.send_to(data, dest).await.map(|_| ())
    }

    #[cfg(target_os = "linux")]
    fn send_now(
        &self,
        dest: SocketAddr,
        data: &[u8],
        segment_size: Option<usize>,
    ) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let Some(seg) = segment_size.filter(|_| self.gso) else {
            return std::net::UdpSocket::send_to(&as_std(&self.socket), data, dest).map(|_| ());
        };
        let (addr, addr_len) = sockaddr(dest);
        let mut iov = libc::iovec {
            iov_base: data.as_ptr() as *mut _,
            iov_len: data.len(),
        };
        let mut control = [0u8; 64];
        // SAFETY: all pointers reference live locals of the right sizes for sendmsg.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_name = &addr as *const _ as *mut _;
            msg.msg_namelen = addr_len;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr() as *mut _;
            msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) as _;
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_UDP;
            (*cmsg).cmsg_type = libc::UDP_SEGMENT;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut u16, seg as u16);
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
    ) -> io::Result<Option<(BytesMut, SocketAddr, Option<usize>)>> {
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
            Ok((n, from, seg)) => Ok(Some((buf.split_to(n), from, seg))),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    #[cfg(target_os = "linux")]
    fn recv_into(&self, buf: &mut BytesMut) -> io::Result<(usize, SocketAddr, Option<usize>)> {
        let spare = buf.spare_capacity_mut();
        let (ptr, cap) = (spare.as_mut_ptr() as *mut u8, spare.len());
        let (n, from, seg) = self.recvmsg_raw(ptr, cap)?;
        // SAFETY: the kernel initialised the first n bytes of the spare capacity.
        unsafe { buf.set_len(n) };
        Ok((n, from, seg))
    }

    #[cfg(not(target_os = "linux"))]
    fn recv_into(&self, buf: &mut BytesMut) -> io::Result<(usize, SocketAddr, Option<usize>)> {
        let (n, from) = std::net::UdpSocket::recv_from(&as_std(&self.socket), &mut buf[..])?;
        buf.truncate(n);
        Ok((n, from, None))
    }

    /// `recvmsg` into `cap` bytes at `ptr`, reading the GRO segment size when enabled.
    #[cfg(target_os = "linux")]
    fn recvmsg_raw(
        &self,
        ptr: *mut u8,
        cap: usize,
    ) -> io::Result<(usize, SocketAddr, Option<usize>)> {
        use std::os::fd::AsRawFd;
        // SAFETY: msghdr points at live locals and at `cap` writable bytes at `ptr`; the
        // kernel writes at most those sizes.
        unsafe {
            let mut addr: libc::sockaddr_storage = std::mem::zeroed();
            let mut iov = libc::iovec {
                iov_base: ptr as *mut _,
                iov_len: cap,
            };
            let mut control = [0u8; 64];
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_name = &mut addr as *mut _ as *mut _;
            msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as _;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr() as *mut _;
            msg.msg_controllen = control.len() as _;
            let n = libc::recvmsg(self.socket.as_raw_fd(), &mut msg, 0);
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let mut segment = None;
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_UDP && (*cmsg).cmsg_type == libc::UDP_GRO {
                    let v = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::c_int);
                    segment = Some(v as usize);
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
            let from = from_sockaddr(&addr).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidData, "unknown address family")
            })?;
            Ok((n as usize, from, segment))
        }
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
