// The commit label (`BUILD_COMMIT`): included by the build script, which embeds it, and by
// the test that checks the embedded one is still the tree's.

/// `git ARGS`' output, trimmed; `None` when git is missing or fails.
fn git(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `abc1234`, `abc1234-dirty` when the tracked sources (crates/, Cargo.toml, Cargo.lock)
/// differ from it, `unknown` outside a git checkout.
fn commit_label() -> String {
    git(&["rev-parse", "--short=7", "HEAD"]).map_or_else(
        || "unknown".to_string(),
        |c| {
            // The sources only: results or docs edited beside a build do not change it.
            let dirty = git(&[
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ":/crates",
                ":/Cargo.toml",
                ":/Cargo.lock",
            ])
            .is_some_and(|s| !s.is_empty());
            if dirty { format!("{c}-dirty") } else { c }
        },
    )
}
