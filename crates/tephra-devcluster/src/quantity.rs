//! Kubernetes quantities (`500m`, `2`, `1.5Gi`, `1e3`) as exact thousandths, for the simulated
//! kubelet's admission (requests against allocatable) and the PodDisruptionBudget math.

/// A quantity in thousandths of its unit (millicores for cpu, millibytes for memory): exact
/// integers, never floating point. `None` for text that is not a quantity.
pub fn parse_milli(text: &str) -> Option<i128> {
    let s = text.trim();
    if s.is_empty() {
        return None;
    }
    let (sign, s) = match s.as_bytes()[0] {
        b'-' => (-1i128, &s[1..]),
        b'+' => (1, &s[1..]),
        _ => (1, s),
    };
    let num_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(num_end);
    if number.is_empty() || number == "." {
        return None;
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    // value = digits × 10^(-frac_len) × factor, computed as thousandths.
    let digits: i128 = format!("{int_part}{frac_part}").parse().ok()?;
    let frac_len = frac_part.len() as u32;
    let (num, den): (i128, i128) = match suffix {
        "" => (1, 1),
        "m" => (1, 1000),
        "k" => (1000, 1),
        "M" => (1_000_000, 1),
        "G" => (1_000_000_000, 1),
        "T" => (1_000_000_000_000, 1),
        "P" => (1_000_000_000_000_000, 1),
        "E" => (1_000_000_000_000_000_000, 1),
        "Ki" => (1 << 10, 1),
        "Mi" => (1 << 20, 1),
        "Gi" => (1 << 30, 1),
        "Ti" => (1 << 40, 1),
        "Pi" => (1 << 50, 1),
        "Ei" => (1 << 60, 1),
        exp if exp.starts_with(['e', 'E']) => {
            let e: i32 = exp[1..].parse().ok()?;
            if !(-18..=18).contains(&e) {
                return None;
            }
            if e >= 0 {
                (10i128.pow(e as u32), 1)
            } else {
                (1, 10i128.pow((-e) as u32))
            }
        }
        _ => return None,
    };
    let scaled = digits.checked_mul(num)?.checked_mul(1000)?;
    let divisor = den.checked_mul(10i128.pow(frac_len))?;
    // Round up, as Kubernetes does when a quantity has more precision than milli-units.
    let value = (scaled + divisor - 1) / divisor;
    Some(sign * value)
}

/// Formats thousandths for a message as the kubelet prints them: cpu in millicores, anything
/// else in whole units.
pub fn display(resource: &str, milli: i128) -> String {
    if resource == "cpu" {
        milli.to_string()
    } else {
        (milli / 1000).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_exact_thousandths() {
        assert_eq!(parse_milli("500m"), Some(500));
        assert_eq!(parse_milli("2"), Some(2000));
        assert_eq!(parse_milli("1.5"), Some(1500));
        assert_eq!(parse_milli("1Gi"), Some(1_073_741_824_000));
        assert_eq!(parse_milli("1e3"), Some(1_000_000));
        assert_eq!(parse_milli("8"), Some(8000));
        assert_eq!(parse_milli("lots"), None);
        assert_eq!(parse_milli("1Xi"), None);
    }
}
