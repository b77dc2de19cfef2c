//! Bounds and character sets for the short strings callers send besides the key: holders, error
//! codes, result references and headers. Every bound is named, so an oversize value is refused
//! with a reason instead of stored.

/// Longest holder (worker) name, in bytes.
pub const HOLDER_BYTES_MAX: usize = 128;
/// Longest business error code, in bytes.
pub const CODE_BYTES_MAX: usize = 128;
/// Longest result resource reference, in bytes.
pub const RESOURCE_REF_BYTES_MAX: usize = 1024;
/// Most result headers kept for replay.
pub const RESULT_HEADERS_MAX: usize = 16;
/// Longest result header name or value, in bytes.
pub const HEADER_BYTES_MAX: usize = 1024;
/// Largest result content kept whole, in bytes: with the rest of a completion it stays well
/// inside one event (`event::EVENT_BYTES_MAX`, 256 KiB). Larger content is withheld.
pub const RESULT_BODY_BYTES_MAX: usize = 128 * 1024;

/// A field that is not acceptable. Names the field and the rule, never the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{field}` {rule}")]
pub struct InputError {
    /// The request field.
    pub field: &'static str,
    /// What it must be.
    pub rule: String,
}

/// Checks a short identifier-like value: 1..=`max` bytes of visible ASCII.
pub fn visible_ascii(field: &'static str, value: &str, max: usize) -> Result<(), InputError> {
    if value.is_empty() || value.len() > max || !value.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(InputError {
            field,
            rule: format!("must be 1 to {max} visible ASCII characters (0x21-0x7E)"),
        });
    }
    Ok(())
}

/// Longest reason an operator may give for a takeover or a resolution, in bytes.
pub const REASON_BYTES_MAX: usize = 500;

/// Checks free text that is stored and replayed: 1..=`max` bytes without control characters.
pub fn plain_text(field: &'static str, value: &str, max: usize) -> Result<(), InputError> {
    if value.is_empty() || value.len() > max || value.chars().any(char::is_control) {
        return Err(InputError {
            field,
            rule: format!("must be 1 to {max} bytes without control characters"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_are_pinned() {
        assert_eq!(
            (
                HOLDER_BYTES_MAX,
                CODE_BYTES_MAX,
                RESOURCE_REF_BYTES_MAX,
                RESULT_HEADERS_MAX,
                HEADER_BYTES_MAX,
                RESULT_BODY_BYTES_MAX,
                REASON_BYTES_MAX,
            ),
            (128, 128, 1024, 16, 1024, 131_072, 500)
        );
        // Content at its bound, with the rest of a completion, fits one event.
        const { assert!(RESULT_BODY_BYTES_MAX + 64 * 1024 < crate::event::EVENT_BYTES_MAX) };
    }

    #[test]
    fn holders_and_codes_are_bounded_visible_ascii() {
        assert!(visible_ascii("holder", "worker-7", HOLDER_BYTES_MAX).is_ok());
        assert!(visible_ascii("holder", "", HOLDER_BYTES_MAX).is_err());
        assert!(visible_ascii("holder", "a b", HOLDER_BYTES_MAX).is_err());
        assert!(
            visible_ascii(
                "holder",
                &"w".repeat(HOLDER_BYTES_MAX + 1),
                HOLDER_BYTES_MAX
            )
            .is_err()
        );
        let at_bound = "w".repeat(HOLDER_BYTES_MAX);
        assert!(visible_ascii("holder", &at_bound, HOLDER_BYTES_MAX).is_ok());
        let e = visible_ascii("code", "bad\ncode", CODE_BYTES_MAX).expect_err("rejected");
        assert_eq!(e.field, "code");
        assert!(!e.to_string().contains("bad"));
    }

    #[test]
    fn references_may_hold_spaces_but_no_control_characters() {
        assert!(plain_text("resource_ref", "ticket 42/a", RESOURCE_REF_BYTES_MAX).is_ok());
        assert!(plain_text("resource_ref", "t\u{0}", RESOURCE_REF_BYTES_MAX).is_err());
        // 1 to max bytes: empty and one byte over are refused, the bound itself is kept.
        assert!(plain_text("resource_ref", "", RESOURCE_REF_BYTES_MAX).is_err());
        assert!(plain_text("resource_ref", &"r".repeat(4), 4).is_ok());
        let over = plain_text("resource_ref", &"r".repeat(5), 4).expect_err("over");
        assert_eq!(over.field, "resource_ref");
        assert!(over.rule.contains("1 to 4 bytes"), "{}", over.rule);
        assert!(plain_text("resource_ref", "r r", 2).is_err());
    }
}
