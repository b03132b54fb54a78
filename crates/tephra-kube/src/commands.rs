//! `bus.volcano.sh` Commands as the controllers take them: the oldest Command for a target
//! first, deleted before it is carried out, so that each runs at most once (as Volcano does).

use std::sync::Arc;

use kube::api::{Api, DeleteParams};
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};
use tephra_api::Command;

/// The Commands in `store` that `mine` accepts, oldest first (by creation time, then name).
pub fn oldest_first(store: &Store<Command>, mine: impl Fn(&Command) -> bool) -> Vec<Arc<Command>> {
    let mut out: Vec<Arc<Command>> = store.state().into_iter().filter(|c| mine(c)).collect();
    out.sort_by(|a, b| {
        let at = |c: &Command| c.metadata.creation_timestamp.as_ref().map(|t| t.0);
        at(a)
            .cmp(&at(b))
            .then_with(|| a.name_any().cmp(&b.name_any()))
    });
    out
}

/// Deletes `cmd` before it is carried out: `Ok(false)` when it was already gone (another pass
/// or replica took it).
pub async fn take(client: &Client, cmd: &Command) -> Result<bool, kube::Error> {
    let ns = cmd.namespace().unwrap_or_else(|| "default".into());
    let api: Api<Command> = Api::namespaced(client.clone(), &ns);
    match api.delete(&cmd.name_any(), &DeleteParams::default()).await {
        Ok(_) => Ok(true),
        Err(e) if crate::gone::is_gone(&e) => Ok(false),
        Err(e) => Err(e),
    }
}
