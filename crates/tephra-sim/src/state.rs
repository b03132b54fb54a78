//! The state of a simulation, and how its parts reach each other. [`Sim`] holds the parts,
//! each a type with its own state and methods: what every part acts through ([`Ctx`]: the
//! clock, the agenda, the cache, the checker and statistics), the jobs and pods in flight
//! ([`InFlight`], defined here; its methods are also in `kubelet.rs` and `jobs/mod.rs`), the
//! fleet (`members/fleet.rs`), failover's book (`failover/book.rs`), the CronJob and JobFlow
//! controllers (`scheduled/controllers.rs`) and the run's faults (`faults.rs`). A part that acts on others is handed them ([`Parts`]), never the whole
//! `Sim`; what one part's change asks of another is wired here, by `Sim`, the coordinator (with
//! the event loop in `engine.rs` and the sessions in `executor.rs`).
//!
//! The parts' files import this file; it imports only the files that define the parts' types,
//! none of which imports it, so no import runs in a circle.

use std::sync::Arc;
use std::time::Instant;

use tephra_controllers::podgroup;
use tephra_scheduler::SchedulerConfig;
use tephra_scheduler::cache::Event;
use tephra_scheduler::model::{PodGroupSpec, PodSpec, TaskShape, TaskStatus};

use crate::Map;
use crate::agenda::Ev;
use crate::ctx::{Ctx, scaled};
use crate::error::SimError;
use crate::failover::book::Book;
use crate::faults::{Change, Faults};
use crate::jobs::vcjob::VcJob;
use crate::members::fleet::Fleet;
use crate::record::Record;
use crate::scenario::Scenario;
use crate::workload::Merged;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PodState {
    Pending,
    Bound,
    Running,
    /// Evicted, terminating: still holds its node until the grace period ends.
    Releasing,
    Done,
}

pub(crate) struct PodRt {
    pub(crate) job: String,
    pub(crate) shape: Arc<TaskShape>,
    pub(crate) request: crate::workload::Request,
    pub(crate) index: u32,
    pub(crate) duration_ms: i64,
    /// The exit code it finishes with (Volcano Jobs' pods: `tephra.io/sim-exit-code`).
    pub(crate) exit_code: i32,
    pub(crate) state: PodState,
    /// The state a Releasing pod was in when evicted.
    pub(crate) releasing_from: PodState,
    pub(crate) node: Option<(String, String)>,
    /// The shared GPUs it was bound with, while it holds its node.
    pub(crate) grants: Option<Arc<tephra_scheduler::model::vgpu::Grants>>,
    pub(crate) generation: u32,
    pub(crate) started_ms: i64,
    pub(crate) gpus: i64,
    pub(crate) cpu_milli: i64,
}

/// A pod to add: `namespace/name`, shape, requests, index, run time and exit code.
pub(crate) struct NewPod {
    pub(crate) key: String,
    pub(crate) shape: Arc<TaskShape>,
    pub(crate) request: crate::workload::Request,
    pub(crate) index: u32,
    pub(crate) duration_ms: i64,
    pub(crate) exit_code: i32,
}

pub(crate) struct JobRt {
    pub(crate) queue: String,
    pub(crate) min: u32,
    pub(crate) pods: Vec<String>,
    pub(crate) submit_ms: i64,
    pub(crate) started: u32,
    pub(crate) waited: bool,
    pub(crate) done: u32,
    pub(crate) group: PodGroupSpec,
    /// The last reason the scheduler gave for not placing the gang (`reason: message`).
    pub(crate) why: Option<String>,
}

/// The jobs and pods in flight: every job submitted (gangs and the pods they have), each pod,
/// and the Volcano Jobs the job controller runs. Its methods: keeping pods and gangs in the
/// cache (here), the kubelets ([`crate::kubelet`]) and the job controller ([`crate::jobs`]).
#[derive(Default)]
pub(crate) struct InFlight {
    /// Jobs by key.
    pub(crate) jobs: Map<String, JobRt>,
    /// Pods by key.
    pub(crate) pods: Map<String, PodRt>,
    /// Volcano Jobs by key.
    pub(crate) vcjobs: Map<String, VcJob>,
    /// Jobs a CronJob or JobFlow made that reached a final phase, as they ended, until the
    /// simulated controllers take them (`scheduled.rs`).
    pub(crate) ended: Vec<tephra_api::Job>,
}

/// What a part acts on besides its own state: the shared context, the jobs and pods in flight,
/// and the fleet (read only).
pub(crate) struct Parts<'a> {
    pub(crate) ctx: &'a mut Ctx,
    pub(crate) flight: &'a mut InFlight,
    pub(crate) fleet: &'a Fleet,
}

/// A simulation in progress: the virtual clock and its agenda, the scheduler's cache and
/// configuration, the jobs and pods in flight, and the checker and statistics watching them.
pub struct Sim {
    /// The scenario as it runs: the file's, with `--seed` and `--until` applied, so that what
    /// the report says of it is what ran.
    pub(crate) scenario: Arc<Scenario>,
    pub(crate) config: Arc<SchedulerConfig>,
    /// The clock, the agenda, the cache and the watchers every part acts through.
    pub(crate) ctx: Ctx,
    pub(crate) sources: Merged,
    /// The CronJob and JobFlow controllers, and what they made.
    pub(crate) scheduled: crate::scheduled::controllers::Controllers,
    /// The jobs and pods in flight.
    pub(crate) flight: InFlight,
    /// The faults of this run: the scenario's, and those drawn from its seed.
    pub(crate) faults: Faults,
    pub(crate) start_delay: i64,
    /// The clusters, their nodes and members ([`crate::members`]).
    pub(crate) fleet: Fleet,
    /// What failover keeps: moved jobs' bindings and the faults' measures ([`crate::failover`]).
    pub(crate) failover: Book,
    pub(crate) wall: Instant,
}

impl InFlight {
    /// Whether `job` is a Volcano Job the controller runs.
    pub(crate) fn is_volcano(&self, job: &str) -> bool {
        self.vcjobs.contains_key(job)
    }

    pub(crate) fn pod_event(
        &mut self,
        ctx: &mut Ctx,
        key: &str,
        status: TaskStatus,
    ) -> Result<(), SimError> {
        let Some(p) = self.pods.get(key) else {
            return Ok(());
        };
        let (ns, name) = key.split_once('/').unwrap_or(("default", key));
        let group = self.jobs.get(&p.job).map(|j| j.group.name.clone());
        let spec = PodSpec {
            gpus: p.grants.clone().filter(|_| p.node.is_some()),
            namespace: ns.to_string(),
            name: name.to_string(),
            group,
            shape: Arc::clone(&p.shape),
            index: p.index,
            status,
            placement: p.node.clone(),
            created: 0,
            lives_in: None,
            planned: None,
            ghost_of: None,
            foreign: false,
        };
        ctx.apply(Event::PodUpsert(spec))
    }

    /// The pod, if an event of this `generation` still applies to it and it is in `state`
    /// (a re-queued pod's old start and finish events are stale).
    pub(crate) fn current_pod(
        &mut self,
        pod: &str,
        generation: u32,
        state: PodState,
    ) -> Option<&mut PodRt> {
        self.pods
            .get_mut(pod)
            .filter(|p| p.generation == generation && p.state == state)
    }

    /// Adds a Pending pod of job `job` (its PodGroup `group`) to the cache and the engine.
    pub(crate) fn add_pod(
        &mut self,
        ctx: &mut Ctx,
        job: &str,
        group: &str,
        pod: NewPod,
    ) -> Result<(), SimError> {
        let (ns, name) = pod.key.split_once('/').unwrap_or(("default", &pod.key));
        ctx.apply(Event::PodUpsert(PodSpec {
            gpus: None,
            namespace: ns.to_string(),
            name: name.to_string(),
            group: Some(group.to_string()),
            shape: Arc::clone(&pod.shape),
            index: pod.index,
            status: TaskStatus::Pending,
            placement: None,
            created: ctx.now / 1000,
            lives_in: None,
            planned: None,
            ghost_of: None,
            foreign: false,
        }))?;
        self.pods.insert(
            pod.key,
            PodRt {
                job: job.to_string(),
                gpus: scaled(&pod.request, "nvidia.com/gpu"),
                cpu_milli: scaled(&pod.request, "cpu"),
                shape: pod.shape,
                request: pod.request,
                index: pod.index,
                duration_ms: pod.duration_ms.max(0),
                exit_code: pod.exit_code,
                state: PodState::Pending,
                releasing_from: PodState::Pending,
                node: None,
                grants: None,
                generation: 0,
                started_ms: 0,
            },
        );
        Ok(())
    }

    /// Puts a job's PodGroup back to Inqueue, for the scheduler to place the gang again.
    pub(crate) fn requeue_group(&mut self, ctx: &mut Ctx, job_key: &str) -> Result<(), SimError> {
        if let Some(j) = self.jobs.get_mut(job_key)
            && podgroup::requeue(&mut j.group)
        {
            j.group.phase_since = ctx.now / 1000;
            j.started = 0;
            let spec = j.group.clone();
            ctx.apply(Event::PodGroupUpsert(spec))?;
        }
        Ok(())
    }
}

/// How one part's change reaches the others.
impl Sim {
    /// Failover's book, and the parts it acts on.
    pub(crate) fn failover_parts(&mut self) -> (&mut Book, Parts<'_>) {
        (
            &mut self.failover,
            Parts {
                ctx: &mut self.ctx,
                flight: &mut self.flight,
                fleet: &self.fleet,
            },
        )
    }

    /// A pod of `job` started, stopped or moved: graceful eviction and the measures look again.
    pub(crate) fn failover_job_changed(
        &mut self,
        job: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let (book, mut parts) = self.failover_parts();
        book.job_changed(&mut parts, job, out)
    }

    /// When the run stops (ms of simulated time): `--until`, or the scenario's `run.until`.
    pub(crate) fn until_ms(&self) -> Option<i64> {
        self.scenario.run.until.map(|d| d.0)
    }

    /// A fault began or ended on member `name`: the fleet follows, and if the member answers,
    /// graceful eviction looks at the old copies there.
    pub(crate) fn member_changed(&mut self, name: &str) -> Result<(), SimError> {
        if self.fleet.member_changed(&mut self.ctx, name)? {
            self.failover.evictions_in(&mut self.ctx, name)?;
        }
        Ok(())
    }

    /// One probe of member `name`: a new condition is a fault detected, and taints may follow.
    pub(crate) fn probe(
        &mut self,
        name: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let (changed, pending) = self.fleet.probe(self.ctx.now, name, out);
        if let Some(status) = changed {
            self.failover.detected(self.ctx.now, name, &status);
            self.taints_pass(name, out)?;
        }
        if pending {
            self.fleet.probe_soon(&mut self.ctx, name);
        }
        Ok(())
    }

    /// The cluster controller's pass over member `name`, then the taint manager's.
    pub(crate) fn taints_pass(
        &mut self,
        name: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        if self.fleet.taints_pass(&mut self.ctx, name, out)? {
            let (book, mut parts) = self.failover_parts();
            book.taint_manager(&mut parts, name, out)?;
        }
        Ok(())
    }

    /// A bound pod starts: failover looks at its job again.
    pub(crate) fn start(
        &mut self,
        pod: &str,
        generation: u32,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        match self.flight.start(&mut self.ctx, pod, generation, out)? {
            Some(job) => self.failover_job_changed(&job, out),
            None => Ok(()),
        }
    }

    /// A running pod finishes: failover looks at its job, then its controller or completion.
    pub(crate) fn finish(
        &mut self,
        pod: &str,
        generation: u32,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let Some((job, code)) = self.flight.finish(&mut self.ctx, pod, generation, out)? else {
            return Ok(());
        };
        self.failover_job_changed(&job, out)?;
        self.flight.finished(&mut self.ctx, pod, &job, code, out)
    }

    /// A pod stops holding its node (a Volcano Job's is deleted): failover looks again.
    pub(crate) fn release_pod(
        &mut self,
        pod: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        if self
            .flight
            .pods
            .get(pod)
            .is_some_and(|p| self.flight.is_volcano(&p.job))
        {
            return self.pod_gone(pod, out);
        }
        match self.flight.release_pod(&mut self.ctx, pod)? {
            Some(job) => self.failover_job_changed(&job, out),
            None => Ok(()),
        }
    }

    /// An evicted pod of a Volcano Job finished terminating: failover looks at its job, then
    /// the job controller.
    pub(crate) fn pod_gone(
        &mut self,
        pod: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let Some(job) = self.flight.pod_gone(&mut self.ctx, pod, out)? else {
            return Ok(());
        };
        self.failover_job_changed(&job, out)?;
        self.flight.job_pass(&mut self.ctx, &job, out)
    }

    /// Whether a pod event must wait for its member to answer (held, see
    /// [`crate::members`]): returns true when it was held.
    pub(crate) fn held(&mut self, ev: &Ev) -> bool {
        let pod = match ev {
            Ev::Start(p, _) | Ev::Finish(p, _) | Ev::Released(p, _) => p,
            _ => return false,
        };
        let Some(cluster) = self
            .flight
            .pods
            .get(pod)
            .and_then(|p| p.node.as_ref())
            .map(|(c, _)| c.clone())
        else {
            return false;
        };
        self.fleet.hold_if_cut_off(&cluster, ev)
    }

    /// Fault `i` begins (`begin`) or ends: the faults say what changed, and the fleet, failover
    /// and the gangs on lost nodes follow.
    pub(crate) fn fault(
        &mut self,
        i: usize,
        begin: bool,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let ending = !begin || self.faults.recovers(i);
        let change = self.faults.happen(
            i,
            begin,
            &mut self.ctx,
            &mut self.fleet,
            &mut self.failover,
            out,
        )?;
        match change {
            Change::Member(cluster) => self.member_changed(&cluster)?,
            Change::Nodes {
                cluster,
                nodes,
                record,
            } => self.node_lifecycle(&cluster, &nodes, record, out)?,
            Change::Nothing => {}
        }
        if ending {
            self.ctx.mark_dirty();
        } else if let Some(at) = self.faults.ends_at(i, self.ctx.now) {
            self.ctx.push(at, Ev::FaultEnd(i));
        }
        Ok(())
    }
}
