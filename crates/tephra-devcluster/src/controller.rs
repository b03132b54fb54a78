//! What the devcluster's own controllers (the volume controller, the ResourceClaim controller)
//! share: a task that watches some kinds of one API server and, after any change, reconciles
//! everything once (changes that arrive together are served by one pass), until it is stopped.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::api::ApiServer;
use crate::resource::Builtin;
use crate::store::{Obj, Subscriber};

/// A running controller; stopped when dropped.
pub struct Controller {
    task: JoinHandle<()>,
}

impl Controller {
    /// Runs `reconcile` on `api` once, then after every change to one of `kinds`.
    pub fn start(
        api: Arc<ApiServer>,
        kinds: &[Builtin],
        reconcile: impl Fn(&ApiServer) + Send + 'static,
    ) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel();
        for kind in kinds {
            let def = api.builtin(*kind);
            let _ = api
                .store
                .watch(&def.storage_key(), None, Subscriber::Unbounded(tx.clone()));
        }
        let task = tokio::spawn(async move {
            reconcile(&api);
            while rx.recv().await.is_some() {
                while rx.try_recv().is_ok() {}
                reconcile(&api);
            }
        });
        Self { task }
    }

    /// Stops the controller.
    pub fn shutdown(&self) {
        self.task.abort();
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Every object of a built-in kind, in all namespaces.
pub fn list(api: &ApiServer, kind: Builtin) -> Vec<Obj> {
    let def = api.builtin(kind);
    api.store.list(&def.storage_key(), None, None).0
}
