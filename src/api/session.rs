//! Console sessions: what the `opledger_ui` cookie stands for. A session names the token it was
//! opened with (by its hash), so the principal is looked up again on every request: a config
//! reload that revokes the token or changes its roles ends or changes the session at once.
//!
//! Sessions live in memory only (a restart signs everyone out) and end after an idle hour or
//! twelve hours in all. The node keeps the SHA-256 of each session value, never the value, so
//! memory holds nothing a browser could present.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The cookie's name.
pub const COOKIE: &str = "opledger_ui";
/// The header every request from the console carries; a session cookie without it is refused,
/// so a form or link from another site (which cannot set headers) never acts with it.
pub const CONSOLE_HEADER: &str = "x-opledger-console";
/// A session unused this long ends.
pub const IDLE_MAX: Duration = Duration::from_secs(60 * 60);
/// A session ends this long after sign-in, used or not.
pub const LIFETIME_MAX: Duration = Duration::from_secs(12 * 60 * 60);
/// Most sessions kept at once; signing in beyond it ends the least recently used one.
pub const SESSIONS_MAX: usize = 4096;

struct Session {
    token_hash: [u8; 32],
    opened: Instant,
    used: Instant,
}

/// The open sessions.
#[derive(Default)]
pub struct Sessions {
    by_hash: Mutex<HashMap<[u8; 32], Session>>,
}

fn hash(value: &str) -> [u8; 32] {
    Sha256::digest(value.as_bytes()).into()
}

impl Sessions {
    /// Opens a session for the token of hash `token_hash`; returns the cookie's value: 244
    /// random bits from the operating system (two version-4 UUIDs), as hex.
    pub fn open(&self, token_hash: [u8; 32], now: Instant) -> String {
        let value = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let mut sessions = self.lock();
        sessions.retain(|_, s| live(s, now));
        if sessions.len() >= SESSIONS_MAX
            && let Some(oldest) = sessions.iter().min_by_key(|(_, s)| s.used).map(|(k, _)| *k)
        {
            sessions.remove(&oldest);
        }
        sessions.insert(
            hash(&value),
            Session {
                token_hash,
                opened: now,
                used: now,
            },
        );
        value
    }

    /// The token hash of a live session, marking it used; `None` if it is unknown or ended.
    pub fn token_of(&self, value: &str, now: Instant) -> Option<[u8; 32]> {
        let key = hash(value);
        let mut sessions = self.lock();
        let session = sessions.get_mut(&key)?;
        if !live(session, now) {
            sessions.remove(&key);
            return None;
        }
        session.used = now;
        Some(session.token_hash)
    }

    /// Ends a session (signing out); ending an unknown one does nothing.
    pub fn close(&self, value: &str) {
        self.lock().remove(&hash(value));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Session>> {
        self.by_hash
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn live(session: &Session, now: Instant) -> bool {
    now.saturating_duration_since(session.used) < IDLE_MAX
        && now.saturating_duration_since(session.opened) < LIFETIME_MAX
}

/// The value of cookie `name` in a `Cookie` header (`a=1; b=2`).
pub fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name)
            .then_some(v.trim_matches('"'))
            .filter(|v| !v.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_names_its_token_until_it_idles_out_or_grows_too_old() {
        let sessions = Sessions::default();
        let start = Instant::now();
        let value = sessions.open([7; 32], start);
        assert_eq!(value.len(), 64);
        assert_eq!(sessions.token_of(&value, start), Some([7; 32]));
        assert_eq!(sessions.token_of("not-a-session", start), None);
        // Used every 50 minutes it stays, until twelve hours in all.
        let mut at = start;
        while at + Duration::from_secs(50 * 60) < start + LIFETIME_MAX {
            at += Duration::from_secs(50 * 60);
            assert_eq!(sessions.token_of(&value, at), Some([7; 32]));
        }
        assert_eq!(sessions.token_of(&value, start + LIFETIME_MAX), None);
        // Idle for an hour, it ends.
        let other = sessions.open([8; 32], start);
        assert_eq!(sessions.token_of(&other, start + IDLE_MAX), None);
        // Closed, it ends.
        let third = sessions.open([9; 32], start);
        sessions.close(&third);
        assert_eq!(sessions.token_of(&third, start), None);
    }

    #[test]
    fn two_sessions_never_share_a_value() {
        let sessions = Sessions::default();
        let now = Instant::now();
        assert_ne!(sessions.open([1; 32], now), sessions.open([1; 32], now));
    }

    #[test]
    fn beyond_the_most_sessions_the_least_recently_used_ends() {
        let sessions = Sessions::default();
        let start = Instant::now();
        let first = sessions.open([1; 32], start);
        let second = sessions.open([2; 32], start + Duration::from_millis(1));
        for i in 2..SESSIONS_MAX {
            sessions.open([3; 32], start + Duration::from_millis(i as u64));
        }
        // The first is used again: the second is now the least recently used (all are live).
        let later = start + Duration::from_millis(SESSIONS_MAX as u64);
        assert!(sessions.token_of(&first, later).is_some());
        sessions.open([4; 32], later);
        assert!(sessions.token_of(&first, later).is_some());
        assert!(sessions.token_of(&second, later).is_none());
    }

    #[test]
    fn a_cookie_is_found_among_others() {
        assert_eq!(cookie("a=1; opledger_ui=abc; b=2", COOKIE), Some("abc"));
        assert_eq!(cookie("opledger_ui=\"abc\"", COOKIE), Some("abc"));
        assert_eq!(cookie("x_opledger_ui=abc", COOKIE), None);
        assert_eq!(cookie("opledger_ui=", COOKIE), None);
    }
}
