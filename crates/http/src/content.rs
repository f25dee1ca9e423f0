//! What a server serves: bodies by path. [`Files`] serves a directory, [`Memory`] bodies
//! held in memory.

use std::fs::File;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use bytes::Bytes;

/// The bodies a server can answer with, by request path.
pub trait Content {
    /// The body at `path` (starting with `/`), or None: not found.
    fn open(&self, path: &str) -> Option<Box<dyn Body>>;
}

/// A response body, read in chunks as the connection can take them.
pub trait Body {
    /// Its length in bytes, as announced (content-length).
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Up to `max` more bytes; empty at the end.
    fn read(&mut self, max: usize) -> std::io::Result<Bytes>;
}

/// The files under a root directory.
pub struct Files {
    root: PathBuf,
}

impl Files {
    /// Serves `root`, which must exist (it is made canonical here).
    pub fn new(root: &Path) -> std::io::Result<Self> {
        Ok(Files {
            root: root.canonicalize()?,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// Maps a request path to a file under `root` (canonical), refusing anything that escapes
/// it: `..` in the request, and symbolic links that lead outside the root.
pub fn resolve_path(root: &Path, request: &str) -> Option<PathBuf> {
    let rel = request.trim_start_matches('/');
    let rel = Path::new(rel);
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    let p = root.join(rel).canonicalize().ok()?;
    (p.starts_with(root) && p.is_file()).then_some(p)
}

struct FileBody {
    file: File,
    len: u64,
}

impl Body for FileBody {
    fn len(&self) -> u64 {
        self.len
    }

    fn read(&mut self, max: usize) -> std::io::Result<Bytes> {
        let mut buf = vec![0u8; max];
        let n = self.file.read(&mut buf)?;
        buf.truncate(n);
        Ok(buf.into())
    }
}

impl Content for Files {
    fn open(&self, path: &str) -> Option<Box<dyn Body>> {
        let p = resolve_path(&self.root, path)?;
        let file = File::open(p).ok()?;
        let len = file.metadata().ok()?.len();
        Some(Box::new(FileBody { file, len }))
    }
}

/// Bodies held in memory, by path: for tests and generated content.
#[derive(Default, Clone)]
pub struct Memory {
    files: std::collections::BTreeMap<String, Bytes>,
}

impl Memory {
    /// Serves `body` at `path` (starting with `/`).
    pub fn insert(&mut self, path: &str, body: impl Into<Bytes>) {
        self.files.insert(path.to_string(), body.into());
    }
}

struct MemoryBody(Bytes);

impl Body for MemoryBody {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }

    fn read(&mut self, max: usize) -> std::io::Result<Bytes> {
        Ok(self.0.split_to(max.min(self.0.len())))
    }
}

impl Content for Memory {
    fn open(&self, path: &str) -> Option<Box<dyn Body>> {
        let body = self.files.get(path)?.clone();
        Some(Box::new(MemoryBody(body)))
    }
}
