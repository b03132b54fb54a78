//! The gang barrier behind `bind`, without IO or clock: binds of a gang's pods are held until
//! every pod the gang needs (minMember, and each role's minTaskMember, counting pods already
//! bound) has reached bind; then all of them are released to be bound. A gang whose barrier
//! has not completed `timeout_ms` after its first held bind has every held bind failed, and
//! nothing of it is bound; kube-scheduler retries them. A changed plan releases the gang's
//! held binds with an error too.
//!
//! Each bind carries a ticket the caller uses to answer kube-scheduler's request.

use std::collections::BTreeMap;

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

/// The binds held, per gang.
#[derive(Clone, Debug)]
pub struct Barrier {
    timeout_ms: i64,
    gangs: BTreeMap<String, Held>,
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
            gangs: BTreeMap::new(),
        }
    }

    /// A bind of a pod of `gang` arrives at `now_ms`. `needs` is what the gang needs and
    /// `bound` the roles of its pods already bound (not counting this one). Returns the binds
    /// released: all of the gang's once it is complete, or the one an earlier bind of the same
    /// pod held (kube-scheduler retried it).
    pub fn arrive(
        &mut self,
        gang: &str,
        a: Arrival,
        needs: &Needs,
        bound: &[Option<&str>],
        now_ms: i64,
    ) -> Vec<Release> {
        let mut out = Vec::new();
        let held = self.gangs.entry(gang.to_string()).or_insert(Held {
            since_ms: now_ms,
            binds: Vec::new(),
        });
        if let Some(i) = held.binds.iter().position(|b| b.pod == a.pod) {
            let old = held.binds.remove(i);
            out.push(Release::Fail(
                old.ticket,
                format!(
                    "pod {} asked to bind again; this request is superseded",
                    old.pod
                ),
            ));
        }
        held.binds.push(a);
        let roles = held
            .binds
            .iter()
            .map(|b| b.role.as_deref())
            .chain(bound.iter().copied());
        if complete(needs, roles) {
            let Some(held) = self.gangs.remove(gang) else {
                return out;
            };
            out.extend(held.binds.into_iter().map(Release::Bind));
        }
        out
    }

    /// Fails every held bind of a gang whose barrier is past its timeout at `now_ms`.
    pub fn expire(&mut self, now_ms: i64) -> Vec<Release> {
        let timeout = self.timeout_ms;
        let due: Vec<String> = self
            .gangs
            .iter()
            .filter(|(_, h)| now_ms >= h.since_ms + timeout)
            .map(|(g, _)| g.clone())
            .collect();
        let mut out = Vec::new();
        for gang in due {
            let Some(h) = self.gangs.remove(&gang) else {
                continue;
            };
            let why = format!(
                "gang {gang}: {} pod(s) reached bind within {} ms, not the whole gang; nothing was bound",
                h.binds.len(),
                timeout
            );
            out.extend(
                h.binds
                    .into_iter()
                    .map(|b| Release::Fail(b.ticket, why.clone())),
            );
        }
        out
    }

    /// Fails every held bind of `gang` (its plan changed, or it is gone).
    pub fn release(&mut self, gang: &str, why: &str) -> Vec<Release> {
        self.gangs
            .remove(gang)
            .map(|h| {
                h.binds
                    .into_iter()
                    .map(|b| Release::Fail(b.ticket, format!("gang {gang}: {why}")))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The gang a pod's bind is held in, if it is.
    pub fn gang_of(&self, pod: &str) -> Option<&str> {
        self.gangs
            .iter()
            .find(|(_, h)| h.binds.iter().any(|b| b.pod == pod))
            .map(|(g, _)| g.as_str())
    }

    /// When the next gang times out.
    pub fn next_deadline(&self) -> Option<i64> {
        self.gangs
            .values()
            .map(|h| h.since_ms + self.timeout_ms)
            .min()
    }

    /// Binds held now.
    pub fn held(&self) -> usize {
        self.gangs.values().map(|h| h.binds.len()).sum()
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
        let mut b = Barrier::new(20_000);
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
        let mut b = Barrier::new(20_000);
        let n = needs(2, &[("ps", 1)]);
        assert!(b.arrive("g", a(1, "w0", "worker"), &n, &[], 0).is_empty());
        assert!(b.arrive("g", a(2, "w1", "worker"), &n, &[], 0).is_empty());
        assert_eq!(b.arrive("g", a(3, "ps0", "ps"), &n, &[], 0).len(), 3);
    }

    #[test]
    fn pods_already_bound_count_towards_the_gang() {
        let mut b = Barrier::new(20_000);
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
        let mut b = Barrier::new(20_000);
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
        let mut b = Barrier::new(20_000);
        let n = needs(3, &[]);
        b.arrive("g", a(1, "w0", "w"), &n, &[], 0);
        b.arrive("g", a(2, "w1", "w"), &n, &[], 0);
        assert_eq!(b.gang_of("w1"), Some("g"));
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
        let mut b = Barrier::new(20_000);
        let n = needs(2, &[]);
        b.arrive("g", a(1, "w0", "w"), &n, &[], 0);
        let out = b.arrive("g", a(2, "w0", "w"), &n, &[], 1);
        assert!(matches!(&out[..], [Release::Fail(1, _)]));
        assert_eq!(b.held(), 1);
    }
}
