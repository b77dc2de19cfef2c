//! `opledger demo`: a simulated agent fleet against a fresh ledger, and what happened.

use super::runtime;
use anyhow::Context;
use std::path::PathBuf;

/// Runs the demo in `data_dir` (a temporary directory, removed afterwards, without one).
pub fn demo(options: opledger::demo::DemoOptions, data_dir: Option<PathBuf>) -> anyhow::Result<()> {
    opledger::telemetry::init(Some("warn"), opledger::telemetry::LogFormat::Text);
    let temporary = data_dir.is_none();
    let dir = data_dir.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("opledger-demo-{}", uuid::Uuid::new_v4().simple()))
    });
    // Its config names the directory: absolute, so the commands it prints work from anywhere.
    let dir = std::path::absolute(&dir)
        .with_context(|| format!("cannot resolve the data directory {}", dir.display()))?;
    // Its counts would mix with the earlier run's, and its writes with another node's.
    let config = dir.join(opledger::demo::CONFIG_FILE);
    if dir.join("log").exists() || dir.join("projection").exists() || config.exists() {
        anyhow::bail!(
            "{} already holds a ledger or a config (an earlier demo's, or a node's): the demo would mix with it or overwrite it. Pass a new or empty --data-dir",
            dir.display()
        );
    }
    let kept = if temporary {
        "removed afterwards; pass --data-dir DIR to keep it"
    } else {
        "kept afterwards"
    };
    eprintln!(
        "opledger demo: {} agents x {} intents (seed {}), ledger in {} ({kept})",
        options.agents,
        options.intents,
        options.seed,
        dir.display()
    );
    let report = runtime()?.block_on(opledger::demo::run(&dir, options));
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let report = report?;
    println!("{}", opledger::demo::render(&report));
    if !temporary {
        println!(
            "The demo's ledger is kept in {}. Its cases sent to an operator:\n  opledger export --config {} --state-now manual",
            dir.display(),
            config.display()
        );
    }
    if report.second_side_effects > 0 {
        anyhow::bail!(
            "{} intents had a second side effect",
            report.second_side_effects
        );
    }
    Ok(())
}
