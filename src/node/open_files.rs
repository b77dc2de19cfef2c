//! The process's open-file limit. `serve` raises its soft limit towards the hard one, as
//! servers do: the common soft default of 1024 is below the default `connections_max` alone,
//! and past it `accept` fails with EMFILE while clients wait. The children it starts (MCP stdio
//! upstreams) get the soft limit it started with back, as programs expect (some close or poll
//! every descriptor up to the soft limit).

use std::sync::OnceLock;

/// Open files the node holds besides its connections: log segments and index files, sled's,
/// peers and MCP upstreams, the listener; more than these need on a typical node.
pub const FILES_BESIDE_CONNECTIONS: u64 = 256;

/// The highest soft limit the node raises itself to: enough for any `connections_max`
/// accepted, without taking a container's "unlimited" (about a billion) literally.
const RAISE_MAX: u64 = 1 << 20;

/// The soft limit the process started with, once [`raise`] changed it.
static STARTED_WITH: OnceLock<u64> = OnceLock::new();

/// Raises the soft open-file limit to the hard one (at most [`RAISE_MAX`]) and logs it; warns,
/// with what to do, when the limit it ends with is below `connections_max` plus
/// [`FILES_BESIDE_CONNECTIONS`]. Call once, at start, before any child is started.
pub fn raise(connections_max: usize) {
    let Some((soft, hard)) = imp::get() else {
        return;
    };
    let mut now = soft;
    let target = hard.min(RAISE_MAX);
    if soft < target && imp::set_soft(target, hard) {
        let _ = STARTED_WITH.set(soft);
        tracing::info!(from = soft, to = target, "open-file limit raised");
        now = target;
    }
    let needed = (connections_max as u64).saturating_add(FILES_BESIDE_CONNECTIONS);
    if now < needed {
        tracing::warn!(
            limit = now,
            connections_max,
            "the open-file limit is below connections_max plus about {FILES_BESIDE_CONNECTIONS} files the node holds: connections past it wait to be accepted; raise the hard limit (ulimit -Hn, LimitNOFILE=) or lower [limits] connections_max"
        );
    }
}

/// Makes a child started by `command` run with the soft limit the process started with, if
/// [`raise`] changed it.
pub fn restore_in_child(command: &mut tokio::process::Command) {
    if let Some(&soft) = STARTED_WITH.get() {
        imp::restore_in_child(command, soft);
    }
}

#[cfg(target_os = "linux")]
mod imp {
    /// `value` in another integer type, saturating (`rlim_t` is not u64 on every target).
    fn to<A: TryInto<B>, B>(value: A, max: B) -> B {
        value.try_into().unwrap_or(max)
    }

    /// The soft and hard limits.
    pub(super) fn get() -> Option<(u64, u64)> {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes only the struct passed by pointer.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
            return None;
        }
        Some((to(limit.rlim_cur, u64::MAX), to(limit.rlim_max, u64::MAX)))
    }

    /// Sets the soft limit, keeping the hard one; whether it took.
    pub(super) fn set_soft(soft: u64, hard: u64) -> bool {
        let limit = libc::rlimit {
            rlim_cur: to(soft, libc::rlim_t::MAX),
            rlim_max: to(hard, libc::rlim_t::MAX),
        };
        // SAFETY: setrlimit only reads the struct passed by pointer.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 }
    }

    pub(super) fn restore_in_child(command: &mut tokio::process::Command, soft: u64) {
        let soft = to(soft, libc::rlim_t::MAX);
        // SAFETY: between fork and exec the closure calls only getrlimit and setrlimit, which
        // are async-signal-safe, and allocates nothing.
        unsafe {
            command.pre_exec(move || {
                let mut limit = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
                    limit.rlim_cur = soft.min(limit.rlim_max);
                    // A child that keeps the raised limit still runs: ignore a refusal.
                    let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
                }
                Ok(())
            });
        }
    }
}

/// Elsewhere the limit is left as the system set it.
#[cfg(not(target_os = "linux"))]
mod imp {
    pub(super) fn get() -> Option<(u64, u64)> {
        None
    }

    pub(super) fn set_soft(_soft: u64, _hard: u64) -> bool {
        false
    }

    pub(super) fn restore_in_child(_command: &mut tokio::process::Command, _soft: u64) {}
}
