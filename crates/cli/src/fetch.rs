//! What the QUIC client (`hq/`) and the kernel-TCP client (`tcp/`) share: URLs, where a
//! download goes (a file, a hash), the report's lines, the runtime. Neither client module
//! depends on the other.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// A current-thread tokio runtime for one client or server.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start tokio")
}

/// A URL split into what the client needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub host: String,
    pub port: u16,
    pub path: String,
}

pub fn parse_url(s: &str) -> Result<Url> {
    let rest = s
        .strip_prefix("https://")
        .with_context(|| format!("invalid URL {s:?}: expected https://HOST:PORT/PATH"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let end = v6
            .find(']')
            .with_context(|| format!("invalid URL {s:?}: unclosed '['"))?;
        let port = v6[end + 1..].strip_prefix(':').unwrap_or("443");
        (v6[..end].to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p),
            None => (authority.to_string(), "443"),
        }
    };
    if host.is_empty() {
        bail!("invalid URL {s:?}: no host");
    }
    let port = port
        .parse()
        .with_context(|| format!("invalid URL {s:?}: bad port {port:?}"))?;
    Ok(Url {
        host,
        port,
        path: path.to_string(),
    })
}

/// The first URL and the address of the one server all `urls` name.
pub fn one_server(urls: &[Url]) -> Result<(Url, SocketAddr)> {
    let first = urls.first().context("no URL to fetch")?.clone();
    if urls
        .iter()
        .any(|u| u.host != first.host || u.port != first.port)
    {
        bail!("all URLs must name the same server (one connection); got several hosts");
    }
    let remote = (first.host.as_str(), first.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {}", first.host))?
        .next()
        .with_context(|| format!("no address for {}", first.host))?;
    Ok((first, remote))
}

/// What to do about a TLS error `text` that concerns the server's certificate, as a
/// parenthesis to append; empty for other errors.
pub fn certificate_hint(text: &str, server_name: &str) -> String {
    if text.contains("NotValidForName") || text.contains("not valid for name") {
        format!(
            " (the certificate does not hold the name {server_name:?}: use a URL with a name \
             it holds, or --server-name NAME)"
        )
    } else if ["UnknownIssuer", "BadSignature", "CaUsedAsEndEntity"]
        .iter()
        .any(|k| text.contains(k))
    {
        " (the certificate is neither the one given with --ca nor signed by it: pass the \
         server's own certificate, e.g. written by qfec server --cert-out FILE)"
            .to_string()
    } else if text.contains("Expired") || text.contains("NotValidYet") {
        " (the certificate is outside its validity dates)".to_string()
    } else {
        String::new()
    }
}

/// The name a download is saved under: the URL path's last segment, or index.html.
pub fn output_name(path: &str) -> &str {
    path.rsplit('/')
        .next()
        .filter(|n| !n.is_empty())
        .unwrap_or("index.html")
}

/// What a download's thread is told: bytes of the body, or that the body is complete and
/// verified, so that the file takes its final name.
pub enum SinkMsg {
    Data(bytes::Bytes),
    Commit,
}

/// Where a download is saved: its final path, written first under a temporary name in the
/// same directory and renamed only once the response is complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaveAs {
    pub path: PathBuf,
}

/// The files `urls` are saved as in `dir` (`-o`), checked before any connection and
/// without creating anything: the directory (or, while it does not exist, the nearest
/// directory above it, where it will be created) takes a new file, no two URLs end in the
/// same name, and no directory holds a file's name. A one-line error otherwise.
pub fn prepare_output(dir: &Path, urls: &[Url]) -> Result<Vec<SaveAs>> {
    let dir_text = dir.display();
    let existing = dir
        .ancestors()
        .find(|a| a.as_os_str().is_empty() || a.exists())
        .map(|a| {
            if a.as_os_str().is_empty() {
                Path::new(".")
            } else {
                a
            }
        })
        .unwrap_or(Path::new("."));
    if !existing.is_dir() {
        bail!(
            "cannot save into {dir_text}: {} is not a directory (choose another -o)",
            existing.display()
        );
    }
    // A probe file, removed at once: a read-only or full file system says so now, not after
    // the transfer.
    let probe = existing.join(format!(".qfec-probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot write in {}: {e} (choose another output directory with -o)",
                existing.display()
            )
        })?;
    let _ = std::fs::remove_file(&probe);
    let mut seen: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    let mut out = Vec::with_capacity(urls.len());
    for url in urls {
        let name = output_name(&url.path);
        if let Some(other) = seen.insert(name, &url.path) {
            bail!(
                "{other} and {} would both be saved as {}: fetch them in separate runs or \
                 into separate directories",
                url.path,
                dir.join(name).display()
            );
        }
        let path = dir.join(name);
        if path.is_dir() {
            bail!(
                "cannot save {} as {}: a directory of that name is there (remove it or \
                 choose another -o)",
                url.path,
                path.display()
            );
        }
        out.push(SaveAs { path });
    }
    Ok(out)
}

/// A download's bytes go to a thread of their own that saves them (to a temporary file
/// beside `save_as`, created when the first message comes, so nothing is created before
/// the connection delivers) and, with `sha256`, hashes them. The file takes its final name
/// on [`SinkMsg::Commit`]; if the sender is dropped without it, or anything fails, the
/// temporary file is removed. The thread returns the digest (None without `sha256`), or
/// an error that names the path.
pub fn spawn_sink(
    save_as: Option<SaveAs>,
    sha256: bool,
) -> (
    std::sync::mpsc::Sender<SinkMsg>,
    std::thread::JoinHandle<Result<Option<String>, String>>,
) {
    let (tx, rx) = std::sync::mpsc::channel::<SinkMsg>();
    let handle = std::thread::spawn(move || {
        let mut hash = sha256.then(|| ring::digest::Context::new(&ring::digest::SHA256));
        let mut file: Option<tempfile::NamedTempFile> = None;
        let open = |target: &SaveAs| -> Result<tempfile::NamedTempFile, String> {
            let dir = target.path.parent().unwrap_or(Path::new("."));
            let name = target
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            // Read and write for all, less the umask, as a file the user creates.
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create the directory {}: {e}", dir.display()))?;
            tempfile::Builder::new()
                .prefix(&format!(".{name}."))
                .suffix(".part")
                .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
                .tempfile_in(dir)
                .map_err(|e| format!("cannot create a file in {}: {e}", dir.display()))
        };
        for msg in rx {
            if file.is_none()
                && let Some(target) = &save_as
            {
                file = Some(open(target)?);
            }
            match msg {
                SinkMsg::Data(chunk) => {
                    if let Some(h) = hash.as_mut() {
                        h.update(&chunk);
                    }
                    if let (Some(f), Some(target)) = (file.as_mut(), &save_as) {
                        f.write_all(&chunk)
                            .map_err(|e| format!("cannot write {}: {e}", target.path.display()))?;
                    }
                }
                SinkMsg::Commit => {
                    if let (Some(f), Some(target)) = (file.take(), &save_as) {
                        f.persist(&target.path).map_err(|e| {
                            format!("cannot save {}: {}", target.path.display(), e.error)
                        })?;
                    }
                    return Ok(hash.map(|h| hex(h.finish().as_ref())));
                }
            }
        }
        // The sender went away without a commit: the download failed; the temporary file
        // goes with `file`.
        Err("incomplete: nothing saved".to_string())
    });
    (tx, handle)
}

/// A fetch that failed as a whole (the connection, or the time limit): the lines of the
/// files that were under way, each saying what became of it, and the error.
#[derive(Debug)]
pub struct FetchFailed {
    pub lines: Vec<String>,
    pub error: String,
}

impl std::fmt::Display for FetchFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.error)
    }
}

impl std::error::Error for FetchFailed {}

/// Prints the lines of a fetch that failed as a whole, if `e` is one; the error itself is
/// the caller's to report.
pub fn print_failed_lines(e: &anyhow::Error) {
    if let Some(f) = e.downcast_ref::<FetchFailed>() {
        for l in &f.lines {
            println!("{l}");
        }
    }
}

/// A downloaded file's line of a client's report (`secs` since the connection started).
pub fn file_line(path: &str, bytes: u64, secs: f64, sha256: Option<&str>) -> String {
    let hash = sha256.map(|h| format!("  sha256 {h}")).unwrap_or_default();
    format!(
        "{path}  {bytes} bytes  {secs:.3} s  {:.1} Mb/s{hash}",
        mbps(bytes, secs)
    )
}

/// A failed file's line of a client's report.
pub fn failed_line(path: &str, error: &str) -> String {
    format!("{path}  failed: {error}")
}

/// The closing line of a client's report; `note` follows the handshake time.
pub fn total_line(
    bytes: u64,
    secs: f64,
    handshake_ms: f64,
    note: &str,
    complete: usize,
    files: usize,
) -> String {
    format!(
        "total {bytes} bytes in {secs:.3} s ({:.1} Mb/s goodput), handshake {handshake_ms:.1} \
         ms{note}, {complete} of {files} files",
        mbps(bytes, secs)
    )
}

pub fn mbps(bytes: u64, secs: f64) -> f64 {
    bytes as f64 * 8.0 / secs.max(1e-9) / 1e6
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
