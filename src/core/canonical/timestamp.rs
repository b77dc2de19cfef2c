//! RFC 3339 date-times, normalised to UTC.

use time::{Date, Duration, Month, PrimitiveDateTime, Time};

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
    // Hours, minutes and seconds out of range are refused by `Time::from_hms_nano` below.
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
            // Each separator wrong on its own.
            "2024/03-01T10:00:00Z",
            "2024-03/01T10:00:00Z",
            "2024-03-01T10-00:00Z",
            "2024-03-01T10:00-00Z",
            // A fraction running to the end, with no zone.
            "2024-03-01T10:00:00.5",
            // Offsets of the right length with the wrong separator, or one digit too many.
            "2024-03-01T10:00:00+02-00",
            "2024-03-01T10:00:00+02:000",
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

    proptest! {
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
