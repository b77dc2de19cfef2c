//! Decimal numbers written as text, normalised to one plain spelling.

use super::MAX_DECIMAL_LEN;

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
    fn given_a_fraction_written_out_then_its_point_counts_toward_the_bound() {
        // 399 digits and a point are 400 bytes: kept; one digit more is one byte too many.
        let at = format!("{}.5", "1".repeat(398));
        assert_eq!(
            normalise_decimal(&at).map(|s| s.len()),
            Some(MAX_DECIMAL_LEN)
        );
        let over = format!("{}.5", "1".repeat(399));
        assert_eq!(normalise_decimal(&over), None);
        // The same digits with the point further left (a leading "0.") are measured alike.
        let small = format!("0.{}", "1".repeat(MAX_DECIMAL_LEN - 2));
        assert_eq!(
            normalise_decimal(&small).map(|s| s.len()),
            Some(MAX_DECIMAL_LEN)
        );
        assert_eq!(
            normalise_decimal(&format!("0.{}", "1".repeat(MAX_DECIMAL_LEN - 1))),
            None
        );
    }

    #[test]
    fn given_exponents_of_nine_and_ten_significant_digits_then_only_nine_are_read() {
        // Zero makes the exponent's size the only bound in play.
        assert_eq!(normalise_decimal("0e123456789").as_deref(), Some("0"));
        assert_eq!(normalise_decimal("0e-000123456789").as_deref(), Some("0"));
        assert_eq!(normalise_decimal("0e1234567890"), None);
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
    }
}
