//! Kubernetes quantities (`500m`, `2`, `1.5Gi`, `1e3`) as exact thousandths, for the simulated
//! kubelet's admission (requests against allocatable) and the PodDisruptionBudget math, read
//! by the scheduler core's parser.

/// A quantity in thousandths of its unit (millicores for cpu, millibytes for memory): exact
/// integers, never floating point, rounded up past a thousandth as Kubernetes rounds. The
/// core's parser reads it, as the scheduler does. `None` for text that is not a quantity.
pub fn parse_milli(text: &str) -> Option<i128> {
    tephra_scheduler::quantity::parse_scaled_wide(text, 1000).ok()
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
