//! The Python client (`clients/python`) against the real binary: `scripts/python-client`
//! installs the package (non-editable) into a pinned virtual environment of its own and runs
//! its pytest suite, which starts this build's `opledger serve` on loopback.

use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Longest the whole run may take, the first creation of the virtual environment included
/// (the suite itself takes well under a minute).
const RUN_LIMIT: Duration = Duration::from_secs(600);

#[test]
fn the_python_client_passes_its_suite_against_the_real_binary() {
    let mut command = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/python-client"
    ));
    command.arg(env!("CARGO_BIN_EXE_opledger"));
    let output = run_within(command, RUN_LIMIT);
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "the Python client's suite failed ({}):\n{report}",
        output.status
    );
    // It ran tests: pytest's closing line counts some passed, and nothing failed.
    let closing = report
        .lines()
        .rev()
        .find(|l| l.contains(" passed"))
        .unwrap_or_default();
    let words: Vec<&str> = closing.split_whitespace().collect();
    let passed = words
        .iter()
        .position(|w| w.trim_end_matches(',') == "passed")
        .and_then(|at| words.get(at.checked_sub(1)?)?.parse::<u32>().ok());
    assert!(
        passed.is_some_and(|n| n > 0) && !closing.contains("failed") && !closing.contains("error"),
        "pytest's closing line does not say that tests passed and none failed: {closing:?}\n{report}"
    );
}

/// Runs `command` to its end, or kills it once `limit` has passed.
fn run_within(mut command: Command, limit: Duration) -> Output {
    // A group of its own, so that a run past the limit is killed with pytest and the server.
    let child = command
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts scripts/python-client");
    let pid = child.id();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match finished.recv_timeout(limit) {
        Ok(output) => output.expect("scripts/python-client ran"),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-9", "--", &format!("-{pid}")])
                .status();
            panic!("scripts/python-client took longer than {limit:?}");
        }
    }
}
