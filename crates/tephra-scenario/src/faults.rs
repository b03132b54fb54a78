//! The faults a run injects: the scenario's list, plus those `faults.random` draws from the
//! run's seed, in time order. The same seed gives the same faults.

use super::{FaultDef, FaultKind, Scenario};
use crate::Dur;
use crate::rng::Rng;

/// Every fault of `s` for a run with `seed`, ordered by time (given ones first at a tie).
pub fn expand(s: &Scenario, seed: u64) -> Result<Vec<FaultDef>, String> {
    let mut out = s.faults.list.clone();
    let Some(r) = &s.faults.random else {
        return Ok(out);
    };
    let until = s
        .run
        .until
        .ok_or("faults.random: needs run.until, the span the faults are drawn over")?;
    let clusters: Vec<&str> = s.fleet.clusters.iter().map(|c| c.name.as_str()).collect();
    if clusters.is_empty() {
        return Err("faults.random: the fleet names no cluster to fail".into());
    }
    let kinds = if r.kinds.is_empty() {
        vec![
            FaultKind::Unreachable,
            FaultKind::Notready,
            FaultKind::NodeDown,
        ]
    } else {
        r.kinds.clone()
    };
    if kinds.contains(&FaultKind::Recover) {
        return Err("faults.random.kinds: recover is not a fault to draw".into());
    }
    if r.mean_duration.0 <= 0 {
        return Err("faults.random.meanDuration: must be positive".into());
    }
    // Its own stream, so that drawing faults does not change the workload's draws.
    let mut rng = Rng::new(seed ^ 0x6661_756c_7473);
    for _ in 0..r.count {
        let at = (rng.unit() * until.0 as f64) as i64;
        let cluster = clusters[rng.below(clusters.len() as u64) as usize].to_string();
        let kind = kinds[rng.below(kinds.len() as u64) as usize];
        // Exponential with the given mean, at least a second.
        let u = rng.unit().max(1e-9);
        let lasts = (-(u.ln()) * r.mean_duration.0 as f64).max(1000.0) as i64;
        out.push(FaultDef {
            at: Dur(at),
            cluster,
            kind,
            duration: Some(Dur(lasts)),
            node: None,
            count: (kind == FaultKind::NodeDown).then_some(1),
        });
    }
    out.sort_by_key(|f| f.at.0);
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;

    fn scenario(faults: &str) -> Scenario {
        let text = format!(
            "fleet:\n  clusters:\n    - {{name: a, nodePools: [{{name: p, count: 2, capacity: {{cpu: \"8\"}}}}]}}\n    - {{name: b, nodePools: [{{name: p, count: 2, capacity: {{cpu: \"8\"}}}}]}}\nrun: {{until: 10h}}\n{faults}"
        );
        Scenario::parse(&text, "s.yaml", std::path::Path::new(".")).expect("scenario")
    }

    #[test]
    fn the_same_seed_draws_the_same_faults_and_another_seed_others() {
        let s = scenario("faults: {random: {count: 20, meanDuration: 10m}}");
        let a = expand(&s, 7).expect("faults");
        let b = expand(&s, 7).expect("faults");
        let c = expand(&s, 8).expect("faults");
        let key = |v: &[FaultDef]| {
            v.iter()
                .map(|f| (f.at.0, f.cluster.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(a.len(), 20);
        assert_eq!(key(&a), key(&b));
        assert_ne!(key(&a), key(&c));
        assert!(
            a.windows(2).all(|w| w[0].at.0 <= w[1].at.0),
            "in time order"
        );
        assert!(
            a.iter()
                .all(|f| f.at.0 < 36_000_000 && f.duration.is_some_and(|d| d.0 >= 1000))
        );
        assert!(
            a.iter()
                .filter(|f| f.kind == FaultKind::NodeDown)
                .all(|f| f.count == Some(1))
        );
    }

    #[test]
    fn a_list_still_works_and_both_forms_combine() {
        let s = scenario("faults:\n  - {at: 1h, cluster: a, kind: unreachable, for: 10m}\n");
        assert_eq!(expand(&s, 1).expect("faults").len(), 1);
        let s = scenario(
            "faults:\n  list: [{at: 1h, cluster: a, kind: unreachable, for: 10m}]\n  random: {count: 3, kinds: [notready], meanDuration: 5m}\n",
        );
        let f = expand(&s, 1).expect("faults");
        assert_eq!(f.len(), 4);
        assert_eq!(
            f.iter().filter(|f| f.kind == FaultKind::Notready).count(),
            3
        );
    }

    #[test]
    fn bad_random_settings_are_refused_naming_the_field() {
        let s = scenario("faults: {random: {count: 1, kinds: [recover], meanDuration: 5m}}");
        assert!(
            expand(&s, 1)
                .expect_err("recover")
                .contains("faults.random.kinds")
        );
        let text = "fleet:\n  clusters:\n    - {name: a, nodePools: [{name: p, count: 1, capacity: {cpu: \"8\"}}]}\nfaults: {random: {count: 1, meanDuration: 5m}}\n";
        let s = Scenario::parse(text, "s.yaml", std::path::Path::new(".")).expect("scenario");
        assert!(expand(&s, 1).expect_err("until").contains("run.until"));
    }
}
