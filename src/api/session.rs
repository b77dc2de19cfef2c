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
/// Most sessions kept at once; beyond it a sign-in is refused until some end (rather than
/// ending someone else's).
pub const SESSIONS_MAX: usize = 4096;
/// Most sessions of one token; signing in beyond it ends that token's least recently used one.
pub const SESSIONS_PER_TOKEN_MAX: usize = 8;

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
    /// random bits from the operating system (two version-4 UUIDs), as hex. `None` when
    /// [`SESSIONS_MAX`] sessions are open.
    pub fn open(&self, token_hash: [u8; 32], now: Instant) -> Option<String> {
        let value = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let mut sessions = self.lock();
        sessions.retain(|_, s| live(s, now));
        let oldest_of_token = sessions
            .iter()
            .filter(|(_, s)| s.token_hash == token_hash)
            .min_by_key(|(_, s)| s.used)
            .map(|(k, _)| *k);
        let of_token = sessions
            .values()
            .filter(|s| s.token_hash == token_hash)
            .count();
        if of_token >= SESSIONS_PER_TOKEN_MAX
            && let Some(oldest) = oldest_of_token
        {
            sessions.remove(&oldest);
        }
        if sessions.len() >= SESSIONS_MAX {
            return None;
        }
        sessions.insert(
            hash(&value),
            Session {
                token_hash,
                opened: now,
                used: now,
            },
        );
        Some(value)
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

/// The values of cookie `name` in a `Cookie` header (`a=1; b=2`).
pub fn cookies<'a>(header: &'a str, name: &'a str) -> impl Iterator<Item = &'a str> {
    header.split(';').filter_map(move |pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name)
            .then_some(v.trim_matches('"'))
            .filter(|v| !v.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(sessions: &Sessions, token: u8, at: Instant) -> String {
        sessions.open([token; 32], at).expect("room for a session")
    }

    #[test]
    fn a_session_names_its_token_until_it_idles_out_or_grows_too_old() {
        let sessions = Sessions::default();
        let start = Instant::now();
        let value = open(&sessions, 7, start);
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
        let other = open(&sessions, 8, start);
        assert_eq!(sessions.token_of(&other, start + IDLE_MAX), None);
        // Closed, it ends.
        let third = open(&sessions, 9, start);
        sessions.close(&third);
        assert_eq!(sessions.token_of(&third, start), None);
    }

    #[test]
    fn two_sessions_never_share_a_value() {
        let sessions = Sessions::default();
        let now = Instant::now();
        assert_ne!(open(&sessions, 1, now), open(&sessions, 1, now));
    }

    #[test]
    fn one_token_keeps_its_last_sessions_and_never_ends_anothers() {
        let sessions = Sessions::default();
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let someone_else = open(&sessions, 2, at(0));
        let mine: Vec<String> = (0..SESSIONS_PER_TOKEN_MAX as u64)
            .map(|i| open(&sessions, 1, at(1 + i)))
            .collect();
        // The first of mine is used again: the second is now my least recently used.
        let later = at(100);
        assert!(sessions.token_of(&mine[0], later).is_some());
        open(&sessions, 1, later);
        assert!(sessions.token_of(&mine[0], later).is_some());
        assert!(sessions.token_of(&mine[1], later).is_none());
        assert!(sessions.token_of(&someone_else, later).is_some());
    }

    #[test]
    fn when_every_place_is_taken_a_sign_in_is_refused_and_nobody_is_signed_out() {
        let sessions = Sessions::default();
        let start = Instant::now();
        let first = open(&sessions, 0, start);
        for i in 1..SESSIONS_MAX {
            // Many other tokens, a few sessions each.
            let token = (i / SESSIONS_PER_TOKEN_MAX) as u16;
            let mut hash = [9; 32];
            hash[..2].copy_from_slice(&token.to_le_bytes());
            let at = start + Duration::from_millis(i as u64);
            assert!(sessions.open(hash, at).is_some());
        }
        let later = start + Duration::from_millis(SESSIONS_MAX as u64);
        assert_eq!(sessions.lock().len(), SESSIONS_MAX);
        assert_eq!(sessions.open([250; 32], later), None);
        assert!(sessions.token_of(&first, later).is_some());
        // Once one ends, there is room again.
        sessions.close(&first);
        assert!(sessions.open([250; 32], later).is_some());
    }

    #[test]
    fn every_cookie_of_the_name_is_found_among_others() {
        let all = |header| cookies(header, COOKIE).collect::<Vec<_>>();
        assert_eq!(all("a=1; opledger_ui=abc; b=2"), ["abc"]);
        assert_eq!(all("opledger_ui=\"abc\""), ["abc"]);
        assert!(all("x_opledger_ui=abc").is_empty());
        assert!(all("opledger_ui=").is_empty());
        assert_eq!(all("opledger_ui=a; opledger_ui=b"), ["a", "b"]);
    }
}
