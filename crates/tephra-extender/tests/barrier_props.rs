//! The gang barrier under random arrivals: binds of random gangs arrive in random order at
//! random times, and some pods never arrive. Every bind is answered exactly once, no bind
//! waits past the timeout, and a gang's binds pass together and only when they make the whole
//! gang (minMember and each role's minimum); otherwise none of them passes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use tephra_extender::barrier::{Arrival, Barrier, Release, Ticket};
use tephra_extender::index::Needs;

const TIMEOUT: i64 = 10_000;

#[derive(Clone, Debug)]
struct Gang {
    needs: Needs,
    /// Each pod's role and, if it arrives, when.
    pods: Vec<(String, Option<i64>)>,
}

fn gang() -> impl Strategy<Value = Gang> {
    (1u32..6, 0usize..3, 0u32..3)
        .prop_flat_map(|(min, extra, role_b_min)| {
            let n = min as usize + extra;
            (
                Just(min),
                Just(role_b_min),
                prop::collection::vec(
                    (any::<bool>(), prop::option::weighted(0.75, 0i64..30_000)),
                    n,
                ),
            )
        })
        .prop_map(|(min, role_b_min, pods)| Gang {
            needs: Needs {
                min_member: min,
                roles: BTreeMap::from([("b".to_string(), role_b_min)]),
            },
            pods: pods
                .into_iter()
                .map(|(b, at)| (if b { "b" } else { "a" }.to_string(), at))
                .collect(),
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn a_gang_is_bound_whole_or_not_at_all_and_nothing_waits_past_the_timeout(
        gangs in prop::collection::vec(gang(), 1..6)
    ) {
        // Arrivals in time order (ties in a fixed order).
        let mut arrivals: Vec<(i64, usize, Arrival)> = Vec::new();
        let mut ticket: Ticket = 0;
        for (g, gang) in gangs.iter().enumerate() {
            for (i, (role, at)) in gang.pods.iter().enumerate() {
                if let Some(at) = at {
                    ticket += 1;
                    arrivals.push((*at, g, Arrival {
                        ticket,
                        pod: format!("g{g}/p{i}"),
                        role: Some(role.clone()),
                        node: format!("n{i}"),
                    }));
                }
            }
        }
        arrivals.sort_by_key(|(t, _, a)| (*t, a.ticket));
        let arrived_at: HashMap<Ticket, (i64, usize, Option<String>)> = arrivals
            .iter()
            .map(|(t, g, a)| (a.ticket, (*t, *g, a.role.clone())))
            .collect();

        let b = Barrier::new(TIMEOUT);
        let mut answered: HashMap<Ticket, (i64, bool)> = HashMap::new();
        let record = |now: i64, out: Vec<Release>, answered: &mut HashMap<Ticket, (i64, bool)>| {
            // Binds released together: one gang, and they make the whole gang.
            let binds: Vec<&Arrival> = out.iter().filter_map(|r| match r {
                Release::Bind(a) => Some(a),
                Release::Fail(..) => None,
            }).collect();
            if let Some(first) = binds.first() {
                let g = arrived_at[&first.ticket].1;
                prop_assert!(binds.iter().all(|a| arrived_at[&a.ticket].1 == g), "one gang per release");
                let needs = &gangs[g].needs;
                prop_assert!(binds.len() >= needs.min_member as usize);
                for (role, min) in &needs.roles {
                    let have = binds.iter().filter(|a| a.role.as_deref() == Some(role.as_str())).count();
                    prop_assert!(have >= *min as usize, "role {role}: {have} < {min}");
                }
            }
            for r in out {
                let (t, ok) = match r {
                    Release::Bind(a) => (a.ticket, true),
                    Release::Fail(t, _) => (t, false),
                };
                prop_assert!(answered.insert(t, (now, ok)).is_none(), "ticket {t} answered twice");
            }
            Ok(())
        };
        for (t, g, a) in arrivals {
            while let Some(d) = b.next_deadline().filter(|d| *d <= t) {
                let out = b.expire(d);
                record(d, out, &mut answered)?;
            }
            let out = b.arrive(&format!("g{g}"), a, &gangs[g].needs, &[], t);
            record(t, out, &mut answered)?;
        }
        while let Some(d) = b.next_deadline() {
            let out = b.expire(d);
            record(d, out, &mut answered)?;
        }
        prop_assert_eq!(b.held(), 0);
        prop_assert_eq!(answered.len(), arrived_at.len(), "every bind is answered");
        for (ticket, (at, _)) in &answered {
            let arrived = arrived_at[ticket].0;
            prop_assert!(*at - arrived <= TIMEOUT, "ticket {} waited {} ms", ticket, at - arrived);
        }
    }
}
