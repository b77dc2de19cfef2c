//! Words and numbers as the commands print them, and printing that survives a closed pipe.

use std::io::Write;

/// `n` things, in the singular for one.
pub fn counted(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// A duration in ms as the config writes it: in its largest whole unit (`48h`, `30s`).
pub fn duration(ms: u64) -> String {
    match ms {
        0 => "0s".to_owned(),
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms % 1_000 == 0 => format!("{}s", ms / 1_000),
        ms => format!("{ms}ms"),
    }
}

/// Writes `bytes` to stdout. A reader that went away (`| head`) is no error: it has what it
/// wanted.
pub fn out(bytes: &[u8]) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_the_config_writes_them() {
        let shown: Vec<String> = [0, 1_500, 30_000, 90 * 60_000, 48 * 3_600_000]
            .into_iter()
            .map(duration)
            .collect();
        assert_eq!(shown, ["0s", "1500ms", "30s", "90m", "48h"]);
        assert_eq!(counted(1, "tool"), "1 tool");
        assert_eq!(counted(2, "tool"), "2 tools");
        assert_eq!(counted(0, "tool"), "0 tools");
    }
}
