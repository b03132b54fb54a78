//! One line of `events.jsonl`: `t` (virtual seconds), `kind` (submit, bind, start, finish,
//! fail, evict, delete, job (a Volcano Job's phase, in `reason`), fault, recover) and, where they apply, `job`, `queue`, `task`, `pod`,
//! `cluster`, `node`, `resources`, `reason`, `min_available` and `splittable`.

use std::collections::BTreeMap;

use serde::Serialize;
use tephra_scheduler::decisions::Bind;

use crate::workload::Request;

/// One simulator event.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Record {
    /// Virtual time, seconds.
    pub t: f64,
    /// What happened.
    pub kind: &'static str,
    /// `namespace/name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// Queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Task (role).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Pod (`namespace/name`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// Cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The pod's requests, as Kubernetes quantities (written as an object, keys sorted).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "requests_by_name"
    )]
    pub resources: Option<Request>,
    /// Why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Gang size (submit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_available: Option<u32>,
    /// Whether the gang may be split across clusters (submit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub splittable: Option<bool>,
}

/// A request as a JSON object, keys in order and the last of a repeated key winning (as a
/// `BTreeMap` made from it would), without copying a string.
fn requests_by_name<S: serde::Serializer>(r: &Option<Request>, s: S) -> Result<S::Ok, S::Error> {
    let sorted: BTreeMap<&str, &str> = r
        .iter()
        .flat_map(|r| r.iter())
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    s.collect_map(sorted)
}

/// `,"name":`.
fn key(out: &mut Vec<u8>, name: &str) {
    out.push(b',');
    string(out, name);
    out.push(b':');
}

/// A JSON string: copied as it is when nothing in it needs escaping (names and quantities
/// never do), else escaped by `serde_json`.
fn string(out: &mut Vec<u8>, s: &str) {
    if !needs_escape(s.as_bytes()) {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else if serde_json::to_writer(&mut *out, s).is_err() {
        // Writing into a Vec cannot fail; a string always serializes.
        out.extend_from_slice(b"null");
    }
}

/// Whether JSON needs any byte of `s` escaped (a control character, `"` or `\\`), eight
/// bytes at a time: the per-byte check was most of the cost of writing a line.
fn needs_escape(s: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut chunks = s.chunks_exact(8);
    for c in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(c);
        let x = u64::from_le_bytes(word);
        let quote = x ^ (ONES * u64::from(b'"'));
        let slash = x ^ (ONES * u64::from(b'\\'));
        // A byte below 0x20, or one equal to a quote or a backslash (zero after the xor),
        // sets its high bit here; the test is exact for the word as a whole.
        let hit = (x.wrapping_sub(ONES * 0x20) & !x)
            | (quote.wrapping_sub(ONES) & !quote)
            | (slash.wrapping_sub(ONES) & !slash);
        if hit & HIGH != 0 {
            return true;
        }
    }
    chunks
        .remainder()
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// A number as `serde_json` writes it.
fn number<T: Serialize>(out: &mut Vec<u8>, n: &T) {
    if serde_json::to_writer(&mut *out, n).is_err() {
        out.extend_from_slice(b"null");
    }
}

fn secs(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

fn role_of(pod: &str) -> Option<String> {
    // Pods are named <job>-<role>-<index>; the role is the second-to-last part.
    let mut parts = pod.rsplitn(3, '-');
    parts.next();
    parts.next().map(str::to_string)
}

impl Record {
    /// The quantity the pod requests of resource `name`, if any (the last one named, as in
    /// the object `events.jsonl` holds).
    pub fn resource(&self, name: &str) -> Option<&str> {
        let r = self.resources.as_ref()?;
        r.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A job was submitted.
    pub fn submit(t: i64, job: &str, queue: &str, min: u32, splittable: bool) -> Self {
        Self {
            t: secs(t),
            kind: "submit",
            job: Some(job.into()),
            queue: Some(queue.into()),
            min_available: Some(min),
            splittable: Some(splittable),
            ..Self::default()
        }
    }

    /// Appends the record as one line of JSON (no newline), byte for byte what serializing it
    /// with `serde_json` gives, without the serializer's per-field machinery: the simulator
    /// writes one such line for every submit, bind, start and finish, and at 5,000 nodes the
    /// generic path was about a tenth of a run.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"t\":");
        number(out, &self.t);
        out.extend_from_slice(b",\"kind\":");
        string(out, self.kind);
        let fields = [
            ("job", &self.job),
            ("queue", &self.queue),
            ("task", &self.task),
            ("pod", &self.pod),
            ("cluster", &self.cluster),
            ("node", &self.node),
        ];
        for (name, value) in fields {
            if let Some(v) = value {
                key(out, name);
                string(out, v);
            }
        }
        if let Some(r) = &self.resources {
            key(out, "resources");
            let sorted: BTreeMap<&str, &str> =
                r.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            out.push(b'{');
            for (i, (k, v)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string(out, k);
                out.push(b':');
                string(out, v);
            }
            out.push(b'}');
        }
        if let Some(r) = &self.reason {
            key(out, "reason");
            string(out, r);
        }
        if let Some(m) = &self.min_available {
            key(out, "min_available");
            number(out, m);
        }
        if let Some(b) = self.splittable {
            key(out, "splittable");
            out.extend_from_slice(if b { b"true" } else { b"false" });
        }
        out.push(b'}');
    }

    /// A pod was bound.
    pub fn placed(
        kind: &'static str,
        t: i64,
        job: &str,
        queue: &str,
        b: &Bind,
        req: &Request,
    ) -> Self {
        Self {
            t: secs(t),
            kind,
            job: Some(job.into()),
            queue: Some(queue.into()),
            task: Some(b.role.clone()),
            pod: Some(b.task.clone()),
            cluster: Some(b.cluster.clone()),
            node: Some(b.node.clone()),
            resources: Some(req.clone()),
            ..Self::default()
        }
    }

    /// A pod started, finished, failed or was evicted.
    #[allow(clippy::too_many_arguments)]
    pub fn pod(
        kind: &'static str,
        t: i64,
        job: &str,
        queue: &str,
        pod: &str,
        node: &(String, String),
        req: &Request,
        reason: Option<String>,
    ) -> Self {
        Self {
            t: secs(t),
            kind,
            job: Some(job.into()),
            queue: Some(queue.into()),
            task: role_of(pod),
            pod: Some(pod.into()),
            cluster: Some(node.0.clone()),
            node: Some(node.1.clone()),
            resources: Some(req.clone()),
            reason,
            ..Self::default()
        }
    }

    /// A Volcano Job entered `phase` (`kind: job`, the phase in `reason`).
    pub fn job_phase(t: i64, job: &str, queue: &str, phase: &str) -> Self {
        Self {
            t: secs(t),
            kind: "job",
            job: Some(job.into()),
            queue: Some(queue.into()),
            reason: Some(phase.into()),
            ..Self::default()
        }
    }

    /// A fault began (`fault`) or ended (`recover`).
    pub fn fault(
        kind: &'static str,
        t: i64,
        cluster: &str,
        node: Option<&String>,
        what: &str,
    ) -> Self {
        Self {
            t: secs(t),
            kind,
            cluster: Some(cluster.into()),
            node: node.cloned(),
            reason: Some(what.into()),
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9./-]{0,12}",
            any::<String>(),
            "[\"\\\\\\x00-\\x1f\\u{7f}é😀a]{0,6}",
            "[a-z]{0,12}[\"\\\\\\x00-\\x1f]{0,2}[a-z~\\u{80}-\\u{7ff}]{0,12}",
        ]
    }

    fn record() -> impl Strategy<Value = Record> {
        let names = (
            proptest::option::of(text()),
            proptest::option::of(text()),
            proptest::option::of(text()),
            proptest::option::of(text()),
            proptest::option::of(text()),
            proptest::option::of(text()),
        );
        let rest = (
            proptest::option::of(proptest::collection::vec((text(), text()), 0..4)),
            proptest::option::of(text()),
            proptest::option::of(any::<u32>()),
            proptest::option::of(any::<bool>()),
            prop_oneof![
                (0i64..10_000_000).prop_map(secs),
                any::<f64>(),
                Just(f64::NAN),
                Just(f64::INFINITY),
            ],
            prop_oneof![Just("bind"), Just("submit"), Just("finish")],
        );
        (names, rest).prop_map(
            |((job, queue, task, pod, cluster, node), (res, reason, min, split, t, kind))| Record {
                t,
                kind,
                job,
                queue,
                task,
                pod,
                cluster,
                node,
                resources: res.map(|r| r.into_iter().collect::<Request>()),
                reason,
                min_available: min,
                splittable: split,
            },
        )
    }

    #[test]
    fn each_byte_that_json_escapes_is_found_at_every_position_of_a_word() {
        for len in 1..20 {
            for at in 0..len {
                for bad in (0u8..0x20).chain([b'"', b'\\']) {
                    let mut s = vec![b'a'; len];
                    s[at] = bad;
                    assert!(needs_escape(&s), "{bad:#x} at {at} of {len}");
                }
                // The neighbours of the escaped bytes, DEL and bytes of multibyte characters
                // are written as they are.
                let plain = [b' ', b'!', b'#', b'[', b']', 0x7f, 0x80, 0xc3, 0xff];
                let s: Vec<u8> = (0..len).map(|i| plain[(i + at) % plain.len()]).collect();
                assert!(!needs_escape(&s), "nothing to escape in {s:?}");
            }
        }
    }

    proptest! {
        #[test]
        fn the_hand_written_line_is_byte_for_byte_what_serde_json_writes(r in record()) {
            let mut mine = Vec::new();
            r.write_json(&mut mine);
            let theirs = serde_json::to_string(&r).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(String::from_utf8_lossy(&mine), theirs);
        }
    }
}
