//! Canonical JSON for request fingerprints (canonicalisation v1).
//!
//! Pure functions: no clock, no I/O. The exact rules are specified in
//! `schemas/fingerprint-v1.md`; that document and this module must agree, and
//! `schemas/fingerprint-v1-vectors.json` pins the results. Changing any output
//! of this module changes stored fingerprints, so a behaviour change needs a new
//! fingerprint version, never an edit in place.

mod decimal;
mod timestamp;

pub use decimal::normalise_decimal;
pub use timestamp::normalise_timestamp;

use serde_json::Value;

/// Maximum nesting of arrays/objects inside one canonicalised value.
///
/// Requests come from the network; the bound keeps recursion shallow and
/// predictable. A bare scalar has depth 0, `{}` and `[]` have depth 1.
pub const MAX_DEPTH: usize = 32;

/// Maximum number of bytes of canonical JSON produced for one call of
/// [`canonical_json`] (and, in the fingerprint, for all fields of a request together).
pub const MAX_CANONICAL_BYTES: usize = 1024 * 1024;

/// Maximum length in bytes of a normalised decimal (sign included).
///
/// Large enough for every finite `f64` written out in full (about 330 bytes for
/// the smallest subnormal), small enough that a string such as `"1e999999"`
/// cannot inflate into megabytes. Longer values are "not a decimal".
pub const MAX_DECIMAL_LEN: usize = 400;

/// How strings are treated while canonicalising.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Strings stay strings (except RFC 3339 timestamps, which are normalised).
    Plain,
    /// Used for the `amount` category: a string that is a decimal number is
    /// written as that number, so `"10.50"` and `10.5` canonicalise identically.
    Amount,
}

/// Why a value could not be canonicalised. Never carries request data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CanonicalError {
    /// Arrays/objects nested deeper than the limit.
    #[error("value nested deeper than {limit} levels")]
    TooDeep {
        /// The limit that was exceeded.
        limit: usize,
    },
    /// A number whose decimal form would exceed the bound (e.g. `1e400`).
    #[error("a number's decimal form is longer than {limit} digits")]
    NumberOutOfRange {
        /// The limit that was exceeded.
        limit: usize,
    },
    /// Canonical form would exceed the byte budget.
    #[error("canonical form larger than {limit} bytes")]
    TooLarge {
        /// The limit that was exceeded.
        limit: usize,
    },
}

/// Canonical JSON text of `value` (see the module docs and `schemas/fingerprint-v1.md`).
///
/// - objects: keys sorted by their UTF-8 bytes, `{"k":v,...}`, no whitespace;
///   keys are never normalised (a key that looks like a timestamp stays as is);
/// - arrays: order kept;
/// - numbers: integers exactly; other numbers are the `f64` serde_json parsed,
///   written with the shortest digits that round-trip, then [`normalise_decimal`].
///   Amounts that need more than `f64` precision must be sent as strings;
/// - strings: RFC 3339 timestamps → [`normalise_timestamp`] (still a JSON
///   string); in [`Mode::Amount`] a string accepted by [`normalise_decimal`] is
///   written as a bare number first; other strings escaped as serde_json does;
/// - `null`, `true`, `false` as themselves.
///
/// Errors when nesting exceeds [`MAX_DEPTH`] or output exceeds [`MAX_CANONICAL_BYTES`].
pub fn canonical_json(value: &Value, mode: Mode) -> Result<String, CanonicalError> {
    let mut out = String::new();
    write_canonical(value, mode, &mut out, MAX_CANONICAL_BYTES)?;
    Ok(out)
}

/// Appends the canonical JSON of `value` to `out`, failing once `out` grows past
/// `max_len` bytes in total. The fingerprint passes one shared budget for all
/// fields of a request, so many medium fields cannot add up to an unbounded hash input.
pub(crate) fn write_canonical(
    value: &Value,
    mode: Mode,
    out: &mut String,
    max_len: usize,
) -> Result<(), CanonicalError> {
    write_value(value, mode, out, max_len, 0)
}

/// Fails if `out` plus `extra` more bytes would exceed `max_len`. The reported
/// limit is always [`MAX_CANONICAL_BYTES`]: callers only ever pass a share of it.
fn check_len(out: &str, extra: usize, max_len: usize) -> Result<(), CanonicalError> {
    if out.len().saturating_add(extra) > max_len {
        Err(CanonicalError::TooLarge {
            limit: MAX_CANONICAL_BYTES,
        })
    } else {
        Ok(())
    }
}

fn write_value(
    value: &Value,
    mode: Mode,
    out: &mut String,
    max_len: usize,
    depth: usize,
) -> Result<(), CanonicalError> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => out.push_str(&canonical_number(n)?),
        Value::String(s) => {
            // Check before escaping so a huge string fails without being copied.
            check_len(out, s.len(), max_len)?;
            write_string_value(s, mode, out);
        }
        Value::Array(items) => {
            if depth + 1 > MAX_DEPTH {
                return Err(CanonicalError::TooDeep { limit: MAX_DEPTH });
            }
            out.push('[');
            for (k, item) in items.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                write_value(item, mode, out, max_len, depth + 1)?;
            }
            out.push(']');
        }
        Value::Object(map) => {
            if depth + 1 > MAX_DEPTH {
                return Err(CanonicalError::TooDeep { limit: MAX_DEPTH });
            }
            // Sort explicitly: serde_json's map is only sorted without the
            // `preserve_order` feature, which another crate could switch on.
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (k, (key, item)) in entries.into_iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                check_len(out, key.len(), max_len)?;
                write_escaped(key, out);
                out.push(':');
                write_value(item, mode, out, max_len, depth + 1)?;
            }
            out.push('}');
        }
    }
    check_len(out, 0, max_len)
}

fn write_string_value(s: &str, mode: Mode, out: &mut String) {
    if mode == Mode::Amount
        && let Some(d) = normalise_decimal(s)
    {
        out.push_str(&d);
        return;
    }
    match normalise_timestamp(s) {
        Some(ts) => write_escaped(&ts, out),
        None => write_escaped(s, out),
    }
}

/// Canonical text of a JSON number: its literal as written, normalised as a decimal.
///
/// serde_json's `arbitrary_precision` keeps the literal, so `12345678901234567.01` and
/// `12345678901234567.02` stay different (through an `f64` they would collapse into one
/// fingerprint, and a changed amount would replay instead of conflicting). A literal too large
/// to write out within [`MAX_DECIMAL_LEN`] (e.g. `1e400`) is refused.
fn canonical_number(n: &serde_json::Number) -> Result<String, CanonicalError> {
    let literal = n.to_string();
    normalise_decimal(&literal).ok_or(CanonicalError::NumberOutOfRange {
        limit: MAX_DECIMAL_LEN,
    })
}

/// Writes `s` as a JSON string literal exactly like `serde_json::to_string`:
/// escapes `"` `\` and U+0000–U+001F (`\b \f \n \r \t`, others `\u00xx` with
/// lowercase hex); everything else, including `/`, DEL and non-ASCII, is raw UTF-8.
fn write_escaped(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0C}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let v = c as usize;
                out.push_str("\\u00");
                out.push(char::from(HEX[v >> 4]));
                out.push(char::from(HEX[v & 0xf]));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn canon(v: &Value) -> String {
        canonical_json(v, Mode::Plain).expect("canonicalisable")
    }

    fn canon_amount(v: &Value) -> String {
        canonical_json(v, Mode::Amount).expect("canonicalisable")
    }

    #[test]
    fn given_object_with_unsorted_keys_when_canonicalised_then_sorted_by_bytes_without_whitespace()
    {
        let mut map = serde_json::Map::new();
        map.insert("b".into(), json!(1));
        map.insert("a".into(), json!([true, null, {"z": 1, "Z": 2}]));
        map.insert("é".into(), json!("x"));
        map.insert("B".into(), json!(false));
        assert_eq!(
            canon(&Value::Object(map)),
            r#"{"B":false,"a":[true,null,{"Z":2,"z":1}],"b":1,"é":"x"}"#
        );
    }

    #[test]
    fn given_numbers_when_canonicalised_then_normalised_decimals() {
        assert_eq!(canon(&json!(10.50)), "10.5");
        assert_eq!(canon(&json!(1.0)), "1");
        assert_eq!(canon(&json!(-0.0)), "0");
        assert_eq!(canon(&json!(1e21)), "1000000000000000000000");
        assert_eq!(canon(&json!(1e-7)), "0.0000001");
        assert_eq!(canon(&json!(0.1)), "0.1");
        assert_eq!(canon(&json!(u64::MAX)), "18446744073709551615");
        assert_eq!(canon(&json!(i64::MIN)), "-9223372036854775808");
        let parsed: Value = serde_json::from_str("[1.050e1, 100, 1E2]").expect("json");
        assert_eq!(canon(&parsed), "[10.5,100,100]");
    }

    #[test]
    fn given_amounts_beyond_double_precision_when_canonicalised_then_they_stay_distinct() {
        let a: Value = serde_json::from_str("12345678901234567.01").expect("json");
        let b: Value = serde_json::from_str("12345678901234567.02").expect("json");
        assert_eq!(canon(&a), "12345678901234567.01");
        assert_ne!(canon(&a), canon(&b));
        let huge: Value = serde_json::from_str("123456789012345678901234567890").expect("json");
        assert_eq!(canon(&huge), "123456789012345678901234567890");
    }

    #[test]
    fn given_a_number_too_long_to_write_out_when_canonicalised_then_refused() {
        let v: Value = serde_json::from_str("[1e400]").expect("json");
        assert_eq!(
            canonical_json(&v, Mode::Plain),
            Err(CanonicalError::NumberOutOfRange {
                limit: MAX_DECIMAL_LEN
            })
        );
    }

    #[test]
    fn given_extreme_floats_when_canonicalised_then_within_decimal_bound() {
        for f in [f64::MAX, f64::MIN, f64::MIN_POSITIVE, 5e-324, -5e-324] {
            let out = canon(&json!(f));
            assert!(out.len() <= MAX_DECIMAL_LEN, "{f}: {}", out.len());
            assert_eq!(normalise_decimal(&out).as_deref(), Some(out.as_str()));
            assert_eq!(out.parse::<f64>().ok(), Some(f));
        }
    }

    #[test]
    fn given_decimal_string_when_amount_mode_then_equal_to_number_but_not_in_plain_mode() {
        assert_eq!(canon_amount(&json!("10.50")), "10.5");
        assert_eq!(canon_amount(&json!(10.5)), "10.5");
        assert_eq!(canon(&json!("10.50")), "\"10.50\"");
        assert_ne!(canon(&json!("10.50")), canon(&json!(10.5)));
        assert_eq!(
            canon_amount(&json!({"value": "0010.50", "currency": "EUR"})),
            r#"{"currency":"EUR","value":10.5}"#
        );
        // Not a decimal: stays a string in amount mode too.
        assert_eq!(canon_amount(&json!("10.5 EUR")), "\"10.5 EUR\"");
    }

    #[test]
    fn given_timestamp_strings_when_canonicalised_then_normalised_in_every_mode() {
        let v = json!({"at": "2024-03-01T12:00:00+02:00", "2024-03-01T12:00:00+02:00": 1});
        let expected = r#"{"2024-03-01T12:00:00+02:00":1,"at":"2024-03-01T10:00:00Z"}"#;
        assert_eq!(canon(&v), expected);
        assert_eq!(canon_amount(&v), expected);
    }

    #[test]
    fn given_special_characters_when_canonicalised_then_escaped_like_serde_json() {
        let mut s = String::new();
        for c in (0u32..0x80).filter_map(char::from_u32) {
            s.push(c);
        }
        s.push_str("é€😀\u{2028}/");
        let v = Value::String(s);
        assert_eq!(canon(&v), serde_json::to_string(&v).expect("serialise"));
        assert_eq!(canon(&json!("a\u{1}b")), r#""a\u0001b""#);
    }

    #[test]
    fn given_nesting_at_limit_when_canonicalised_then_ok_and_one_more_fails() {
        let mut v = json!(1);
        for _ in 0..MAX_DEPTH {
            v = json!([v]);
        }
        assert!(canonical_json(&v, Mode::Plain).is_ok());
        let deeper = json!({ "k": v });
        assert_eq!(
            canonical_json(&deeper, Mode::Plain),
            Err(CanonicalError::TooDeep { limit: MAX_DEPTH })
        );
    }

    #[test]
    fn given_objects_nested_to_the_limit_when_canonicalised_then_ok_and_one_more_fails() {
        let mut v = json!(1);
        for _ in 0..MAX_DEPTH {
            v = json!({ "k": v });
        }
        assert!(canonical_json(&v, Mode::Plain).is_ok());
        assert_eq!(
            canonical_json(&json!({ "k": v }), Mode::Plain),
            Err(CanonicalError::TooDeep { limit: MAX_DEPTH })
        );
    }

    #[test]
    fn given_the_bounds_then_they_are_pinned() {
        assert_eq!(MAX_DEPTH, 32);
        assert_eq!(MAX_CANONICAL_BYTES, 1_048_576, "1 MiB");
        assert_eq!(MAX_DECIMAL_LEN, 400);
    }

    #[test]
    fn given_oversized_value_when_canonicalised_then_too_large() {
        let big = Value::String("x".repeat(MAX_CANONICAL_BYTES));
        assert_eq!(
            canonical_json(&big, Mode::Plain),
            Err(CanonicalError::TooLarge {
                limit: MAX_CANONICAL_BYTES
            })
        );
        let fits = Value::String("x".repeat(MAX_CANONICAL_BYTES - 2));
        assert_eq!(
            canonical_json(&fits, Mode::Plain).map(|s| s.len()),
            Ok(MAX_CANONICAL_BYTES)
        );
        let many = Value::Array(vec![json!(123456789); MAX_CANONICAL_BYTES / 10 + 1]);
        assert!(matches!(
            canonical_json(&many, Mode::Plain),
            Err(CanonicalError::TooLarge { .. })
        ));
    }

    #[test]
    fn given_null_and_missing_when_canonicalised_then_null_is_a_value() {
        assert_eq!(canon(&json!({"a": null})), r#"{"a":null}"#);
        assert_eq!(canon(&json!({})), "{}");
    }
}
