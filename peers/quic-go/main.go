// Command quic-go-peer is quic-go as an hq-interop (HTTP/0.9 over QUIC) test peer for qfec,
// with quinn-peer's interface, or an HTTP/3 one (quic-go's http3 package) with --http3:
//
//	quic-go-peer server [--http3] --listen IP:PORT --root DIR [--cert-out FILE]
//	quic-go-peer client [--http3] [--insecure | --ca FILE] URL...
package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

const (
	alpn           = "hq-interop"
	codeNotFound   = 0x404
	codeBadRequest = 0x400
	maxRequest     = 8192
)

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("missing command: quic-go-peer server [--http3] --listen IP:PORT --root DIR, or quic-go-peer client [--http3] [--insecure | --ca FILE] URL..."))
	}
	var err error
	code := 0
	switch os.Args[1] {
	case "server":
		err = runServer(os.Args[2:])
	case "client":
		code, err = runClient(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: use server or client", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
	os.Exit(code)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "quic-go-peer: %v\n", err)
	os.Exit(1)
}

// Windows of 16 MiB per stream and 32 MiB per connection from the start (quic-go's are 512
// KiB, auto-tuned up to 6 and 15 MB): above the bandwidth-delay product of every preset, so
// that flow control never sets the pace of a transfer.
func quicConfig() *quic.Config {
	return &quic.Config{
		InitialStreamReceiveWindow:     16 << 20,
		MaxStreamReceiveWindow:         16 << 20,
		InitialConnectionReceiveWindow: 32 << 20,
		MaxConnectionReceiveWindow:     32 << 20,
		MaxIdleTimeout:                 30 * time.Second,
	}
}

// newFlags is a flag set whose errors come back as one line instead of a usage text.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func runServer(args []string) error {
	fs := newFlags("server")
	listen := fs.String("listen", "", "UDP address to listen on, IP:PORT")
	root := fs.String("root", "", "directory whose files are served")
	certOut := fs.String("cert-out", "", "write the self-signed certificate (PEM) to FILE")
	useH3 := fs.Bool("http3", false, "serve HTTP/3 (ALPN h3) instead of hq-interop")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("server: %v (usage: server [--http3] --listen IP:PORT --root DIR [--cert-out FILE])", err)
	}
	if *listen == "" || *root == "" || fs.NArg() > 0 {
		return errors.New("server needs --listen IP:PORT and --root DIR, and nothing else")
	}
	dir, err := filepath.Abs(*root)
	if err == nil {
		dir, err = filepath.EvalSymlinks(dir)
	}
	if st, serr := os.Stat(dir); err != nil || serr != nil || !st.IsDir() {
		return fmt.Errorf("cannot open --root %s: give an existing directory", *root)
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("--listen %q: expected IP:PORT", *listen)
	}
	cert, certPEM, err := selfSigned(net.ParseIP(host))
	if err != nil {
		return err
	}
	if *certOut != "" {
		if err := os.WriteFile(*certOut, certPEM, 0o644); err != nil {
			return fmt.Errorf("cannot write --cert-out: %v", err)
		}
	}
	tlsConf := &tls.Config{
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{alpn},
		MinVersion:   tls.VersionTLS13,
	}
	if *useH3 {
		tlsConf.NextProtos = []string{http3.NextProtoH3}
	}
	ln, err := quic.ListenAddr(*listen, tlsConf, quicConfig())
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %v", *listen, err)
	}
	fmt.Fprintf(os.Stderr, "quic-go-peer: listening on %s serving %s\n", ln.Addr(), dir)
	if *useH3 {
		return (&http3.Server{Handler: fileHandler(dir)}).ServeListener(ln)
	}
	for {
		conn, err := ln.Accept(context.Background())
		if err != nil {
			return err
		}
		go serveConn(conn, dir)
	}
}

// selfSigned makes a certificate for localhost, 127.0.0.1, ::1 and ip (unless unspecified).
func selfSigned(ip net.IP) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		ips = append(ips, ip)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "quic-go-peer"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		DNSNames:     []string{"localhost"},
		IPAddresses:  ips,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("cannot make a certificate: %v", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, certPEM, nil
}

// serveConn answers the connection's requests until the client closes it.
func serveConn(conn *quic.Conn, root string) {
	for {
		str, err := conn.AcceptStream(context.Background())
		if err != nil {
			return
		}
		go serveStream(str, root)
	}
}

// serveStream reads `GET /path` (ended by CRLF or the stream's end) and sends the file, or
// resets the stream with 0x404 (not found) or 0x400 (not a request).
func serveStream(str *quic.Stream, root string) {
	var req []byte
	buf := make([]byte, 1024)
	for !bytes.Contains(req, []byte("\n")) && len(req) <= maxRequest {
		n, err := str.Read(buf)
		req = append(req, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			return
		}
	}
	path, ok := parseRequest(req)
	if !ok {
		str.CancelWrite(codeBadRequest)
		return
	}
	file, ok := resolve(root, path)
	if !ok {
		str.CancelWrite(codeNotFound)
		return
	}
	f, err := os.Open(file)
	if err != nil {
		str.CancelWrite(codeNotFound)
		return
	}
	defer f.Close()
	if _, err := io.Copy(str, f); err != nil {
		fmt.Fprintf(os.Stderr, "quic-go-peer: sending %s failed: %v\n", path, err)
		return
	}
	str.Close()
}

// fileHandler answers HTTP/3 GET and HEAD requests with the files under root (404 if missing).
func fileHandler(root string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		file, ok := resolve(root, r.URL.Path)
		if !ok {
			http.NotFound(w, r)
			return
		}
		f, err := os.Open(file)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		http.ServeContent(w, r, "", time.Time{}, f) // HEAD, Content-Length and ranges
	})
}

func parseRequest(req []byte) (string, bool) {
	if len(req) > maxRequest {
		return "", false
	}
	line, _, _ := strings.Cut(string(req), "\n")
	path, ok := strings.CutPrefix(line, "GET ")
	path = strings.TrimSpace(path)
	return path, ok && strings.HasPrefix(path, "/")
}

// resolve gives the regular file under root (a real path) that path names, refusing `..`
// and symbolic links that lead out of the root.
func resolve(root, path string) (string, bool) {
	rel := strings.TrimLeft(path, "/")
	for _, part := range strings.Split(rel, "/") {
		if part == "" || part == "." || part == ".." {
			return "", false
		}
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, rel))
	if err != nil || !strings.HasPrefix(real, root+string(filepath.Separator)) {
		return "", false
	}
	st, err := os.Stat(real)
	return real, err == nil && st.Mode().IsRegular()
}

type result struct {
	bytes int64
	took  time.Duration
	sha   string
	err   error
}

func runClient(args []string) (int, error) {
	fs := newFlags("client")
	insecure := fs.Bool("insecure", false, "do not verify the server's certificate")
	ca := fs.String("ca", "", "trust the PEM certificate(s) in FILE")
	useH3 := fs.Bool("http3", false, "GET over HTTP/3 (ALPN h3) instead of hq-interop")
	quicVersion := fs.Int("quic-version", 1, "QUIC version to speak from the first packet on: 1 or 2 (RFC 9369)")
	if err := fs.Parse(args); err != nil {
		return 0, fmt.Errorf("client: %v (usage: client [--http3] [--quic-version 1|2] [--insecure | --ca FILE] URL...)", err)
	}
	conf := quicConfig()
	switch *quicVersion {
	case 1:
	case 2:
		conf.Versions = []quic.Version{quic.Version2}
	default:
		return 0, fmt.Errorf("--quic-version %d: QUIC version 1 or 2", *quicVersion)
	}
	if fs.NArg() == 0 {
		return 0, errors.New("client needs at least one URL: https://HOST:PORT/PATH")
	}
	var host, port string
	var paths []string
	for _, raw := range fs.Args() {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "https" || u.Hostname() == "" {
			return 0, fmt.Errorf("invalid URL %q: expected https://HOST:PORT/PATH", raw)
		}
		p := u.Port()
		if p == "" {
			p = "443"
		}
		if host != "" && (u.Hostname() != host || p != port) {
			return 0, errors.New("all URLs must name the same server (they share one connection)")
		}
		host, port = u.Hostname(), p
		path := u.EscapedPath()
		if path == "" {
			path = "/"
		}
		paths = append(paths, path)
	}
	tlsConf := &tls.Config{NextProtos: []string{alpn}, ServerName: host, MinVersion: tls.VersionTLS13}
	if *useH3 {
		tlsConf.NextProtos = []string{http3.NextProtoH3}
	}
	switch {
	case *insecure && *ca != "":
		return 0, errors.New("--insecure and --ca exclude each other")
	case *insecure:
		tlsConf.InsecureSkipVerify = true
	case *ca != "":
		data, err := os.ReadFile(*ca)
		pool := x509.NewCertPool()
		if err != nil || !pool.AppendCertsFromPEM(data) {
			return 0, fmt.Errorf("cannot read PEM certificates from --ca %s", *ca)
		}
		tlsConf.RootCAs = pool
	default:
		return 0, errors.New("cannot verify the server's certificate: pass --ca FILE (e.g. written by the server's --cert-out) or --insecure")
	}

	start := time.Now()
	addr := net.JoinHostPort(host, port)
	conn, err := quic.DialAddr(context.Background(), addr, tlsConf, conf)
	if err != nil {
		var idle *quic.IdleTimeoutError
		var hs *quic.HandshakeTimeoutError
		hint := ""
		if errors.As(err, &idle) || errors.As(err, &hs) {
			hint = " (no answer: is a QUIC server listening there, and does UDP get through?)"
		} else if strings.Contains(err.Error(), "certificate") {
			hint = " (pass the server's own certificate with --ca, or --insecure)"
		}
		return 0, fmt.Errorf("cannot connect to %s: %v%s", addr, err, hint)
	}
	handshake := time.Since(start)
	var h3 *http3.ClientConn
	if *useH3 {
		h3 = (&http3.Transport{}).NewClientConn(conn)
	}
	results := make([]result, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if h3 != nil {
				results[i] = fetchH3(h3, fs.Arg(i), start)
			} else {
				results[i] = fetch(conn, p, start)
			}
		}()
	}
	wg.Wait()
	var total int64
	end, complete := handshake, 0
	for i, r := range results {
		if r.err != nil {
			fmt.Printf("%s  failed: %v\n", paths[i], r.err)
			continue
		}
		fmt.Printf("%s  %d bytes  %.3f s  %.1f Mb/s  sha256 %s\n", paths[i], r.bytes,
			r.took.Seconds(), mbps(r.bytes, r.took), r.sha)
		total += r.bytes
		end = max(end, r.took)
		complete++
	}
	fmt.Printf("total %d bytes in %.3f s (%.1f Mb/s goodput), handshake %.1f ms, %d of %d files\n",
		total, end.Seconds(), mbps(total, end), float64(handshake.Microseconds())/1000, complete, len(paths))
	if h3 != nil {
		conn.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeNoError), "done")
	} else {
		conn.CloseWithError(0, "done")
	}
	if complete < len(paths) {
		return 1, nil
	}
	return 0, nil
}

// fetch requests path on a new stream and hashes the answer.
func fetch(conn *quic.Conn, path string, start time.Time) result {
	str, err := conn.OpenStreamSync(context.Background())
	if err != nil {
		return result{err: err}
	}
	if _, err := str.Write([]byte("GET " + path + "\r\n")); err != nil {
		return result{err: err}
	}
	str.Close()
	h := sha256.New()
	n, err := io.Copy(h, str)
	if err != nil {
		var se *quic.StreamError
		if errors.As(err, &se) && se.ErrorCode == codeNotFound {
			err = errors.New("not found")
		}
		return result{err: err}
	}
	return result{bytes: n, took: time.Since(start), sha: hex.EncodeToString(h.Sum(nil))}
}

// fetchH3 GETs rawURL over the HTTP/3 connection and hashes the body of a 200 response.
func fetchH3(cc *http3.ClientConn, rawURL string, start time.Time) result {
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		return result{err: err}
	}
	rsp, err := cc.RoundTrip(req)
	if err != nil {
		return result{err: err}
	}
	defer rsp.Body.Close()
	if rsp.StatusCode != http.StatusOK {
		return result{err: fmt.Errorf("HTTP %d", rsp.StatusCode)}
	}
	h := sha256.New()
	n, err := io.Copy(h, rsp.Body)
	if err != nil {
		return result{err: err}
	}
	return result{bytes: n, took: time.Since(start), sha: hex.EncodeToString(h.Sum(nil))}
}

func mbps(n int64, d time.Duration) float64 {
	return float64(n) * 8 / max(d.Seconds(), 1e-9) / 1e6
}
