//! The client never reports a file it did not write whole (issue 49): `-o` is checked before
//! connecting, a file takes its name only once its response is complete, and a failure
//! leaves nothing behind, over loopback (QUIC and TCP) and through the emulator.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{QFEC, emulation_available, file_bytes, start_server, temp_dir};
use sha2::{Digest, Sha256};

/// A directory no file can be written in, for as long as it lives: a read-only tmpfs
/// mounted on it when this process is root (root writes through permission bits), its
/// permission bits otherwise.
struct ReadOnlyDir {
    path: PathBuf,
    mounted: bool,
}

impl ReadOnlyDir {
    fn new(name: &str) -> ReadOnlyDir {
        let path = temp_dir(name);
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        if root {
            let o = Command::new("mount")
                .args(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs"])
                .arg(&path)
                .output()
                .expect("run mount");
            assert!(
                o.status.success(),
                "cannot mount a read-only tmpfs on {}: {}",
                path.display(),
                String::from_utf8_lossy(&o.stderr)
            );
        } else {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o555)).unwrap();
        }
        ReadOnlyDir {
            path,
            mounted: root,
        }
    }
}

impl Drop for ReadOnlyDir {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(&self.path).status();
        }
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A server root with `a.txt` (4 bytes) and `big.bin` (`big` bytes).
fn served(name: &str, big: usize) -> (PathBuf, Vec<u8>) {
    let root = temp_dir(name);
    std::fs::write(root.join("a.txt"), b"abcd").unwrap();
    let data = file_bytes(big, 7);
    std::fs::write(root.join("big.bin"), &data).unwrap();
    (root, data)
}

fn client(extra: &[&str], out: &Path, urls: &[String]) -> Output {
    Command::new(QFEC)
        .args(["client", "--insecure", "-o"])
        .arg(out)
        .args(extra)
        .args(urls)
        .output()
        .unwrap()
}

/// Every entry of `dir` by name, sorted (hidden and temporary files too).
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The error is one line on standard error, and the run failed.
fn failed_with(o: &Output, expect: &str) -> String {
    let (stdout, stderr) = text(o);
    assert!(!o.status.success(), "should fail: {stdout} {stderr}");
    assert!(stderr.contains(expect), "expected {expect:?} in {stderr:?}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr:?}");
    stdout
}

#[test]
fn a_read_only_output_directory_is_refused_before_connecting() {
    let (root, _) = served("files-ro-root", 100_000);
    let server = start_server(&root, &[]);
    let ro = ReadOnlyDir::new("files-ro-out");
    let urls = [
        format!("https://{}/a.txt", server.addr),
        format!("https://{}/big.bin", server.addr),
    ];
    for tcp in [false, true] {
        let extra: &[&str] = if tcp { &["--tcp"] } else { &[] };
        let o = client(extra, &ro.path, &urls);
        let stdout = failed_with(&o, "cannot write in");
        assert!(stdout.is_empty(), "nothing reported as received: {stdout}");
        assert!(entries(&ro.path).is_empty());
    }
    // Nothing was asked of the server.
    assert!(
        !server
            .log
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("big.bin")),
        "{:?}",
        server.log.lock().unwrap()
    );
}

#[test]
fn a_directory_with_a_files_name_or_two_urls_with_one_name_are_refused() {
    let (root, _) = served("files-dir-root", 1000);
    let server = start_server(&root, &[]);
    let out = temp_dir("files-dir-out");
    std::fs::create_dir(out.join("big.bin")).unwrap();
    let o = client(
        &[],
        &out,
        &[
            format!("https://{}/a.txt", server.addr),
            format!("https://{}/big.bin", server.addr),
        ],
    );
    failed_with(&o, "a directory of that name is there");
    assert_eq!(entries(&out), ["big.bin"]);
    let o = client(
        &[],
        &out,
        &[
            format!("https://{}/a.txt", server.addr),
            format!("https://{}/x/a.txt", server.addr),
        ],
    );
    failed_with(&o, "would both be saved as");
    assert_eq!(entries(&out), ["big.bin"]);
    // -o below a file: said before connecting.
    std::fs::write(out.join("plain"), b"x").unwrap();
    let o = client(
        &[],
        &out.join("plain").join("sub"),
        &[format!("https://{}/a.txt", server.addr)],
    );
    failed_with(&o, "is not a directory");
}

/// A download cut by --timeout: the complete file is saved and reported, the cut one is
/// reported as failed with the bytes that came and leaves nothing (no truncated file under
/// its name, no temporary file), and the exit status is a failure.
#[test]
fn a_download_cut_by_the_timeout_leaves_nothing_and_says_so() {
    let (root, _) = served("files-cut-root", 10);
    // 4 GB that take no disk (a sparse file): none of it arrives within the timeout.
    std::fs::File::create(root.join("big.bin"))
        .unwrap()
        .set_len(4_000_000_000)
        .unwrap();
    let quic = start_server(&root, &[]);
    let tcp_server = start_server(&root, &["--tcp"]);
    for tcp in [false, true] {
        let server = if tcp { &tcp_server } else { &quic };
        let out = temp_dir(if tcp {
            "files-cut-tcp"
        } else {
            "files-cut-quic"
        });
        let extra: &[&str] = if tcp {
            &["--tcp", "--timeout", "300ms"]
        } else {
            &["--timeout", "300ms"]
        };
        let o = client(
            extra,
            &out,
            &[
                format!("https://{}/a.txt", server.addr),
                format!("https://{}/big.bin", server.addr),
            ],
        );
        let stdout = failed_with(&o, "timed out after 0.3 s (--timeout)");
        assert!(stdout.contains("/a.txt  4 bytes"), "{stdout}");
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("/big.bin  failed: timed out")),
            "{stdout}"
        );
        assert_eq!(entries(&out), ["a.txt"], "tcp: {tcp}");
        assert_eq!(std::fs::read(out.join("a.txt")).unwrap(), b"abcd");
    }
}

/// A connection that never comes up creates nothing: not the files, not the directory.
#[test]
fn a_connection_that_fails_creates_nothing() {
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let parent = temp_dir("files-nothing");
    let out = parent.join("new");
    let o = client(
        &["--timeout", "500ms"],
        &out,
        &[
            format!("https://{addr}/a.txt"),
            format!("https://{addr}/b.txt"),
        ],
    );
    let stdout = failed_with(&o, "no answer from");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(entries(&parent).is_empty(), "{:?}", entries(&parent));
    // A server that speaks neither protocol the client offers (the interop server of the
    // transfer case speaks hq-interop only): the handshake fails, nothing is created.
    let (root, _) = served("files-alpn-root", 10);
    let certs = temp_dir("files-alpn-certs");
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(certs.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(certs.join("priv.key"), ck.key_pair.serialize_pem()).unwrap();
    let mut server = Command::new(QFEC)
        .args(["interop", "--listen", "127.0.0.1:0"])
        .env("ROLE", "server")
        .env("TESTCASE", "transfer")
        .env("WWW", &root)
        .env("CERTS", &certs)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(server.stderr.take().unwrap()));
    let addr = loop {
        let line = lines.next().expect("the interop server exited").unwrap();
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let o = client(
        &["--timeout", "5", "--alpn", "h3"],
        &out,
        &[format!("https://{addr}/a.txt")],
    );
    let _ = server.kill();
    let _ = server.wait();
    let stdout = failed_with(&o, "failed");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(entries(&parent).is_empty(), "{:?}", entries(&parent));
}

/// A file the server does not have is reported as failed and leaves no file.
#[test]
fn a_missing_file_leaves_no_file() {
    let (root, _) = served("files-404-root", 10);
    let server = start_server(&root, &[]);
    let out = temp_dir("files-404");
    for alpn in ["h3", "hq-interop"] {
        let o = client(
            &["--alpn", alpn],
            &out,
            &[
                format!("https://{}/a.txt", server.addr),
                format!("https://{}/nothere", server.addr),
            ],
        );
        let (stdout, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{stdout} {stderr}");
        assert!(stdout.contains("/nothere  failed"), "{stdout}");
        assert!(stdout.contains("1 of 2 files"), "{stdout}");
        assert_eq!(entries(&out), ["a.txt"]);
    }
}

#[test]
fn a_complete_download_is_saved_whole_with_the_users_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let (root, data) = served("files-ok-root", 3_000_000);
    let server = start_server(&root, &[]);
    let out = temp_dir("files-ok").join("made-on-demand");
    let o = client(
        &["--sha256"],
        &out,
        &[
            format!("https://{}/a.txt", server.addr),
            format!("https://{}/big.bin", server.addr),
        ],
    );
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout} {stderr}");
    assert!(stdout.contains("2 of 2 files"), "{stdout}");
    assert_eq!(entries(&out), ["a.txt", "big.bin"]);
    assert_eq!(
        Sha256::digest(std::fs::read(out.join("big.bin")).unwrap()),
        Sha256::digest(&data)
    );
    // Not the 0600 of a temporary file: what the umask leaves of rw-rw-rw-.
    let mode = std::fs::metadata(out.join("big.bin"))
        .unwrap()
        .permissions()
        .mode();
    assert_ne!(mode & 0o044, 0, "mode {mode:o}");
}

/// Through the emulator: the same refusal of a read-only directory, from inside the
/// client's namespace, and nothing crosses the link for it.
#[test]
fn through_the_emulator_a_read_only_directory_is_refused_before_connecting() {
    if !emulation_available() {
        return;
    }
    // 5 MB: four seconds at the preset's 10 Mb/s.
    let (root, _) = served("files-emu-root", 5_000_000);
    let ro = ReadOnlyDir::new("files-emu-ro");
    let server = format!(
        "exec {QFEC} server --listen $QFEC_EMU_SERVER:4433 --root {}",
        root.display()
    );
    let o = Command::new(QFEC)
        .args(["emu", "--preset", "interop", "--server", &server])
        .args(["--", QFEC, "client", "--insecure", "--timeout", "30", "-o"])
        .arg(&ro.path)
        .arg("https://10.77.0.1:4433/big.bin")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&o);
    assert!(!o.status.success(), "{stdout} {stderr}");
    assert!(stderr.contains("cannot write in"), "{stderr}");
    assert!(!stdout.contains("1 of 1 files"), "{stdout}");
    assert!(entries(&ro.path).is_empty());
    // And a download cut by the timeout there leaves nothing under its name.
    let out = temp_dir("files-emu-cut");
    let o = Command::new(QFEC)
        .args(["emu", "--preset", "interop", "--server", &server])
        .args(["--", QFEC, "client", "--insecure", "--timeout", "1", "-o"])
        .arg(&out)
        .arg("https://10.77.0.1:4433/big.bin")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&o);
    assert!(!o.status.success(), "{stdout} {stderr}");
    assert!(stdout.contains("/big.bin  failed: timed out"), "{stdout}");
    assert!(entries(&out).is_empty(), "{:?}", entries(&out));
}
