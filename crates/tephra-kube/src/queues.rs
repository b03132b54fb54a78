//! The queue controller's adapter: watches Queues, PodGroups and Commands, and runs
//! [`tephra_controllers::queue_state::reconcile`] for a Queue whenever it, one of its
//! PodGroups or a Command for it changes; then writes the state and counts it returns, the
//! closed-by-parent mark, and an Event. A Command is deleted before it is carried out, so it
//! runs at most once. When a queue's state changes, its children are looked at next. It runs
//! on kube-runtime's `Controller`, one pass at a time, while this replica leads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{self, Action as ControllerAction, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tephra_api::scheduling::QueueState;
use tephra_api::{Command, PodGroup, Queue};
use tephra_controllers::queue_state::{
    CLOSED_BY_PARENT, QueueCommand, QueueObserved, ROOT, reconcile,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::commands;
use crate::events::{EventFor, record};
use crate::leader::Leadership;
use crate::reconciler;

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
    vec![tokio::spawn(reconciler::while_leading(
        leadership,
        move |lost| run(client.clone(), options.clone(), lost),
    ))]
}

/// One term as leader: a kube-runtime `Controller` over Queues, triggered by the Queues, their
/// PodGroups, the Commands for them and the passes themselves (a queue whose state changed
/// has its children looked at next), one pass at a time, until `lost`.
async fn run(client: Client, options: QueueControllerOptions, lost: reconciler::Lost) {
    let (pgs, pgs_w) = reflector::store();
    let (commands, commands_w) = reflector::store();
    let all = watcher::Config::default;
    let pgs_s = reconciler::watched(&client, pgs_w, all());
    let commands_s = reconciler::watched(&client, commands_w, all());
    let (next, asked) = mpsc::unbounded_channel::<String>();
    let asked = futures::stream::unfold(asked, |mut rx| async move {
        rx.recv().await.map(|name| (ObjectRef::new(&name), rx))
    });
    let controller = Controller::new(Api::<Queue>::all(client.clone()), all())
        .trigger_backoff(reconciler::TriggerBackoff)
        .with_config(controller::Config::default().concurrency(1));
    let ctx = Arc::new(QueuePasses {
        queues: controller.store(),
        client,
        options,
        pgs,
        commands,
        next,
        written: Mutex::new(HashMap::new()),
        tree_said: Mutex::new(HashMap::new()),
        failures: reconciler::Failures::default(),
    });
    controller
        .watches_stream(pgs_s, |pg: PodGroup| Some(ObjectRef::new(&pg.spec.queue)))
        .watches_stream(commands_s, |c: Command| {
            command_target(&c).map(|n| ObjectRef::new(&n))
        })
        .reconcile_on(asked)
        .graceful_shutdown_on(lost)
        .run(pass, failed, ctx)
        .for_each(|_| async {})
        .await;
}

/// One pass over a Queue; it is looked at again after the resync period.
async fn pass(q: Arc<Queue>, w: Arc<QueuePasses>) -> Result<ControllerAction, PassError> {
    let name = q.name_any();
    // Nothing is decided before the PodGroups and Commands are listed: a queue closed while
    // its PodGroups are not known yet would go straight to Closed instead of Closing (as
    // Volcano's controller waits for its caches to sync).
    if w.pgs.wait_until_ready().now_or_never().is_none()
        || w.commands.wait_until_ready().now_or_never().is_none()
    {
        return Ok(ControllerAction::requeue(NOT_LISTED_YET));
    }
    w.pass(&name).await?;
    w.failures.succeeded(&name);
    Ok(ControllerAction::requeue(w.options.resync))
}

/// A pass failed: counted by reason, and tried again after the backoff its failures earn.
fn failed(q: Arc<Queue>, e: &PassError, w: Arc<QueuePasses>) -> ControllerAction {
    let name = q.name_any();
    w.options
        .errors
        .inc(NAME, reconciler::api_reason(&e.source));
    let wait = w.failures.failed(name.clone());
    tracing::warn!(controller = NAME, queue = %name, error = %e,
        retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        "pass failed; retrying");
    ControllerAction::requeue(wait)
}

/// The controller's name, in logs and `tephra_controller_errors_total`.
const NAME: &str = "queue";

/// How soon a queue is looked at again when its PodGroups or Commands are not listed yet.
const NOT_LISTED_YET: std::time::Duration = std::time::Duration::from_millis(100);

/// What the Queues, their PodGroups and Commands look like to the passes.
struct QueuePasses {
    client: Client,
    options: QueueControllerOptions,
    queues: Store<Queue>,
    pgs: Store<PodGroup>,
    commands: Store<Command>,
    /// Queues to look at next.
    next: mpsc::UnboundedSender<String>,
    /// The Queue as the controller last wrote it, for when the cache has not caught up (a
    /// stale Open read back after a close would otherwise reopen it).
    written: Mutex<HashMap<String, Arc<Queue>>>,
    /// What was last said about each queue's place in the tree (one Event per problem).
    tree_said: Mutex<HashMap<String, String>>,
    /// Each Queue's failed passes in a row.
    failures: reconciler::Failures<String>,
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

impl QueuePasses {
    /// Queues `name` to be looked at next.
    fn look_at(&self, name: String) {
        let _ = self.next.send(name);
    }

    /// Forgets what was written and said of queues that are gone (a pass runs only for
    /// queues that exist).
    fn forget_deleted(&self) {
        let here = |n: &String| self.queues.get(&ObjectRef::new(n)).is_some();
        if let Ok(mut w) = self.written.lock() {
            w.retain(|n, _| here(n));
        }
        if let Ok(mut t) = self.tree_said.lock() {
            t.retain(|n, _| here(n));
        }
    }

    /// One pass over the Queue `name`.
    async fn pass(&self, name: &str) -> Result<(), PassError> {
        self.forget_deleted();
        let Some(q) = self.get(name) else {
            return Ok(());
        };
        self.tell_tree_problem(&q).await;
        // A queue created or changed may mend (or break) the trees of those already told.
        let told: Vec<String> = self
            .tree_said
            .lock()
            .map(|t| t.keys().filter(|k| *k != name).cloned().collect())
            .unwrap_or_default();
        for other in told {
            self.look_at(other);
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
            .filter(|pg| pg.spec.queue == name)
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
        // Whoever sees a queue Closed by its parent sees the mark that says so: the mark is set
        // before the state, and cleared only after the state is Open again (a pass cut between
        // the two writes leaves a mark the next pass still reads correctly).
        if out.closed_by_parent == Some(true) {
            self.mark_closed_by_parent(&api, name, true).await?;
        }
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
            self.wrote(updated);
        }
        if out.closed_by_parent == Some(false) {
            self.mark_closed_by_parent(&api, name, false).await?;
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
                if child.spec.parent.as_deref() == Some(name) {
                    self.look_at(child.name_any());
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

    /// Sets the `volcano.sh/closed-by-parent` annotation of queue `name` to `mark`.
    async fn mark_closed_by_parent(
        &self,
        api: &Api<Queue>,
        name: &str,
        mark: bool,
    ) -> Result<(), PassError> {
        let patch = serde_json::json!({"metadata": {"annotations": {
            CLOSED_BY_PARENT: mark.to_string()}}});
        let updated = api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| PassError {
                what: format!("marking queue {name}"),
                source,
            })?;
        self.wrote(updated);
        Ok(())
    }

    /// The controller wrote `q`: passes read it until the watch catches up.
    fn wrote(&self, q: Queue) {
        if let Ok(mut w) = self.written.lock() {
            w.insert(q.name_any(), Arc::new(q));
        }
    }

    /// A queue whose `spec.parent` names no queue, or makes a cycle, gets one Warning Event
    /// saying so (the scheduler admits nothing new into it meanwhile); fixed, it is forgotten.
    async fn tell_tree_problem(&self, q: &Queue) {
        let name = q.name_any();
        let problem = tephra_scheduler::framework::queues::tree_problem(&name, |n| {
            self.get(n).map(|q| q.spec.parent.clone())
        });
        let Some(problem) = problem else {
            if let Ok(mut t) = self.tree_said.lock() {
                t.remove(&name);
            }
            return;
        };
        let message = format!("{problem}; the scheduler admits nothing new into it until fixed");
        let said = self
            .tree_said
            .lock()
            .is_ok_and(|t| t.get(&name) == Some(&message));
        if said {
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
        if let Ok(mut t) = self.tree_said.lock() {
            t.insert(name, message);
        }
    }

    /// The Queue from the cache, or as last written when the cache is older.
    fn get(&self, name: &str) -> Option<Arc<Queue>> {
        let cached = self.queues.get(&ObjectRef::new(name));
        let written = self.written.lock().ok().and_then(|w| w.get(name).cloned());
        match (cached, written) {
            (Some(c), Some(w)) if w.metadata.uid == c.metadata.uid && rv(&w) > rv(&c) => Some(w),
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
            self.look_at(name.to_string());
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
