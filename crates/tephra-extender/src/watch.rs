//! Feeds the extender's index from the member: a watch of its pods and of its PodGroups (when
//! the member has Volcano's CRDs). A relist replaces nothing wholesale: every object the
//! relist brings is taken in again, and a pod's deletion reaches the barrier.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tephra_api::PodGroup;

use crate::server::Extender;

/// Watches the member's pods and PodGroups until the returned tasks are aborted.
pub fn start(ext: Arc<Extender>, member: kube::Client) -> Vec<tokio::task::JoinHandle<()>> {
    let pods: Api<Pod> = Api::all(member.clone());
    let groups: Api<PodGroup> = Api::all(member);
    let e = Arc::clone(&ext);
    let pod_task = tokio::spawn(async move {
        // Backoff between failed attempts: without it a member that went away is retried in a
        // loop that never yields, which also keeps the runtime from shutting down.
        let stream = watcher::watcher(pods, watcher::Config::default()).default_backoff();
        futures::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => e.pod_changed(&p),
                Ok(watcher::Event::Delete(p)) => e.pod_gone(&crate::index::key_of(&p)),
                Ok(_) => {}
                Err(err) => tracing::warn!(error = %err, "watching the member's pods"),
            }
        }
    });
    let group_task = tokio::spawn(async move {
        let stream = watcher::watcher(groups, watcher::Config::default()).default_backoff();
        futures::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::Apply(g) | watcher::Event::InitApply(g)) => {
                    ext.index().upsert_gang(&g);
                }
                Ok(watcher::Event::Delete(g)) => {
                    let key = format!(
                        "{}/{}",
                        g.metadata.namespace.as_deref().unwrap_or("default"),
                        g.metadata.name.as_deref().unwrap_or_default()
                    );
                    ext.index().remove_gang(&key);
                }
                Ok(_) => {}
                Err(err) => tracing::debug!(error = %err, "watching the member's PodGroups"),
            }
        }
    });
    vec![pod_task, group_task]
}
