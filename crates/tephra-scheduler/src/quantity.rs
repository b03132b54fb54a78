//! Exact parsing of Kubernetes quantities (`500m`, `1.5`, `128Gi`, `1e3`, `2k`) into integers:
//! millicores for cpu, whole units (bytes, pods, GPUs) for everything else. No floating point is
//! involved; a fractional result is rounded up, as Kubernetes does.

/// A malformed or out-of-range quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {text:?}: {reason}")]
pub struct QuantityError {
    /// The text as written.
    pub text: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// Parses `text` and returns its value multiplied by `scale` (1000 for millicores, 1 for whole
/// units), rounded up to an integer.
pub fn parse_scaled(text: &str, scale: i64) -> Result<i64, QuantityError> {
    let value = parse_scaled_wide(text, scale)?;
    i64::try_from(value).map_err(|_| QuantityError {
        text: text.to_string(),
        reason: "out of range",
    })
}

/// As [`parse_scaled`], in 128 bits: for sums of quantities that only fit `i64` once scaled
/// back (9Pi of memory is 9Pi bytes, but more millibytes than `i64` holds).
pub fn parse_scaled_wide(text: &str, scale: i64) -> Result<i128, QuantityError> {
    let err = |reason| QuantityError {
        text: text.to_string(),
        reason,
    };
    let s = text.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    let (negative, s) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    // Split number from suffix.
    let num_end = s
        .bytes()
        .position(|b| !(b.is_ascii_digit() || b == b'.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(num_end);
    if number.is_empty() || number == "." {
        return Err(err("no digits"));
    }
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if frac_part.contains('.') {
        return Err(err("more than one decimal point"));
    }
    // value = mantissa / 10^frac_len * base^exp
    let mut mantissa: i128 = 0;
    for b in int_part.bytes().chain(frac_part.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(i128::from(b - b'0')))
            .ok_or_else(|| err("too many digits"))?;
    }
    let mut den_pow10: u32 = u32::try_from(frac_part.len()).map_err(|_| err("too many digits"))?;
    let mut num: i128 = mantissa
        .checked_mul(i128::from(scale))
        .ok_or_else(|| err("out of range"))?;
    let apply_pow10 = |exp: i32, num: &mut i128, den: &mut u32| -> Result<(), QuantityError> {
        if exp >= 0 {
            let f = 10i128
                .checked_pow(exp.unsigned_abs())
                .ok_or_else(|| err("exponent out of range"))?;
            *num = num.checked_mul(f).ok_or_else(|| err("out of range"))?;
        } else {
            *den = den
                .checked_add(exp.unsigned_abs())
                .ok_or_else(|| err("exponent out of range"))?;
        }
        Ok(())
    };
    match suffix {
        "" => {}
        "n" => apply_pow10(-9, &mut num, &mut den_pow10)?,
        "u" => apply_pow10(-6, &mut num, &mut den_pow10)?,
        "m" => apply_pow10(-3, &mut num, &mut den_pow10)?,
        "k" => apply_pow10(3, &mut num, &mut den_pow10)?,
        "M" => apply_pow10(6, &mut num, &mut den_pow10)?,
        "G" => apply_pow10(9, &mut num, &mut den_pow10)?,
        "T" => apply_pow10(12, &mut num, &mut den_pow10)?,
        "P" => apply_pow10(15, &mut num, &mut den_pow10)?,
        "E" => apply_pow10(18, &mut num, &mut den_pow10)?,
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            let power = match suffix {
                "Ki" => 10,
                "Mi" => 20,
                "Gi" => 30,
                "Ti" => 40,
                "Pi" => 50,
                _ => 60,
            };
            num = num
                .checked_mul(1i128 << power)
                .ok_or_else(|| err("out of range"))?;
        }
        other if other.starts_with(['e', 'E']) => {
            let exp: i32 = other[1..].parse().map_err(|_| err("malformed exponent"))?;
            if exp.unsigned_abs() > 40 {
                return Err(err("exponent out of range"));
            }
            apply_pow10(exp, &mut num, &mut den_pow10)?;
        }
        _ => return Err(err("unknown suffix")),
    }
    if den_pow10 > 38 {
        // The value is below 1e-38 of a unit: it rounds up to 1 unless zero.
        return Ok(if num == 0 || negative { 0 } else { 1 });
    }
    let den = 10i128.pow(den_pow10);
    // Round away from zero for positive values (ceil), towards zero for negative values, as
    // Kubernetes rounds up.
    let mut value = num / den;
    if num % den != 0 && !negative {
        value += 1;
    }
    Ok(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpu_in_millicores() {
        assert_eq!(parse_scaled("500m", 1000), Ok(500));
        assert_eq!(parse_scaled("1.5", 1000), Ok(1500));
        assert_eq!(parse_scaled("2", 1000), Ok(2000));
        assert_eq!(parse_scaled("0.1", 1000), Ok(100));
        assert_eq!(
            parse_scaled("100u", 1000),
            Ok(1),
            "rounds up like Kubernetes"
        );
        assert_eq!(parse_scaled("1e3", 1000), Ok(1_000_000));
    }

    #[test]
    fn parses_binary_and_decimal_suffixes_exactly() {
        assert_eq!(parse_scaled("128Gi", 1), Ok(128 << 30));
        assert_eq!(parse_scaled("1.5Gi", 1), Ok(1_610_612_736));
        assert_eq!(parse_scaled("1Ti", 1), Ok(1 << 40));
        assert_eq!(parse_scaled("2k", 1), Ok(2000));
        assert_eq!(parse_scaled("1M", 1), Ok(1_000_000));
        assert_eq!(parse_scaled("1E", 1), Ok(1_000_000_000_000_000_000));
        assert_eq!(parse_scaled("12e-1", 1), Ok(2), "1.2 units round up to 2");
        assert_eq!(parse_scaled("8", 1), Ok(8));
    }

    #[test]
    fn refuses_malformed_quantities_naming_them() {
        for bad in ["", "abc", "1.2.3", "5Qi", "1e", "--1", "."] {
            let e = parse_scaled(bad, 1).expect_err(bad);
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
        assert!(parse_scaled("10Ei", 1).is_err(), "overflows i64");
    }

    #[test]
    fn any_exponent_is_refused_or_parsed_never_panics() {
        for text in [
            "1e-2147483648",
            "1e2147483647",
            "1e-2147483647",
            "1E-2147483648",
            "-1e-2147483648",
            "1e99999999999",
        ] {
            let e = parse_scaled(text, 1000).expect_err(text);
            assert!(e.to_string().contains("exponent"), "{text}: {e}");
        }
        assert_eq!(
            parse_scaled("1e-40", 1),
            Ok(1),
            "tiny but positive rounds up"
        );
    }
}
