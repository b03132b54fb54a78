//! What the simulated CronJob and JobFlow controllers keep: the objects as they last wrote
//! them, the Jobs they made, and how many. Data only: their steps are `scheduled/mod.rs`'s.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use tephra_api::Job;

use crate::agenda::Ev;
use crate::workload::manifests::Scheduled;

/// The virtual clock's `ms` as a time (its zero is the Unix epoch).
pub(crate) fn at(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The simulated controllers' state: the objects as their controllers last wrote them, and
/// the Jobs they made.
#[derive(Default)]
pub(crate) struct Controllers {
    pub(crate) docs: Scheduled,
    /// Every Job made and not deleted, by `namespace/name`, as last seen.
    pub(super) made: BTreeMap<String, Job>,
    /// Jobs each CronJob and JobFlow made, by index.
    pub(super) cron_runs: Vec<u64>,
    pub(super) flow_runs: Vec<u64>,
}

impl Controllers {
    /// Takes the documents: each CronJob and JobFlow gets a UID and a creation time (the
    /// simulation's start); what falls due first goes on the agenda.
    pub(crate) fn new(mut docs: Scheduled, agenda: &mut impl FnMut(i64, Ev)) -> Self {
        for (i, (_, c)) in docs.crons.iter_mut().enumerate() {
            c.metadata.uid = Some(format!("sim-cronjob-{i}"));
            c.metadata.creation_timestamp = Some(Time(at(0)));
            c.metadata.namespace.get_or_insert_with(|| "default".into());
            agenda(0, Ev::Cron(i));
        }
        for (i, (_, f, submit)) in docs.flows.iter_mut().enumerate() {
            f.metadata.uid = Some(format!("sim-jobflow-{i}"));
            f.metadata.creation_timestamp = Some(Time(at(*submit)));
            f.metadata.namespace.get_or_insert_with(|| "default".into());
            agenda(*submit, Ev::Flow(i));
        }
        Self {
            cron_runs: vec![0; docs.crons.len()],
            flow_runs: vec![0; docs.flows.len()],
            docs,
            made: BTreeMap::new(),
        }
    }

    /// What the report notes of them: Jobs made, and each flow's phase.
    pub(crate) fn notes(&self) -> Vec<String> {
        let mut out = Vec::new();
        for ((_, c), n) in self.docs.crons.iter().zip(&self.cron_runs) {
            out.push(format!(
                "CronJob {}/{}: {n} job(s) made",
                c.metadata.namespace.as_deref().unwrap_or("default"),
                c.metadata.name.as_deref().unwrap_or_default()
            ));
        }
        for ((_, f, _), n) in self.docs.flows.iter().zip(&self.flow_runs) {
            let phase = f
                .status
                .as_ref()
                .and_then(|s| s.state.as_ref())
                .and_then(|s| s.phase)
                .map_or_else(|| "not submitted".to_string(), |p| format!("{p:?}"));
            out.push(format!(
                "JobFlow {}/{}: {phase}, {n} job(s) made",
                f.metadata.namespace.as_deref().unwrap_or("default"),
                f.metadata.name.as_deref().unwrap_or_default()
            ));
        }
        out
    }
}
