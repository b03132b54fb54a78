//! Synthetic arrivals (`workload.generate`): jobs from a template, with counts and durations
//! drawn from distributions, arriving by a Poisson process or at a fixed interval.

use std::collections::BTreeMap;

use super::job::{JobSource, SimJob, SimTask, policy, request, topology, weighted};
use crate::rng::Rng;
use crate::scenario::{Arrival, Count, CountDist, GenerateDef, Span, SpanDist};

/// The last moment a generated job may arrive: Go's largest duration (about 292 years), in ms.
/// Arrivals spaced further apart than that end the source, rather than overflow the clock.
pub const MAX_ARRIVAL_MS: i64 = i64::MAX / 1_000_000;

/// Synthetic arrivals from a template.
pub struct Generator {
    def: GenerateDef,
    rng: Rng,
    index: usize,
    next_ms: i64,
    classes: BTreeMap<String, i32>,
    source: usize,
}

impl Generator {
    /// The `source`-th generator of a scenario, seeded with `seed`.
    pub fn new(
        def: &GenerateDef,
        seed: u64,
        classes: &BTreeMap<String, i32>,
        source: usize,
    ) -> Self {
        let mut gen_src = Self {
            def: def.clone(),
            rng: Rng::new(seed),
            index: 0,
            next_ms: def.start.0,
            classes: classes.clone(),
            source,
        };
        if matches!(def.arrival, Arrival::Poisson { .. }) {
            // The first Poisson arrival comes after one random gap, not at `start`.
            gen_src.advance();
        }
        gen_src
    }
}

impl Generator {
    fn count(&mut self, c: &Count) -> u32 {
        match c {
            Count::Fixed(n) => *n,
            Count::Dist(CountDist::Uniform([a, b])) => {
                let (lo, hi) = ((*a).min(*b), (*a).max(*b));
                lo + self.rng.below(u64::from(hi - lo) + 1) as u32
            }
            Count::Dist(CountDist::Choice(v)) if !v.is_empty() => {
                v[self.rng.below(v.len() as u64) as usize]
            }
            Count::Dist(CountDist::Choice(_)) => 1,
        }
    }

    fn span(&mut self, s: &Span) -> i64 {
        match s {
            Span::Fixed(d) => d.0,
            Span::Dist(SpanDist::Uniform([a, b])) => {
                let (lo, hi) = (a.0.min(b.0), a.0.max(b.0));
                lo + self.rng.below((hi - lo) as u64 + 1) as i64
            }
            Span::Dist(SpanDist::Exponential { mean }) => {
                let u = self.rng.unit().max(1e-12);
                (-(mean.0 as f64) * u.ln()).round() as i64
            }
            Span::Dist(SpanDist::Choice(v)) if !v.is_empty() => {
                v[self.rng.below(v.len() as u64) as usize].0
            }
            Span::Dist(SpanDist::Choice(_)) => 0,
        }
    }

    fn advance(&mut self) {
        let gap = match self.def.arrival {
            Arrival::Poisson { per_hour } => {
                let u = self.rng.unit().max(1e-12);
                (-(3_600_000.0 / per_hour) * u.ln()).round() as i64
            }
            Arrival::Every(d) => d.0,
        };
        self.next_ms = self.next_ms.saturating_add(gap.max(0));
    }
}

impl JobSource for Generator {
    fn peek(&mut self) -> Option<i64> {
        (self.index < self.def.count && self.next_ms <= MAX_ARRIVAL_MS).then_some(self.next_ms)
    }

    fn next_job(&mut self) -> Option<SimJob> {
        if self.index >= self.def.count || self.next_ms > MAX_ARRIVAL_MS {
            return None;
        }
        let t = self.def.template.clone();
        let mut tasks = Vec::new();
        for task in &t.tasks {
            let replicas = self.count(&task.replicas).max(1);
            let duration_ms = self.span(&task.duration);
            tasks.push(SimTask {
                role: task.name.clone(),
                replicas,
                min: None,
                request: request(&task.resources).into(),
                duration_ms,
                node_selector: task.node_selector.clone(),
                affinity: Vec::new(),
                tolerations: Vec::new(),
            });
        }
        let total: u32 = tasks.iter().map(|t| t.replicas).sum();
        let pick = self.rng.next_u64();
        let queue = if self.def.queue.is_empty() {
            "default".to_string()
        } else {
            weighted(&self.def.queue, pick).to_string()
        };
        let job = SimJob {
            namespace: "default".into(),
            name: format!(
                "{}-{}-{}",
                t.name.as_deref().unwrap_or("gen"),
                self.source,
                self.index
            ),
            queue,
            submit_ms: self.next_ms,
            priority: t
                .priority
                .or_else(|| {
                    t.priority_class
                        .as_ref()
                        .and_then(|c| self.classes.get(c).copied())
                })
                .unwrap_or(0),
            min_member: t.min_available.map(|m| m.min(total)),
            tasks,
            policy: policy(t.policy.as_ref()),
            topology: topology(t.network_topology.as_ref()),
            plan: None,
            volcano: None,
        };
        self.index += 1;
        self.advance();
        Some(job)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::scenario::Scenario;

    fn generator(generate: &str) -> Generator {
        let text = format!(
            "fleet:\n  clusters:\n    - name: a\n      nodePools:\n        - {{name: p, count: 1, capacity: {{cpu: \"4\"}}}}\nworkload:\n  generate:\n    - {generate}\n"
        );
        let s = Scenario::parse(&text, "s.yaml", Path::new(".")).expect("a scenario");
        Generator::new(&s.workload.generate[0], 1, &BTreeMap::new(), 0)
    }

    fn drain(mut g: Generator) -> Vec<i64> {
        let mut times = Vec::new();
        while let Some(t) = g.peek() {
            times.push(t);
            g.next_job();
        }
        times
    }

    #[test]
    fn arrivals_past_the_largest_duration_never_come_and_never_overflow() {
        let template =
            "template: {tasks: [{name: w, replicas: 1, resources: {cpu: \"1\"}, duration: 1s}]}";
        let times = drain(generator(&format!(
            "{{count: 5000, arrival: {{every: 106751d}}, {template}}}"
        )));
        assert!(!times.is_empty() && times.len() < 5000, "{}", times.len());
        assert!(times.iter().all(|&t| t <= MAX_ARRIVAL_MS));
        let times = drain(generator(&format!(
            "{{count: 5, arrival: {{poisson: {{perHour: 1e-300}}}}, {template}}}"
        )));
        assert!(times.is_empty(), "{times:?}");
    }
}
