//! Embeds the git commit the lab was built from (`QFEC_COMMIT`), which reproduction reports
//! name: `abc1234`, `abc1234-dirty` when the workspace's tracked sources (crates/,
//! Cargo.toml, Cargo.lock) differed from it at build time, or `unknown` outside a git
//! checkout (a source archive, a wheel built from one).

use std::path::Path;

include!("commit_label.rs");

fn main() {
    let commit = commit_label();
    println!("cargo:rustc-env=QFEC_COMMIT={commit}");
    // Rebuilt when HEAD moves (a commit, a checkout) and when any tracked source the label
    // covers changes: every crate (a directory is scanned whole), the manifest and the lock.
    // Watching this crate alone kept a `-dirty` label after the tree went back to its commit
    // (a change in another crate rebuilt the lab, its reversal did not).
    for watched in ["..", "../../Cargo.toml", "../../Cargo.lock"] {
        println!("cargo:rerun-if-changed={watched}");
    }
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let dir = Path::new(&dir);
        // refs/heads too: a commit after `git pack-refs` writes a loose ref it names.
        let mut watched = vec![
            dir.join("HEAD"),
            dir.join("packed-refs"),
            dir.join("refs").join("heads"),
        ];
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watched.push(dir.join(r));
        }
        // Cargo takes a watched file that does not exist as changed on every build (a
        // checkout without packed refs rebuilt the lab and everything above it each time).
        for file in watched.iter().filter(|f| f.exists()) {
            println!("cargo:rerun-if-changed={}", file.display());
        }
    }
}
