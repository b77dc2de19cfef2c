//! Canonical JSON for request fingerprints (canonicalisation v1).
//!
//! Pure functions: no clock, no I/O. The exact rules are specified in
//! `schemas/fingerprint-v1.md`; that document and this module must agree, and
//! `schemas/fingerprint-v1-vectors.json` pins the results. Changing any output
//! of this module changes stored fingerprints, so a behaviour change needs a new
//! fingerprint version, never an edit in place.

use serde_json::Value;
use time::{Date, Duration, Month, PrimitiveDateTime, Time};

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

/// Normalises a decimal number written as text.
///
/// Accepted grammar (ASCII only, no whitespace):
/// `[+-]? DIGIT+ ( "." DIGIT+ )? ( ("e"|"E") [+-]? DIGIT+ )?`.
/// Rejected (returns `None`): empty, `"1."`, `".5"`, `"1e"`, `"NaN"`, `"Infinity"`,
/// `"0x10"`, `"1_000"`, `" 1"`, exponents with more than 9 significant digits,
/// and results longer than [`MAX_DECIMAL_LEN`]. `"1."`/`".5"` are rejected because
/// they are not JSON numbers and accepting more spellings only widens what
/// other implementations must reproduce.
///
/// Output: plain notation, never an exponent; optional `-`, integer part without
/// leading zeros (`"0"` if none), then `.` and the fraction only if the fraction
/// is non-zero, without trailing zeros. Zero is always `"0"` (so `"-0"` → `"0"`).
/// Examples: `"10.50"`, `"10.5"`, `"1.05e1"`, `"+010.5"` → `"10.5"`; `"1e3"` → `"1000"`;
/// `"-0.00"` → `"0"`; `"12e-4"` → `"0.0012"`.
pub fn normalise_decimal(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut i = 0;
    let negative = match b.first() {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = &b[int_start..i];
    if int_digits.is_empty() {
        return None;
    }
    let mut frac_digits: &[u8] = &[];
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = &b[start..i];
        if frac_digits.is_empty() {
            return None;
        }
    }
    let mut exponent: i64 = 0;
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        let exp_negative = match b.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let exp_digits = &b[start..i];
        if exp_digits.is_empty() {
            return None;
        }
        // Bound the exponent before doing arithmetic with it: more than nine
        // significant digits could overflow and is never a sensible amount.
        let significant: &[u8] = match exp_digits.iter().position(|&d| d != b'0') {
            Some(p) => &exp_digits[p..],
            None => &[],
        };
        if significant.len() > 9 {
            return None;
        }
        for &d in significant {
            exponent = exponent * 10 + i64::from(d - b'0');
        }
        if exp_negative {
            exponent = -exponent;
        }
    }
    if i != b.len() {
        return None;
    }

    // value = coefficient × 10^scale, coefficient = int_digits ++ frac_digits.
    let mut coefficient: Vec<u8> = int_digits.iter().chain(frac_digits).copied().collect();
    let lead = coefficient
        .iter()
        .position(|&d| d != b'0')
        .unwrap_or(coefficient.len());
    coefficient.drain(..lead);
    if coefficient.is_empty() {
        return Some("0".to_owned());
    }
    let mut scale = exponent - frac_digits.len() as i64;
    while coefficient.last() == Some(&b'0') {
        coefficient.pop();
        scale += 1;
    }

    let sign_len = usize::from(negative);
    let n = coefficient.len() as i64;
    // Length check before building, so huge exponents never allocate.
    let out_len = if scale >= 0 {
        n + scale
    } else if -scale < n {
        n + 1
    } else {
        2 + (-scale)
    } + sign_len as i64;
    if out_len > MAX_DECIMAL_LEN as i64 {
        return None;
    }

    let mut out = String::with_capacity(out_len as usize);
    if negative {
        out.push('-');
    }
    // All bytes are ASCII digits, so the conversions below cannot fail.
    let digits: String = coefficient.iter().map(|&d| char::from(d)).collect();
    if scale >= 0 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', scale as usize));
    } else {
        let k = (-scale) as usize;
        if k < digits.len() {
            out.push_str(&digits[..digits.len() - k]);
            out.push('.');
            out.push_str(&digits[digits.len() - k..]);
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', k - digits.len()));
            out.push_str(&digits);
        }
    }
    Some(out)
}

/// Normalises an RFC 3339 date-time to UTC.
///
/// Accepted: `YYYY-MM-DD(T|t)HH:MM:SS[.F+](Z|z|(+|-)HH:MM)` exactly, with a valid
/// calendar date, hour 00–23, minute 00–59, second 00–59 (leap second `60` is
/// rejected: it has no unambiguous UTC instant), offset hour 00–23 and minute 00–59
/// (`-00:00` means UTC). The fraction may have any number of digits but at most
/// nine may remain after removing trailing zeros (nanosecond precision).
/// Not accepted: a space instead of `T`, date-only or time-only strings, missing
/// offset, or instants whose UTC year falls outside 0000–9999.
///
/// Output: `YYYY-MM-DDTHH:MM:SS[.fraction]Z` in UTC, fraction without trailing
/// zeros and omitted when zero. Example: `"2024-03-01T12:00:00.500+02:00"` →
/// `"2024-03-01T10:00:00.5Z"`.
pub fn normalise_timestamp(s: &str) -> Option<String> {
    let b = s.as_bytes();
    // Fixed-position prefix "YYYY-MM-DDTHH:MM:SS" is 19 bytes.
    if b.len() < 20 {
        return None;
    }
    let year = digits_at(b, 0, 4)?;
    let month = digits_at(b, 5, 2)?;
    let day = digits_at(b, 8, 2)?;
    let hour = digits_at(b, 11, 2)?;
    let minute = digits_at(b, 14, 2)?;
    let second = digits_at(b, 17, 2)?;
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') || b[13] != b':' {
        return None;
    }
    if b[16] != b':' {
        return None;
    }
    let mut i = 19;
    let mut nanos: u32 = 0;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let frac = &b[start..i];
        if frac.is_empty() {
            return None;
        }
        let end = frac.iter().rposition(|&d| d != b'0').map_or(0, |p| p + 1);
        let frac = &frac[..end];
        if frac.len() > 9 {
            return None;
        }
        for k in 0..9 {
            let d = frac.get(k).map_or(0, |&d| u32::from(d - b'0'));
            nanos = nanos * 10 + d;
        }
    }
    let offset_seconds: i64 = match &b[i..] {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), rest @ ..] if rest.len() == 5 && rest[2] == b':' => {
            let oh = digits_at(rest, 0, 2)?;
            let om = digits_at(rest, 3, 2)?;
            if oh > 23 || om > 59 {
                return None;
            }
            let magnitude = i64::from(oh * 3600 + om * 60);
            if *sign == b'-' { -magnitude } else { magnitude }
        }
        _ => return None,
    };
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }

    let month = Month::try_from(u8::try_from(month).ok()?).ok()?;
    let date =
        Date::from_calendar_date(i32::try_from(year).ok()?, month, u8::try_from(day).ok()?).ok()?;
    let time = Time::from_hms_nano(
        u8::try_from(hour).ok()?,
        u8::try_from(minute).ok()?,
        u8::try_from(second).ok()?,
        nanos,
    )
    .ok()?;
    // local = utc + offset, so utc = local - offset. checked_sub never panics at
    // the edges of the supported range (e.g. 0000-01-01T00:00:00+01:00).
    let utc = PrimitiveDateTime::new(date, time).checked_sub(Duration::seconds(offset_seconds))?;
    let y = utc.year();
    if !(0..=9999).contains(&y) {
        return None;
    }
    let mut out = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        y,
        u8::from(utc.month()),
        utc.day(),
        utc.hour(),
        utc.minute(),
        utc.second()
    );
    let ns = utc.nanosecond();
    if ns != 0 {
        let frac = format!("{ns:09}");
        out.push('.');
        out.push_str(frac.trim_end_matches('0'));
    }
    out.push('Z');
    Some(out)
}

/// Reads `len` ASCII digits at `at` as a number; `None` if out of bounds or not digits.
fn digits_at(b: &[u8], at: usize, len: usize) -> Option<u32> {
    let slice = b.get(at..at + len)?;
    let mut v = 0u32;
    for &d in slice {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u32::from(d - b'0');
    }
    Some(v)
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
    use proptest::prelude::*;
    use serde_json::json;

    fn canon(v: &Value) -> String {
        canonical_json(v, Mode::Plain).expect("canonicalisable")
    }

    fn canon_amount(v: &Value) -> String {
        canonical_json(v, Mode::Amount).expect("canonicalisable")
    }

    #[test]
    fn given_equal_decimals_in_different_spellings_when_normalised_then_identical() {
        for s in ["10.50", "10.5", "1.05e1", "+010.5", "1050E-2", "0.105e+2"] {
            assert_eq!(normalise_decimal(s).as_deref(), Some("10.5"), "input {s}");
        }
    }

    #[test]
    fn given_zero_spellings_when_normalised_then_plain_zero() {
        for s in ["0", "-0", "+0", "-0.000", "000", "0e5", "0.0e-9999999"] {
            assert_eq!(normalise_decimal(s).as_deref(), Some("0"), "input {s}");
        }
    }

    #[test]
    fn given_exponents_when_normalised_then_plain_notation() {
        assert_eq!(normalise_decimal("1e3").as_deref(), Some("1000"));
        assert_eq!(normalise_decimal("12e-4").as_deref(), Some("0.0012"));
        assert_eq!(normalise_decimal("-1.200E+1").as_deref(), Some("-12"));
        assert_eq!(normalise_decimal("007").as_deref(), Some("7"));
        assert_eq!(normalise_decimal("-0.5").as_deref(), Some("-0.5"));
        assert_eq!(normalise_decimal("123.456").as_deref(), Some("123.456"));
    }

    #[test]
    fn given_malformed_decimals_when_normalised_then_rejected() {
        for s in [
            "", "+", "-", "1.", ".5", "1e", "1e+", "e5", " 1", "1 ", "0x10", "NaN", "Infinity",
            "inf", "1_000", "1,5", "--1", "+-1", "1.2.3", "1e1.5", "١", "10.5€",
        ] {
            assert_eq!(normalise_decimal(s), None, "input {s:?}");
        }
    }

    #[test]
    fn given_huge_exponent_when_normalised_then_rejected_without_allocating() {
        assert_eq!(normalise_decimal("1e999999999"), None);
        assert_eq!(normalise_decimal("1e1000000000"), None);
        assert_eq!(normalise_decimal("1e-999999999"), None);
        // Just inside and just outside the length bound.
        assert_eq!(
            normalise_decimal("1e399").map(|s| s.len()),
            Some(MAX_DECIMAL_LEN)
        );
        assert_eq!(normalise_decimal("1e400"), None);
        assert_eq!(normalise_decimal("-1e399"), None);
    }

    #[test]
    fn given_offsets_for_same_instant_when_normalised_then_identical_utc() {
        let expected = Some("2024-03-01T10:00:00Z");
        for s in [
            "2024-03-01T10:00:00Z",
            "2024-03-01T12:00:00+02:00",
            "2024-03-01T05:30:00-04:30",
            "2024-03-01t10:00:00z",
            "2024-03-01T10:00:00-00:00",
            "2024-03-01T10:00:00.000Z",
        ] {
            assert_eq!(normalise_timestamp(s).as_deref(), expected, "input {s}");
        }
    }

    #[test]
    fn given_fractions_and_day_rollover_when_normalised_then_utc_with_trimmed_fraction() {
        assert_eq!(
            normalise_timestamp("2024-03-01T00:30:00.500+01:00").as_deref(),
            Some("2024-02-29T23:30:00.5Z")
        );
        assert_eq!(
            normalise_timestamp("2023-12-31T23:00:00.123456789-02:00").as_deref(),
            Some("2024-01-01T01:00:00.123456789Z")
        );
        assert_eq!(
            normalise_timestamp("2024-01-01T00:00:00.1000000000000Z").as_deref(),
            Some("2024-01-01T00:00:00.1Z")
        );
    }

    #[test]
    fn given_invalid_timestamps_when_normalised_then_rejected() {
        for s in [
            "",
            "2024-03-01",
            "10:00:00Z",
            "2024-03-01 10:00:00Z",
            "2024-03-01T10:00:00",
            "2024-02-30T10:00:00Z",
            "2023-02-29T10:00:00Z",
            "2024-13-01T10:00:00Z",
            "2024-03-01T24:00:00Z",
            "2024-03-01T10:60:00Z",
            "2024-06-30T23:59:60Z",
            "2024-03-01T10:00:00.Z",
            "2024-03-01T10:00:00.1234567891Z",
            "2024-03-01T10:00:00+24:00",
            "2024-03-01T10:00:00+02:60",
            "2024-03-01T10:00:00+0200",
            "2024-03-01T10:00:00+02",
            "2024-03-01T10:00:00Zjunk",
            "+2024-03-01T10:00:00Z",
            "0000-01-01T00:00:00+01:00",
            "9999-12-31T23:00:00-02:00",
        ] {
            assert_eq!(normalise_timestamp(s), None, "input {s:?}");
        }
    }

    #[test]
    fn given_range_edges_when_normalised_then_kept_inside_range() {
        assert_eq!(
            normalise_timestamp("0000-01-01T01:00:00+01:00").as_deref(),
            Some("0000-01-01T00:00:00Z")
        );
        assert_eq!(
            normalise_timestamp("9999-12-31T23:59:59.999999999Z").as_deref(),
            Some("9999-12-31T23:59:59.999999999Z")
        );
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

    proptest! {
        #[test]
        fn given_any_scaled_integer_when_spelled_differently_then_same_normal_form(
            mantissa in -10_000_000i64..10_000_000,
            scale in 0u32..8,
            extra_zeros in 0usize..4,
            shift in 0usize..4,
        ) {
            // Plain spelling of mantissa / 10^scale with padding zeros.
            let neg = mantissa < 0;
            let digits = format!("{:0>width$}", mantissa.unsigned_abs(), width = scale as usize + 1);
            let (ip, fp) = digits.split_at(digits.len() - scale as usize);
            let mut plain = String::new();
            if neg { plain.push('-'); }
            plain.push_str(ip);
            if !fp.is_empty() || extra_zeros > 0 {
                plain.push('.');
                plain.push_str(fp);
                plain.push_str(&"0".repeat(extra_zeros));
            }
            // Same value in scientific notation, coefficient padded by `shift` zeros.
            let coeff = format!("{}{}", mantissa.unsigned_abs(), "0".repeat(extra_zeros + shift));
            let exp = -(scale as i64) - (extra_zeros + shift) as i64 + coeff.len() as i64 - 1;
            let sign = if neg { "-" } else { "" };
            let shifted = if coeff.len() > 1 {
                format!("{sign}{}.{}E{exp:+}", &coeff[..1], &coeff[1..])
            } else {
                format!("{sign}{coeff}e{exp}")
            };
            let a = normalise_decimal(&plain);
            let b = normalise_decimal(&shifted);
            prop_assert!(a.is_some());
            prop_assert_eq!(&a, &b);
            // Normal forms are fixed points, and agree numerically with f64 parsing.
            let n = a.unwrap_or_default();
            prop_assert_eq!(normalise_decimal(&n), Some(n.clone()));
            let expected = mantissa as f64 / 10f64.powi(scale as i32);
            let got: f64 = n.parse().unwrap_or(f64::NAN);
            prop_assert!((got - expected).abs() <= expected.abs() * 1e-12 + 1e-12);
        }

        #[test]
        fn given_any_instant_and_offset_when_formatted_locally_then_same_utc(
            unix in 0i64..253_402_300_799, // up to 9999-12-31T23:59:59Z
            nanos in 0u32..1_000_000_000,
            offset_minutes in -(23 * 60 + 59)..(23 * 60 + 59),
        ) {
            let utc = time::OffsetDateTime::from_unix_timestamp(unix)
                .map_err(|e| TestCaseError::fail(e.to_string()))?
                .replace_nanosecond(nanos)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let off = time::UtcOffset::from_whole_seconds(offset_minutes * 60)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let fmt = &time::format_description::well_known::Rfc3339;
            let z = utc.format(fmt).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let Some(local_dt) = utc.checked_to_offset(off) else { return Ok(()); };
            if !(0..=9999).contains(&local_dt.year()) { return Ok(()); }
            let local = local_dt.format(fmt).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let a = normalise_timestamp(&z);
            prop_assert!(a.is_some(), "{}", z);
            prop_assert_eq!(&a, &normalise_timestamp(&local), "{} vs {}", z, local);
            // Normal forms are fixed points.
            let n = a.unwrap_or_default();
            prop_assert_eq!(normalise_timestamp(&n), Some(n.clone()));
        }
    }
}
