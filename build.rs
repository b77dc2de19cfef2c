//! Records the commit the binary is built from, for `opledger --version`: `OPLEDGER_COMMIT`
//! when the build sets it (a packager's tarball), else this checkout's HEAD, else `unknown`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What `git ARGS` prints in this crate's directory, trimmed, if it succeeds.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=OPLEDGER_COMMIT");
    println!("cargo:rerun-if-changed=build.rs");
    if let Ok(commit) = std::env::var("OPLEDGER_COMMIT") {
        println!("cargo:rustc-env=OPLEDGER_COMMIT={commit}");
        return;
    }
    // Only this crate's own checkout: a tarball unpacked inside another repository is not it.
    let own = git(&["rev-parse", "--show-toplevel"]).is_some_and(|top| {
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).canonicalize().ok();
        PathBuf::from(top).canonicalize().ok() == here
    });
    let commit = own
        .then(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .flatten()
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=OPLEDGER_COMMIT={commit}");
    if own {
        // A new commit moves HEAD, or the branch it names (loose, or packed): only those, so
        // that other branches moving rebuild nothing.
        let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])];
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watched.push(git(&["rev-parse", "--git-path", &branch]));
        }
        watched.push(git(&["rev-parse", "--git-path", "packed-refs"]));
        for path in watched.into_iter().flatten() {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
}
