//! The gang barrier behind `bind`, without IO or clock: binds of a gang's pods are held until
//! every pod the gang needs (minMember, and each role's minTaskMember, counting pods already
//! bound) has reached bind; then all of them are released to be bound. A gang whose barrier
//! has not completed `timeout_ms` after its first held bind has every held bind failed, and
//! nothing of it is bound; kube-scheduler retries them. A changed plan releases the gang's
//! held binds with an error too.
//!
//! Each bind carries a ticket the caller uses to answer kube-scheduler's request.

use std::sync::atomic::{AtomicUsize, Ordering};

use dashmap::DashMap;
use dashmap::mapref::entry::Entry;

use crate::index::Needs;

/// A caller's handle on one held bind.
pub type Ticket = u64;

/// One bind asking to pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// The caller's handle.
    pub ticket: Ticket,
    /// `namespace/name`.
    pub pod: String,
    /// Its role, if it has one.
    pub role: Option<String>,
    /// The node to bind it to.
    pub node: String,
}

/// What becomes of a held bind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Release {
    /// Bind it now.
    Bind(Arrival),
    /// Answer the bind with this error; nothing was bound.
    Fail(Ticket, String),
}

#[derive(Clone, Debug)]
struct Held {
    since_ms: i64,
    binds: Vec<Arrival>,
}

/// The binds held, per gang. Every method takes `&self`: the gangs sit in a `DashMap`, so
/// concurrent binds of different gangs pass without waiting for each other, and a gang's own
/// steps are ordered by its entry's lock (README, "Shared state", has the measurement).
#[derive(Debug)]
pub struct Barrier {
    timeout_ms: i64,
    gangs: DashMap<String, Held>,
    /// Binds held now, kept beside the map so that `/metrics` does not walk it.
    held: AtomicUsize,
}

/// Whether `roles` (held and bound) meet `needs`.
fn complete<'a>(needs: &Needs, roles: impl Iterator<Item = Option<&'a str>> + Clone) -> bool {
    if roles.clone().count() < needs.min_member as usize {
        return false;
    }
    needs.roles.iter().all(|(role, min)| {
        roles.clone().filter(|r| *r == Some(role.as_str())).count() >= *min as usize
    })
}

impl Barrier {
    /// A barrier that fails a gang's binds `timeout_ms` after the first was held.
    pub fn new(timeout_ms: i64) -> Self {
        Self {
            timeout_ms,
            gangs: DashMap::new(),
            held: AtomicUsize::new(0),
        }
    }

    /// A bind of a pod of `gang` arrives at `now_ms`. `needs` is what the gang needs and
    /// `bound` the roles of its pods already bound (not counting this one). Returns the binds
    /// released: all of the gang's once it is complete, or the one an earlier bind of the same
    /// pod held (kube-scheduler retried it).
    pub fn arrive(
        &self,
        gang: &str,
        a: Arrival,
        needs: &Needs,
        bound: &[Option<&str>],
        now_ms: i64,
    ) -> Vec<Release> {
        let mut out = Vec::new();
        let take = |held: &mut Held, out: &mut Vec<Release>| {
            if let Some(i) = held.binds.iter().position(|b| b.pod == a.pod) {
                let old = held.binds.remove(i);
                self.held.fetch_sub(1, Ordering::Relaxed);
                out.push(Release::Fail(
                    old.ticket,
                    format!(
                        "pod {} asked to bind again; this request is superseded",
                        old.pod
                    ),
                ));
            }
            held.binds.push(a);
            self.held.fetch_add(1, Ordering::Relaxed);
            let roles = held
                .binds
                .iter()
                .map(|b| b.role.as_deref())
                .chain(bound.iter().copied());
            complete(needs, roles)
        };
        let passed = match self.gangs.entry(gang.to_string()) {
            Entry::Occupied(mut o) => {
                if take(o.get_mut(), &mut out) {
                    Some(o.remove())
                } else {
                    None
                }
            }
            Entry::Vacant(v) => {
                let mut held = Held {
                    since_ms: now_ms,
                    binds: Vec::new(),
                };
                if take(&mut held, &mut out) {
                    Some(held)
                } else {
                    v.insert(held);
                    None
                }
            }
        };
        if let Some(held) = passed {
            out.extend(self.unhold(held).map(Release::Bind));
        }
        out
    }

    /// A gang's binds, no longer counted as held.
    fn unhold(&self, held: Held) -> impl Iterator<Item = Arrival> {
        self.held.fetch_sub(held.binds.len(), Ordering::Relaxed);
        held.binds.into_iter()
    }

    /// Fails every held bind of a gang whose barrier is past its timeout at `now_ms`.
    pub fn expire(&self, now_ms: i64) -> Vec<Release> {
        let timeout = self.timeout_ms;
        let due: Vec<String> = self
            .gangs
            .iter()
            .filter(|h| now_ms >= h.since_ms + timeout)
            .map(|h| h.key().clone())
            .collect();
        let mut out = Vec::new();
        for gang in due {
            // Gone meanwhile (it completed, or was released): nothing to fail.
            let Some((_, h)) = self
                .gangs
                .remove_if(&gang, |_, h| now_ms >= h.since_ms + timeout)
            else {
                continue;
            };
            let why = format!(
                "gang {gang}: {} pod(s) reached bind within {} ms, not the whole gang; nothing was bound",
                h.binds.len(),
                timeout
            );
            out.extend(self.unhold(h).map(|b| Release::Fail(b.ticket, why.clone())));
        }
        out
    }

    /// Fails every held bind of `gang` (its plan changed, or it is gone).
    pub fn release(&self, gang: &str, why: &str) -> Vec<Release> {
        self.gangs
            .remove(gang)
            .map(|(_, h)| {
                self.unhold(h)
                    .map(|b| Release::Fail(b.ticket, format!("gang {gang}: {why}")))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The gang a pod's bind is held in, if it is.
    pub fn gang_of(&self, pod: &str) -> Option<String> {
        self.gangs
            .iter()
            .find(|h| h.binds.iter().any(|b| b.pod == pod))
            .map(|h| h.key().clone())
    }

    /// When the next gang times out.
    pub fn next_deadline(&self) -> Option<i64> {
        self.gangs
            .iter()
            .map(|h| h.since_ms + self.timeout_ms)
            .min()
    }

    /// Binds held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(ticket: Ticket, pod: &str, role: &str) -> Arrival {
        Arrival {
            ticket,
            pod: pod.into(),
            role: Some(role.into()),
            node: "n1".into(),
        }
    }

    fn needs(min: u32, roles: &[(&str, u32)]) -> Needs {
        Needs {
            min_member: min,
            roles: roles.iter().map(|(r, m)| (r.to_string(), *m)).collect(),
        }
    }

    #[test]
    fn binds_are_held_until_the_gang_is_complete_then_all_pass() {
        let b = Barrier::new(20_000);
        let n = needs(3, &[]);
        assert!(
            b.arrive("ml/llm", a(1, "ml/w0", "w"), &n, &[], 0)
                .is_empty()
        );
        assert!(
            b.arrive("ml/llm", a(2, "ml/w1", "w"), &n, &[], 10)
                .is_empty()
        );
        let out = b.arrive("ml/llm", a(3, "ml/w2", "w"), &n, &[], 20);
        assert_eq!(out.len(), 3);
        assert!(out.iter().all(|r| matches!(r, Release::Bind(_))));
        assert_eq!(b.held(), 0);
    }

    #[test]
    fn a_role_below_its_minimum_keeps_the_barrier_closed() {
        let b = Barrier::new(20_000);
        let n = needs(2, &[("ps", 1)]);
        assert!(b.arrive("g", a(1, "w0", "worker"), &n, &[], 0).is_empty());
        assert!(b.arrive("g", a(2, "w1", "worker"), &n, &[], 0).is_empty());
        assert_eq!(b.arrive("g", a(3, "ps0", "ps"), &n, &[], 0).len(), 3);
    }

    #[test]
    fn pods_already_bound_count_towards_the_gang() {
        let b = Barrier::new(20_000);
        let out = b.arrive(
            "g",
            a(1, "w2", "w"),
            &needs(3, &[]),
            &[Some("w"), Some("w")],
            0,
        );
        assert_eq!(out, vec![Release::Bind(a(1, "w2", "w"))]);
    }

    #[test]
    fn an_incomplete_gang_fails_every_held_bind_at_the_timeout() {
        let b = Barrier::new(20_000);
        let n = needs(3, &[]);
        b.arrive("g", a(1, "w0", "w"), &n, &[], 0);
        b.arrive("g", a(2, "w1", "w"), &n, &[], 5_000);
        assert_eq!(b.next_deadline(), Some(20_000));
        assert!(b.expire(19_999).is_empty());
        let out = b.expire(20_000);
        assert_eq!(out.len(), 2);
        assert!(matches!(&out[0], Release::Fail(1, why) if why.contains("2 pod(s)")));
        assert_eq!(b.held(), 0);
    }

    #[test]
    fn a_changed_plan_fails_every_held_bind_of_the_gang() {
        let b = Barrier::new(20_000);
        let n = needs(3, &[]);
        b.arrive("g", a(1, "w0", "w"), &n, &[], 0);
        b.arrive("g", a(2, "w1", "w"), &n, &[], 0);
        assert_eq!(b.gang_of("w1").as_deref(), Some("g"));
        let out = b.release("g", "its plan changed");
        assert_eq!(out.len(), 2);
        assert!(
            out.iter()
                .all(|r| matches!(r, Release::Fail(_, why) if why.contains("plan changed")))
        );
        assert_eq!((b.held(), b.next_deadline()), (0, None));
    }

    #[test]
    fn a_retried_bind_supersedes_the_held_one() {
        let b = Barrier::new(20_000);
        let n = needs(2, &[]);
        b.arrive("g", a(1, "w0", "w"), &n, &[], 0);
        let out = b.arrive("g", a(2, "w0", "w"), &n, &[], 1);
        assert!(matches!(&out[..], [Release::Fail(1, _)]));
        assert_eq!(b.held(), 1);
    }

    #[test]
    fn concurrent_binds_of_many_gangs_each_pass_whole_and_once() {
        let b = Barrier::new(20_000);
        let n = needs(4, &[]);
        // 4 threads; pod `p` of every gang arrives from thread `p`, so each gang completes on
        // whichever thread brings its last pod.
        let released: Vec<Vec<Release>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|p| {
                    let (b, n) = (&b, &n);
                    s.spawn(move || {
                        (0..500)
                            .flat_map(|g| {
                                let pod = format!("g{g}/p{p}");
                                b.arrive(&format!("g{g}"), a(g * 4 + p + 1, &pod, "w"), n, &[], 0)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect()
        });
        let mut by_gang: std::collections::BTreeMap<String, Vec<Ticket>> = Default::default();
        for out in &released {
            // A release is one whole gang: its 4 binds together.
            for chunk in out.chunks(4) {
                let gangs: std::collections::BTreeSet<&str> = chunk
                    .iter()
                    .map(|r| match r {
                        Release::Bind(a) => a.pod.split('/').next().unwrap_or_default(),
                        Release::Fail(..) => "failed",
                    })
                    .collect();
                assert_eq!(gangs.len(), 1, "one gang per release: {chunk:?}");
            }
            for r in out {
                if let Release::Bind(a) = r {
                    let g = a.pod.split('/').next().unwrap_or_default().to_string();
                    by_gang.entry(g).or_default().push(a.ticket);
                }
            }
        }
        assert_eq!(by_gang.len(), 500, "every gang passed");
        assert!(by_gang.values().all(|t| t.len() == 4), "each whole, once");
        assert_eq!((b.held(), b.next_deadline()), (0, None));
    }
}
