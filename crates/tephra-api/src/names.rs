//! Kubernetes' rules for object names that more than one crate checks.

/// A DNS-1123 subdomain: at most 253 characters, dot-separated labels of lowercase letters,
/// digits and `-`, each starting and ending with a letter or digit (an empty name is not one).
pub fn is_dns1123_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns1123_subdomains_are_lowercase_dot_separated_labels() {
        for ok in ["tephra-extender", "a.b-c.d", "x1"] {
            assert!(is_dns1123_subdomain(ok), "{ok}");
        }
        for bad in ["", "Tephra", "-a", "a-", "a..b", "a_b", &"x".repeat(254)] {
            assert!(!is_dns1123_subdomain(bad), "{bad}");
        }
    }
}
