//! The queue controller's adapter: watches Queues, PodGroups and Commands, and runs
//! [`tephra_controllers::queue_state::reconcile`] for a Queue whenever it, one of its
//! PodGroups or a Command for it changes; then writes the state and counts it returns, the
//! closed-by-parent mark, and an Event. A Command is deleted before it is carried out, so it
//! runs at most once. When a queue's state changes, its children are looked at next.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tephra_api::scheduling::QueueState;
use tephra_api::{Command, PodGroup, Queue};
use tephra_controllers::queue_state::{
    CLOSED_BY_PARENT, QueueCommand, QueueObserved, ROOT, reconcile,
};
use tokio::task::JoinHandle;

use crate::commands;
use crate::events::{EventFor, record};
use crate::leader::Leadership;
use crate::reconciler::{self, Reconciler, WorkQueue, resync, watch};

/// How the queue controller runs.
#[derive(Clone, Debug)]
pub struct QueueControllerOptions {
    /// This replica's name, on the Events it records.
    pub identity: String,
    /// How often every Queue is looked at even if nothing changed.
    pub resync: Duration,
    /// Failed passes, by reason (`tephra_controller_errors_total`).
    pub errors: reconciler::ErrorCounter,
}

impl Default for QueueControllerOptions {
    fn default() -> Self {
        Self {
            identity: "tephra-controller-manager".into(),
            resync: Duration::from_secs(30),
            errors: reconciler::ErrorCounter::default(),
        }
    }
}

/// The Queue a Command is for (`target` a `scheduling.volcano.sh` Queue).
fn command_target(c: &Command) -> Option<String> {
    let t = c.fields.target.as_ref()?;
    (t.kind == "Queue" && t.api_version.starts_with("scheduling.volcano.sh/"))
        .then(|| t.name.clone())
}

/// Starts the queue controller. It writes only while `leadership` leads.
pub fn start(
    client: Client,
    options: QueueControllerOptions,
    leadership: Leadership,
) -> Vec<JoinHandle<()>> {
    let errors = options.errors.clone();
    let (queue, rx) = WorkQueue::new();
    let (queues, queues_w) = reflector::store();
    let (pgs, pgs_w) = reflector::store();
    let (commands, commands_w) = reflector::store();
    let all = watcher::Config::default;
    let mut tasks = vec![
        watch(&client, all(), queues_w, &queue, |q: &Queue| {
            Some(q.name_any())
        }),
        watch(&client, all(), pgs_w, &queue, |pg: &PodGroup| {
            Some(pg.spec.queue.clone())
        }),
        watch(&client, all(), commands_w, &queue, command_target),
    ];
    {
        let queues = queues.clone();
        tasks.push(resync(&queue, options.resync, move || {
            queues.state().iter().map(|q| q.name_any()).collect()
        }));
    }
    let worker = Worker {
        client,
        options,
        queues,
        pgs,
        commands,
        queue: queue.clone(),
        written: HashMap::new(),
        tree_said: HashMap::new(),
    };
    tasks.push(tokio::spawn(reconciler::run(
        worker, queue, rx, leadership, errors,
    )));
    tasks
}

struct Worker {
    client: Client,
    options: QueueControllerOptions,
    queues: Store<Queue>,
    pgs: Store<PodGroup>,
    commands: Store<Command>,
    queue: WorkQueue<String>,
    /// The Queue as the controller last wrote it, for when the cache has not caught up (a
    /// stale Open read back after a close would otherwise reopen it).
    written: HashMap<String, Arc<Queue>>,
    /// What was last said about each queue's place in the tree (one Event per problem).
    tree_said: HashMap<String, String>,
}

/// Why a pass stopped.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {}", crate::brief::kube(.source))]
pub struct PassError {
    what: String,
    source: kube::Error,
}

fn rv(q: &Queue) -> Option<u64> {
    q.metadata.resource_version.as_deref()?.parse().ok()
}

impl Reconciler for Worker {
    type Key = String;
    type Error = PassError;
    const NAME: &'static str = "queue";

    fn keys(&self) -> Vec<String> {
        self.queues.state().iter().map(|q| q.name_any()).collect()
    }

    async fn pass(&mut self, name: &String) -> Result<(), PassError> {
        let Some(q) = self.get(name) else {
            self.written.remove(name);
            self.tree_said.remove(name);
            return Ok(());
        };
        self.tell_tree_problem(&q).await;
        // A queue created or changed may mend (or break) the trees of those already told.
        for other in self.tree_said.keys().filter(|k| *k != name) {
            self.queue.push(other.clone());
        }
        let parent_name = q
            .spec
            .parent
            .clone()
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| ROOT.to_string());
        let parent = (name != ROOT).then(|| self.get(&parent_name)).flatten();
        let groups: Vec<Arc<PodGroup>> = self
            .pgs
            .state()
            .into_iter()
            .filter(|pg| pg.spec.queue == *name)
            .collect();
        let groups: Vec<&PodGroup> = groups.iter().map(|g| &**g).collect();
        let command = self.take_command(name).await?;
        let out = reconcile(&QueueObserved {
            queue: &q,
            parent: parent.as_deref(),
            podgroups: &groups,
            command,
        });
        let api: Api<Queue> = Api::all(self.client.clone());
        let err = |what: String| move |source| PassError { what, source };
        let was = q.status.as_ref().and_then(|s| s.state);
        if out.status_changed {
            let c = out.counts;
            let patch = serde_json::json!({"status": {
                "state": out.state,
                "pending": c.pending, "inqueue": c.inqueue, "running": c.running,
                "unknown": c.unknown, "completed": c.completed,
            }});
            let updated = api
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(err(format!("writing status of queue {name}")))?;
            self.written.insert(name.clone(), Arc::new(updated));
        }
        if let Some(mark) = out.closed_by_parent {
            let patch = serde_json::json!({"metadata": {"annotations": {
                CLOSED_BY_PARENT: mark.to_string()}}});
            let updated = api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(err(format!("marking queue {name}")))?;
            self.written.insert(name.clone(), Arc::new(updated));
        }
        if let Some((warning, reason, message)) = &out.event {
            let on = EventFor {
                namespace: "default",
                api_version: "scheduling.volcano.sh/v1beta1",
                kind: "Queue",
                name,
                uid: q.metadata.uid.clone(),
            };
            record(
                &self.client,
                &on,
                reason,
                message,
                *warning,
                &self.options.identity,
            )
            .await;
        }
        if was != Some(out.state) {
            tracing::info!(queue = %name, from = ?was, to = ?out.state, "queue state");
            for child in self.queues.state() {
                if child.spec.parent.as_deref() == Some(name.as_str()) {
                    self.queue.push(child.name_any());
                }
            }
            if out.state == QueueState::Closing {
                // Closing settles into Closed when its last PodGroup goes; PodGroup deletions
                // queue the queue, and so does the resync.
                tracing::debug!(queue = %name, groups = groups.len(), "draining");
            }
        }
        Ok(())
    }

    fn reason(e: &PassError) -> &str {
        reconciler::api_reason(&e.source)
    }
}

impl Worker {
    /// A queue whose `spec.parent` names no queue, or makes a cycle, gets one Warning Event
    /// saying so (the scheduler admits nothing new into it meanwhile); fixed, it is forgotten.
    async fn tell_tree_problem(&mut self, q: &Queue) {
        let name = q.name_any();
        let problem = tephra_scheduler::framework::queues::tree_problem(&name, |n| {
            self.get(n).map(|q| q.spec.parent.clone())
        });
        let Some(problem) = problem else {
            self.tree_said.remove(&name);
            return;
        };
        let message = format!("{problem}; the scheduler admits nothing new into it until fixed");
        if self.tree_said.get(&name) == Some(&message) {
            return;
        }
        tracing::warn!(queue = %name, problem = %problem, "queue tree broken");
        let on = EventFor {
            namespace: "default",
            api_version: "scheduling.volcano.sh/v1beta1",
            kind: "Queue",
            name: &name,
            uid: q.metadata.uid.clone(),
        };
        let reason = match problem {
            tephra_scheduler::framework::queues::TreeProblem::Missing(_) => "ParentNotFound",
            tephra_scheduler::framework::queues::TreeProblem::Cycle(_) => "ParentCycle",
        };
        record(
            &self.client,
            &on,
            reason,
            &message,
            true,
            &self.options.identity,
        )
        .await;
        self.tree_said.insert(name, message);
    }

    /// The Queue from the cache, or as last written when the cache is older.
    fn get(&self, name: &str) -> Option<Arc<Queue>> {
        let cached = self.queues.get(&ObjectRef::new(name));
        match (cached, self.written.get(name)) {
            (Some(c), Some(w)) if w.metadata.uid == c.metadata.uid && rv(w) > rv(&c) => {
                Some(Arc::clone(w))
            }
            (c, _) => c,
        }
    }

    /// The oldest Command for this queue, deleted before it is carried out. A Command whose
    /// action is not a queue's is deleted with a warning Event.
    async fn take_command(&self, name: &str) -> Result<Option<QueueCommand>, PassError> {
        let mine = commands::oldest_first(&self.commands, |c| {
            command_target(c).as_deref() == Some(name)
        });
        let Some(cmd) = mine.first() else {
            return Ok(None);
        };
        let ns = cmd.namespace().unwrap_or_else(|| "default".into());
        let taken = commands::take(&self.client, cmd)
            .await
            .map_err(|source| PassError {
                what: format!("deleting Command {ns}/{}", cmd.name_any()),
                source,
            })?;
        if mine.len() > 1 {
            self.queue.push(name.to_string());
        }
        if !taken {
            return Ok(None);
        }
        let action = cmd.fields.action.clone().unwrap_or_default();
        match QueueCommand::parse(&action) {
            Some(c) => {
                tracing::info!(queue = %name, action = %action, command = %cmd.name_any(), "command");
                Ok(Some(c))
            }
            None => {
                let on = EventFor {
                    namespace: &ns,
                    api_version: "bus.volcano.sh/v1alpha1",
                    kind: "Command",
                    name: &cmd.name_any(),
                    uid: cmd.metadata.uid.clone(),
                };
                let message =
                    format!("action {action:?} is not one a Queue takes (OpenQueue, CloseQueue)");
                record(
                    &self.client,
                    &on,
                    "InvalidCommand",
                    &message,
                    true,
                    &self.options.identity,
                )
                .await;
                Ok(None)
            }
        }
    }
}
