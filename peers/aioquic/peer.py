#!/usr/bin/env python3
"""aioquic as an hq-interop (HTTP/0.9 over QUIC) test peer for qfec, with quinn-peer's interface,
or an HTTP/3 one (aioquic's H3Connection) with --http3:

    peer.py server [--http3] --listen IP:PORT --root DIR [--cert-out FILE]
    peer.py client [--http3] [--insecure | --ca FILE] URL...

Run it with the Python of the venv that setup.sh made.
"""

import argparse
import asyncio
import datetime
import hashlib
import ipaddress
import logging
import os
import ssl
import sys
import tempfile
import time
from functools import partial
from urllib.parse import urlsplit

from aioquic.asyncio import QuicConnectionProtocol, connect, serve
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.packet import QuicProtocolVersion
from aioquic.quic.events import (
    ConnectionTerminated,
    ProtocolNegotiated,
    StreamDataReceived,
    StreamReset,
)
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

ALPN = "hq-interop"
CODE_NOT_FOUND = 0x404
CODE_BAD_REQUEST = 0x400
MAX_REQUEST = 8192


class PeerError(Exception):
    """An error reported as one line, without a traceback."""


def configuration(is_client, http3):
    # 16 MiB per stream and 32 MiB per connection (aioquic's default is 1 MiB, and it doubles a
    # window once half is used): above the bandwidth-delay product of every preset, so that
    # flow control never sets the pace of a transfer.
    return QuicConfiguration(
        is_client=is_client,
        alpn_protocols=H3_ALPN if http3 else [ALPN],
        max_stream_data=16 << 20,
        max_data=32 << 20,
        idle_timeout=30.0,
    )


def split_address(text):
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise PeerError(f"--listen {text!r}: expected IP:PORT")
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host), int(port)
    except ValueError:
        raise PeerError(f"--listen {text!r}: {host!r} is not an IP address") from None


def self_signed(ip):
    """A fresh certificate for localhost, 127.0.0.1, ::1 and `ip` (unless unspecified): key and
    certificate as PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    names = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    if not ip.is_unspecified and not ip.is_loopback:
        names.append(x509.IPAddress(ip))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "aioquic-peer")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)


def parse_request(request):
    """The path of `GET /path` in the request's first line, or None."""
    try:
        line = request.decode().splitlines()[0]
    except (UnicodeDecodeError, IndexError):
        return None
    if not line.startswith("GET "):
        return None
    path = line[4:].strip()
    return path if path.startswith("/") else None


def resolve(root, path):
    """The file under `root` (real path) that `path` names, or None when it does not exist or
    leads out of the root (`..`, or a symbolic link pointing elsewhere)."""
    rel = path.lstrip("/")
    if any(part in ("", ".", "..") for part in rel.split("/")):
        return None
    real = os.path.realpath(os.path.join(root, rel))
    if not real.startswith(root + os.sep) or not os.path.isfile(real):
        return None
    return real


class HqServer(QuicConnectionProtocol):
    def __init__(self, *args, root, **kwargs):
        super().__init__(*args, **kwargs)
        self._root = root
        self._requests = {}

    def quic_event_received(self, event):
        if not isinstance(event, StreamDataReceived):
            return
        request = self._requests.get(event.stream_id)
        if request is None:
            if event.stream_id not in self._requests:
                self._requests[event.stream_id] = request = bytearray()
            else:
                return  # answered already
        request += event.data
        if b"\n" in request or event.end_stream or len(request) > MAX_REQUEST:
            self._requests[event.stream_id] = None
            self._answer(event.stream_id, bytes(request))

    def _answer(self, stream_id, request):
        path = parse_request(request) if len(request) <= MAX_REQUEST else None
        if path is None:
            self._quic.reset_stream(stream_id, CODE_BAD_REQUEST)
        elif (file := resolve(self._root, path)) is None:
            self._quic.reset_stream(stream_id, CODE_NOT_FOUND)
        else:
            # aioquic takes no back-pressure on sending: the whole file is handed over at once
            # (the test files are a few MB).
            with open(file, "rb") as f:
                self._quic.send_stream_data(stream_id, f.read(), end_stream=True)
        self.transmit()


class H3Server(QuicConnectionProtocol):
    """Answers HTTP/3 GET and HEAD requests with the files under the root (404 if missing)."""

    def __init__(self, *args, root, **kwargs):
        super().__init__(*args, **kwargs)
        self._root = root
        self._http = None

    def quic_event_received(self, event):
        if isinstance(event, ProtocolNegotiated):
            self._http = H3Connection(self._quic)
        if self._http is None:
            return
        for e in self._http.handle_event(event):
            if isinstance(e, HeadersReceived):
                self._answer(e.stream_id, dict(e.headers))

    def _answer(self, stream_id, headers):
        method = headers.get(b":method")
        path = headers.get(b":path", b"").decode(errors="replace").partition("?")[0]
        file = resolve(self._root, path)
        if method not in (b"GET", b"HEAD") or file is None:
            status = b"404" if file is None else b"405"
            self._http.send_headers(stream_id, [(b":status", status)], end_stream=True)
        else:
            # The whole file at once, as HqServer does.
            with open(file, "rb") as f:
                data = f.read()
            head = [(b":status", b"200"), (b"content-length", str(len(data)).encode())]
            self._http.send_headers(stream_id, head, end_stream=method == b"HEAD")
            if method == b"GET":
                self._http.send_data(stream_id, data, end_stream=True)
        self.transmit()


async def run_server(args):
    root = os.path.realpath(args.root)
    if not os.path.isdir(root):
        raise PeerError(f"cannot open --root {args.root}: give an existing directory")
    ip, port = split_address(args.listen)
    key_pem, cert_pem = self_signed(ip)
    if args.cert_out:
        try:
            with open(args.cert_out, "wb") as f:
                f.write(cert_pem)
        except OSError as e:
            raise PeerError(f"cannot write --cert-out {args.cert_out}: {e.strerror}") from None
    config = configuration(is_client=False, http3=args.http3)
    # load_cert_chain reads files: the key lives in a private temporary directory meanwhile.
    with tempfile.TemporaryDirectory() as tmp:
        cert_file, key_file = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        with open(cert_file, "wb") as f:
            f.write(cert_pem)
        with open(key_file, "wb") as f:
            f.write(key_pem)
        config.load_cert_chain(cert_file, key_file)
    try:
        server = await serve(
            str(ip),
            port,
            configuration=config,
            create_protocol=partial(H3Server if args.http3 else HqServer, root=root),
        )
    except OSError as e:
        raise PeerError(f"cannot listen on {args.listen}: {e.strerror}") from None
    sockname = server._transport.get_extra_info("sockname")
    print(
        f"aioquic-peer: listening on {sockname[0]}:{sockname[1]} serving {root}",
        file=sys.stderr,
        flush=True,
    )
    await asyncio.Event().wait()  # until killed


class Download:
    def __init__(self, loop):
        self.done = loop.create_future()
        self.hash = hashlib.sha256()
        self.bytes = 0
        self.status = None  # HTTP/3's :status, once the response's headers are there

    def add(self, data, end_stream):
        self.hash.update(data)
        self.bytes += len(data)
        if end_stream:
            self.done.set_result((self.bytes, time.monotonic(), self.hash.hexdigest()))


class Client(QuicConnectionProtocol):
    """Downloads on request streams; a stream reset or the connection's end fails them."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._downloads = {}
        self.closed = None  # the ConnectionTerminated event, once there is one

    async def get(self, path):
        """Requests `path` on a new stream; returns (bytes, monotonic end time, sha256)."""
        stream_id = self._quic.get_next_available_stream_id()
        download = Download(asyncio.get_running_loop())
        self._downloads[stream_id] = download
        self._request(stream_id, path)
        self.transmit()
        return await download.done

    def _active(self, stream_id):
        """The download on `stream_id` if it still waits for data, else None."""
        d = self._downloads.get(stream_id)
        return None if d is None or d.done.done() else d

    def quic_event_received(self, event):
        if isinstance(event, StreamReset):
            if d := self._active(event.stream_id):
                code = event.error_code
                d.done.set_exception(
                    PeerError("not found" if code == CODE_NOT_FOUND else f"reset with code {code}")
                )
        elif isinstance(event, ConnectionTerminated):
            self.closed = event
            for d in self._downloads.values():
                if not d.done.done():
                    d.done.set_exception(
                        PeerError(f"connection closed ({event.error_code}: {event.reason_phrase})")
                    )


class HqClient(Client):
    def _request(self, stream_id, path):
        self._quic.send_stream_data(stream_id, f"GET {path}\r\n".encode(), end_stream=True)

    def quic_event_received(self, event):
        if isinstance(event, StreamDataReceived):
            if d := self._active(event.stream_id):
                d.add(event.data, event.end_stream)
        else:
            super().quic_event_received(event)


class H3Client(Client):
    """GETs over HTTP/3; a status other than 200 fails the download."""

    def __init__(self, *args, authority, **kwargs):
        super().__init__(*args, **kwargs)
        self._authority = authority.encode()
        self._http = H3Connection(self._quic)

    def _request(self, stream_id, path):
        headers = [
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":authority", self._authority),
            (b":path", path.encode()),
        ]
        self._http.send_headers(stream_id, headers, end_stream=True)

    def quic_event_received(self, event):
        super().quic_event_received(event)
        for e in self._http.handle_event(event):
            if isinstance(e, HeadersReceived | DataReceived) and (d := self._active(e.stream_id)):
                self._received(d, e)

    def _received(self, d, e):
        if isinstance(e, HeadersReceived) and d.status is None:
            d.status = dict(e.headers).get(b":status", b"").decode()
            if d.status != "200":
                d.done.set_exception(PeerError(f"HTTP {d.status}"))
                return
        d.add(e.data if isinstance(e, DataReceived) else b"", e.stream_ended)


def parse_url(text):
    u = urlsplit(text)
    try:
        port = u.port or 443
    except ValueError:
        raise PeerError(f"invalid URL {text!r}: bad port") from None
    if u.scheme != "https" or not u.hostname:
        raise PeerError(f"invalid URL {text!r}: expected https://HOST:PORT/PATH")
    return u.hostname, port, u.path or "/"


def mbps(n, secs):
    return n * 8 / max(secs, 1e-9) / 1e6


async def run_client(args):
    urls = [parse_url(u) for u in args.urls]
    host, port = urls[0][:2]
    if any(u[:2] != (host, port) for u in urls):
        raise PeerError("all URLs must name the same server (they share one connection)")
    config = configuration(is_client=True, http3=args.http3)
    if args.quic_version == 2:
        config.supported_versions = [QuicProtocolVersion.VERSION_2]
    if args.prefer_version is not None:
        # Open in --quic-version, offer this one first (RFC 9368 compatible negotiation).
        v1, v2 = QuicProtocolVersion.VERSION_1, QuicProtocolVersion.VERSION_2
        first = v2 if args.quic_version == 2 else v1
        preferred = v2 if args.prefer_version == 2 else v1
        config.original_version = first
        config.supported_versions = [preferred] + ([first] if first != preferred else [])
    if args.insecure:
        config.verify_mode = ssl.CERT_NONE
    elif args.ca:
        try:
            with open(args.ca, "rb") as f:
                cadata = f.read()
            x509.load_pem_x509_certificates(cadata)
        except (OSError, ValueError) as e:
            raise PeerError(f"cannot read PEM certificates from --ca {args.ca}: {e}") from None
        config.load_verify_locations(cadata=cadata)
    else:
        raise PeerError(
            "cannot verify the server's certificate: pass --ca FILE (e.g. written by the "
            "server's --cert-out) or --insecure"
        )
    # The connection's reason for failing the handshake is reported here, not logged.
    logging.getLogger("quic").setLevel(logging.CRITICAL)
    made = []
    if args.http3:
        authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        client_class = partial(H3Client, authority=authority)
    else:
        client_class = HqClient

    def protocol(*a, **kw):
        made.append(client_class(*a, **kw))
        return made[-1]

    start = time.monotonic()
    try:
        async with connect(host, port, configuration=config, create_protocol=protocol) as client:
            handshake = time.monotonic() - start
            results = await asyncio.gather(
                *(client.get(path) for _, _, path in urls), return_exceptions=True
            )
            # The version the connection ended in (aioquic keeps it private).
            version = client._quic._version
    except ConnectionError:
        closed = made[0].closed if made else None
        reason = f"{closed.reason_phrase} (error {closed.error_code})" if closed else "failed"
        if closed is None or closed.reason_phrase == "Idle timeout":
            reason += " (no answer: is a QUIC server listening there, and does UDP get through?)"
        elif "certificate" in closed.reason_phrase:
            reason += " (pass the server's own certificate with --ca, or --insecure)"
        raise PeerError(f"cannot connect to {host}:{port}: {reason}") from None
    total, end, complete = 0, handshake, 0
    for (_, _, path), r in zip(urls, results):
        if isinstance(r, BaseException):
            print(f"{path}  failed: {r}")
            continue
        n, t, sha = r
        secs = t - start
        print(f"{path}  {n} bytes  {secs:.3f} s  {mbps(n, secs):.1f} Mb/s  sha256 {sha}")
        total, end, complete = total + n, max(end, secs), complete + 1
    print(
        f"total {total} bytes in {end:.3f} s ({mbps(total, end):.1f} Mb/s goodput), handshake "
        f"{handshake * 1000:.1f} ms, {complete} of {len(urls)} files"
    )
    print(f"QUIC version {version:#x}")
    return 0 if complete == len(urls) else 1


def main():
    parser = argparse.ArgumentParser(description="aioquic as an hq-interop or HTTP/3 test peer")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("server", help="serve the files under --root until killed")
    s.add_argument("--listen", required=True, help="IP:PORT to listen on (UDP)")
    s.add_argument("--root", required=True, help="directory whose files are served")
    s.add_argument("--cert-out", help="write the self-signed certificate (PEM) to FILE")
    s.add_argument("--http3", action="store_true", help="serve HTTP/3 (ALPN h3), not hq-interop")
    c = sub.add_parser("client", help="fetch every URL over one connection, all at once")
    c.add_argument("--http3", action="store_true", help="GET over HTTP/3 (ALPN h3), not hq")
    c.add_argument(
        "--quic-version",
        type=int,
        choices=[1, 2],
        default=1,
        help="QUIC version to speak from the first packet on (2: RFC 9369)",
    )
    c.add_argument(
        "--prefer-version",
        type=int,
        choices=[1, 2],
        help="offer this QUIC version first: a server may move the connection to it (RFC 9368)",
    )
    trust = c.add_mutually_exclusive_group()
    trust.add_argument("--insecure", action="store_true", help="do not verify the certificate")
    trust.add_argument("--ca", help="trust the PEM certificate(s) in FILE")
    c.add_argument("urls", nargs="+", metavar="URL", help="https://HOST:PORT/PATH")
    args = parser.parse_args()
    try:
        if args.command == "server":
            asyncio.run(run_server(args))
            return 0
        return asyncio.run(run_client(args))
    except PeerError as e:
        print(f"aioquic-peer: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
