//! One API server's state and its write paths: create, update (with optimistic concurrency and
//! the status subresource), and delete (grace periods, finalizers, namespaces, CRDs, and the
//! dependents of what is removed, in `gc`). HTTP
//! handlers and the simulated kubelet both write through here, so every write follows the same
//! rules and reaches watchers the same way.

use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::{Value, json};

use crate::admit::{self, FieldValidation};
use crate::authz;
use crate::patch::apply::record_update;
use crate::registry::Registry;
use crate::resource::{Builtin, ResourceDef};
use crate::selector::LabelSelector;
use crate::status::ApiError;
use crate::store::{Key, Obj, Store, StoreError, Stored, key_of};
use crate::time;

/// Settings of one API server.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Changes kept per kind for watches that resume from a resourceVersion; older ones get
    /// 410 Gone.
    pub history_limit: usize,
    /// Events buffered per watcher before a slow watcher is dropped (it then resumes).
    pub watch_buffer: usize,
    /// How often a watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
    /// How long a watch without `timeoutSeconds` stays open.
    pub default_watch_timeout: Duration,
    /// Built-in API groups this server does not serve, as a Kubernetes older than 1.34 serves
    /// no `resource.k8s.io` (v1): requests for them get the 404 a real server gives.
    pub unserved_groups: Vec<String>,
    /// How long after an owner is removed the garbage collector looks at its dependents.
    /// kube-controller-manager's collector works from its informers, so a dependent outlives
    /// its owner for a while, in which a client may still write it (and move it to a new owner
    /// of the same name, which needs `delete` on it); zero collects at once.
    pub collector_lag: Duration,
    /// Provisioners that do not run here, as on a cluster without that CSI driver's external
    /// provisioner: their classes' claims are never provisioned (the PV controller and
    /// provisioner of `volumes.rs` otherwise provision every class's claims).
    pub idle_provisioners: Vec<String>,
    /// Whether watches may ask for their initial state as a stream (`sendInitialEvents`), as
    /// Kubernetes 1.34 and later serve them by default; off, such a watch is refused as a
    /// server without the `WatchList` feature gate refuses it.
    pub watch_lists: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            history_limit: 10_000,
            watch_buffer: 100_000,
            bookmark_interval: Duration::from_secs(5),
            default_watch_timeout: Duration::from_secs(1800),
            unserved_groups: Vec::new(),
            collector_lag: Duration::ZERO,
            idle_provisioners: Vec::new(),
            watch_lists: true,
        }
    }
}

/// How a write is made.
#[derive(Clone, Debug, Default)]
pub struct WriteOpts {
    /// `fieldManager` (or the client's user agent).
    pub manager: Option<String>,
    /// `fieldValidation`.
    pub validation: FieldValidation,
    /// `dryRun=All`.
    pub dry_run: bool,
}

/// Which part of an object an update may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The main resource: everything but the status (for kinds with a status subresource).
    Main,
    /// The status subresource: only the status.
    Status,
    /// Both at once (the server's own writes, such as a binding).
    All,
}

/// A write's result.
pub struct Written {
    /// The object as stored (or as it would be, for a dry run).
    pub obj: Obj,
    /// Warnings for the client.
    pub warnings: Vec<String>,
    /// Whether the write removed the object (an update that cleared the last finalizer).
    pub removed: bool,
}

/// Delete options.
#[derive(Clone, Debug, Default)]
pub struct DeleteOpts {
    /// `gracePeriodSeconds`.
    pub grace: Option<i64>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `propagationPolicy`: `Orphan`, `Foreground` or `Background` (the default).
    pub propagation: Option<String>,
}

/// A delete's result.
pub struct Deleted {
    /// The object: removed (with the deletion's resourceVersion) or marked for deletion.
    pub obj: Obj,
    /// Whether it is gone now (false: waiting for finalizers or a grace period).
    pub removed: bool,
}

thread_local! {
    /// The namespaces (per server) whose controller pass is running on this thread: objects
    /// it removes do not start another.
    static FINALIZING: std::cell::RefCell<std::collections::BTreeSet<(String, String)>> =
        const { std::cell::RefCell::new(std::collections::BTreeSet::new()) };
}

/// One API server.
pub struct ApiServer {
    /// Its name (the member cluster's, or `control-plane`).
    pub name: String,
    /// Its objects.
    pub store: Store,
    registry: RwLock<Arc<Registry>>,
    /// Settings.
    pub options: ServerOptions,
    /// An injected failure: every request is answered with this 5xx code while non-zero.
    pub(crate) fault: AtomicU16,
    service_ips: AtomicU32,
    /// Users holding tokens besides the administrator's (service accounts).
    pub users: authz::Users,
    /// What non-administrators asked for, and whether RBAC allowed it.
    pub access: authz::AccessLog,
    /// Requests served, from anyone (for tests that bound a client's request rate).
    requests: AtomicU64,
    /// Itself, for the garbage collector's lagging passes.
    pub(crate) me: std::sync::Weak<ApiServer>,
    /// How it reaches a kubelet served elsewhere (`--kubelet-client-certificate`, no server
    /// verification, as kube-apiserver without `--kubelet-certificate-authority`).
    pub(crate) kubelet_client: std::sync::OnceLock<Arc<rustls::ClientConfig>>,
}

fn storage_error(def: &ResourceDef, name: &str, e: StoreError) -> ApiError {
    match e {
        StoreError::NotFound => ApiError::not_found(&def.group, &def.plural, name),
        StoreError::AlreadyExists => ApiError::already_exists(&def.group, &def.plural, name),
        StoreError::Conflict => ApiError::stale(&def.group, &def.plural, name),
    }
}

impl ApiServer {
    /// A server with the built-in kinds, the usual namespaces and the system priority classes.
    pub fn new(name: &str, options: ServerOptions) -> Arc<Self> {
        let api = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            name: name.to_string(),
            store: Store::new(options.history_limit),
            registry: RwLock::new(Arc::new(Registry::without(&options.unserved_groups))),
            options,
            fault: AtomicU16::new(0),
            service_ips: AtomicU32::new(1),
            users: authz::Users::default(),
            access: authz::AccessLog::default(),
            requests: AtomicU64::new(0),
            kubelet_client: std::sync::OnceLock::new(),
        });
        let opts = WriteOpts::default();
        let ns = api.builtin(Builtin::Namespace);
        for n in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let _ = api.create(&ns, None, json!({"metadata": {"name": n}}), &opts);
        }
        let pc = api.builtin(Builtin::PriorityClass);
        for (n, v) in [
            ("system-cluster-critical", 2_000_000_000i64),
            ("system-node-critical", 2_000_001_000),
        ] {
            let _ = api.create(
                &pc,
                None,
                json!({"metadata": {"name": n}, "value": v,
                       "description": "Used for system critical pods that must not be moved from their current node."}),
                &opts,
            );
        }
        api
    }

    /// Counts one request served.
    pub(crate) fn count_request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// How many requests this server has answered (watches count once, when they start).
    pub fn requests_served(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// What is served now.
    pub fn registry(&self) -> Arc<Registry> {
        self.registry
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn edit_registry(
        &self,
        f: impl FnOnce(&mut Registry) -> Result<(), ApiError>,
    ) -> Result<(), ApiError> {
        let mut guard = self.registry.write().unwrap_or_else(|e| e.into_inner());
        let mut next = (**guard).clone();
        f(&mut next)?;
        *guard = Arc::new(next);
        Ok(())
    }

    /// The resource served at `group/version/plural`.
    pub fn resource(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.registry().lookup(group, version, plural)
    }

    /// A built-in resource.
    pub fn builtin(&self, which: Builtin) -> Arc<ResourceDef> {
        let reg = self.registry();
        // Every built-in is always known, served or not.
        reg.builtin(which)
            .unwrap_or_else(|| reg.resources()[0].clone())
    }

    /// One object.
    pub fn get(&self, def: &ResourceDef, key: &Key) -> Option<Obj> {
        self.store.get(&def.storage_key(), key)
    }

    /// The StorageClass marked the default, if one is.
    fn default_class(&self) -> Option<String> {
        let def = self.builtin(Builtin::StorageClass);
        let (classes, _) = self.store.list(&def.storage_key(), None, None);
        classes
            .iter()
            .find(|c| crate::admit_storage::is_default_class(&c.value))
            .map(|c| admit::name_of(&c.value).to_string())
    }

    fn namespace_exists(&self, ns: &str) -> bool {
        self.store
            .get("/namespaces", &(String::new(), ns.to_string()))
            .is_some()
    }

    fn namespace_terminating(&self, ns: &str) -> bool {
        self.store
            .get("/namespaces", &(String::new(), ns.to_string()))
            .is_some_and(|n| crate::deletion::terminating(&n.value))
    }

    /// Creates an object.
    pub fn create(
        &self,
        def: &Arc<ResourceDef>,
        namespace: Option<&str>,
        mut obj: Value,
        opts: &WriteOpts,
    ) -> Result<Written, ApiError> {
        admit::decode(def, &obj)?;
        admit::set_type(def, &mut obj)?;
        admit::set_namespace(def, &mut obj, namespace)?;
        if def.namespaced {
            let ns = namespace.unwrap_or("default");
            if !self.namespace_exists(ns) {
                return Err(ApiError::not_found("", "namespaces", ns));
            }
            if self.namespace_terminating(ns) {
                return Err(crate::deletion::terminating_error(
                    &def.group,
                    &def.plural,
                    admit::name_of(&obj),
                    ns,
                ));
            }
        }
        if def.builtin == Some(Builtin::Secret) {
            admit::decode_secret(&obj)?;
        }
        // A Namespace named by generateName gets its name label from the registry after the
        // field manager (decoding, which defaults it, saw no name yet): nobody owns it.
        let generated_namespace =
            def.builtin == Some(Builtin::Namespace) && admit::name_of(&obj).is_empty();
        admit::stamp_new(def, &mut obj)?;
        let mut warnings = admit::prune_builtin(def, &mut obj, opts.validation)?;
        // Decoding defaults first: the writer owns them in `managedFields`.
        crate::defaults::apply(def, &mut obj);
        let name_label = if generated_namespace {
            let label = obj
                .pointer_mut("/metadata/labels")
                .and_then(Value::as_object_mut)
                .and_then(|l| l.remove("kubernetes.io/metadata.name"));
            if obj
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .is_some_and(serde_json::Map::is_empty)
                && let Some(meta) = obj["metadata"].as_object_mut()
            {
                meta.remove("labels");
            }
            label
        } else {
            None
        };
        let mut priority = None;
        let mut group_priority = None;
        match def.builtin {
            Some(Builtin::Pod) => {
                priority = self.pod_priority(&obj)?;
                admit::validate_builtin(def, &obj)?;
                crate::admit_pod::check_pod_create(&obj)?;
                // As the Priority admission plugin: a pod may not bring an integer of its own
                // that differs from the one its class gives.
                if let (Some(given), Some(computed)) = (
                    obj.pointer("/spec/priority").and_then(Value::as_i64),
                    priority,
                ) && given != computed
                {
                    return Err(ApiError::forbidden(
                        "",
                        "pods",
                        admit::name_of(&obj),
                        &format!(
                            "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {computed} from the given PriorityClass name"
                        ),
                    ));
                }
            }
            Some(Builtin::Secret) => {
                admit::validate_builtin(def, &obj)?;
                admit::fold_string_data(&mut obj);
            }
            Some(Builtin::KubePodGroup | Builtin::Workload) => {
                if def.builtin == Some(Builtin::KubePodGroup) {
                    group_priority = Some(self.group_priority(&obj)?);
                }
                // Validated as the registry will store it: the fields of gates that are off
                // dropped, the status empty, the priority admission gives it.
                let mut stored = obj.clone();
                crate::validate_workload::drop_gated(def, None, &mut stored);
                if let (Some((_, value)), Some(spec)) = (&group_priority, stored.get_mut("spec")) {
                    spec["priority"] = json!(value);
                }
                let mut causes = crate::validate::metadata(def, &stored);
                causes.extend(crate::validate_workload::check(def, None, &stored));
                admit::refuse_if_any(def, &stored, causes)?;
            }
            Some(Builtin::Crd) => {
                crate::crd::check_crd(&obj)?;
                admit::crd_status(&mut obj);
            }
            Some(
                Builtin::Namespace
                | Builtin::Service
                | Builtin::PersistentVolume
                | Builtin::PersistentVolumeClaim
                | Builtin::StorageClass,
            ) => admit::validate_builtin(def, &obj)?,
            Some(Builtin::ResourceClaim) => {
                // The registry's strategy drops a new claim's status before it validates.
                if let Some(m) = obj.as_object_mut() {
                    m.remove("status");
                }
                admit::validate_builtin(def, &obj)?;
            }
            Some(_) => admit::validate_builtin(def, &obj)?,
            None => {
                if def.status
                    && let Some(m) = obj.as_object_mut()
                {
                    m.remove("status");
                }
                warnings = admit::admit_custom(def, &mut obj, opts.validation, false)?;
            }
        }
        if let Some(manager) = &opts.manager {
            record_update(
                None,
                &mut obj,
                manager,
                !def.is_custom(),
                &time::now_rfc3339(),
            );
        }
        // What admission plugins and the registry set after the field manager recorded the
        // request: nobody owns these fields.
        crate::defaults::encode(def, &mut obj);
        match def.builtin {
            Some(Builtin::Pod) => crate::admit_pod::default_pod(&mut obj, priority),
            Some(Builtin::Namespace) => {
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
                obj["status"] = json!({"phase": "Active"});
                if let Some(label) = name_label {
                    obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = label;
                }
            }
            Some(Builtin::Node) => crate::admit_pod::taint_new_node(&mut obj),
            Some(Builtin::KubePodGroup) => {
                // Admission (priority, protection) and the registry's strategy.
                if let (Some((class, value)), Some(spec)) = (
                    group_priority,
                    obj.get_mut("spec").and_then(Value::as_object_mut),
                ) {
                    spec.insert("priority".into(), json!(value));
                    if let Some(class) = class {
                        spec.insert("priorityClassName".into(), json!(class));
                    }
                }
                let protection = json!(crate::validate_workload::PROTECTION);
                let finalizers = &mut obj["metadata"]["finalizers"];
                match finalizers.as_array_mut() {
                    Some(list) if list.contains(&protection) => {}
                    Some(list) => list.push(protection),
                    None => *finalizers = json!([protection]),
                }
                crate::validate_workload::drop_gated(def, None, &mut obj);
                obj["status"] = json!({});
            }
            Some(Builtin::Workload) => crate::validate_workload::drop_gated(def, None, &mut obj),
            Some(Builtin::Service) => self.default_service(&mut obj),
            Some(Builtin::Pdb) => obj["status"] = self.pdb_status(&obj),
            Some(
                kind @ (Builtin::PersistentVolume
                | Builtin::PersistentVolumeClaim
                | Builtin::StorageClass),
            ) => {
                let default_class = self.default_class();
                crate::admit_storage::default_storage(kind, &mut obj, default_class);
            }
            _ => {}
        }
        if opts.dry_run {
            // A dry run is refused as the write would be.
            if self.store.get(&def.storage_key(), &key_of(&obj)).is_some() {
                return Err(ApiError::already_exists(
                    &def.group,
                    &def.plural,
                    admit::name_of(&obj),
                ));
            }
            return Ok(Written {
                obj: Stored::detached(obj),
                warnings,
                removed: false,
            });
        }
        let name = admit::name_of(&obj).to_string();
        let stored = self
            .store
            .create(&def.storage_key(), obj)
            .map_err(|e| storage_error(def, &name, e))?;
        if def.builtin == Some(Builtin::Crd) {
            self.edit_registry(|r| r.put_crd(&stored.value))?;
        }
        self.collect_if_ownerless(def, &stored);
        Ok(Written {
            obj: stored,
            warnings,
            removed: false,
        })
    }

    /// Updates an object: `f` turns the current object into the new one (it may run again if
    /// another writer got in first). `scope` says which part it may change.
    pub fn update(
        &self,
        def: &Arc<ResourceDef>,
        key: &Key,
        scope: Scope,
        opts: &WriteOpts,
        f: &mut dyn FnMut(&Value) -> Result<Value, ApiError>,
    ) -> Result<Written, ApiError> {
        let kind = def.storage_key();
        loop {
            let cur = self
                .store
                .get(&kind, key)
                .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, &key.1))?;
            let mut new = f(&cur.value)?;
            admit::decode(def, &new)?;
            if def.builtin == Some(Builtin::Secret) {
                admit::decode_secret(&new)?;
            }
            admit::set_type(def, &mut new)?;
            let body_name = admit::name_of(&new);
            if !body_name.is_empty() && body_name != key.1 {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({body_name}) does not match the name on the URL ({})",
                    key.1
                )));
            }
            let status_only = scope == Scope::Status;
            admit::carry_over(def, &cur.value, &mut new, status_only, scope == Scope::Main);
            let mut warnings = admit::prune_builtin(def, &mut new, opts.validation)?;
            crate::defaults::apply(def, &mut new);
            // Mutating admission runs after the field manager recorded the request: what it
            // adds (a pod's tolerations of unready nodes) is recorded as the request had it.
            let mut as_requested = None;
            if scope == Scope::Main && def.builtin == Some(Builtin::Pod) {
                let before = new.clone();
                crate::admit_pod::tolerate_unready_nodes(&mut new);
                if before != new {
                    as_requested = Some(before);
                }
            }
            if scope == Scope::Main && def.builtin == Some(Builtin::Service) {
                crate::admit::service_update(&cur.value, &mut new);
            }
            if !status_only {
                admit::check_finalizers(def, &cur.value, &new)?;
            }
            if scope == Scope::Main && def.builtin == Some(Builtin::Pod) {
                crate::admit_pod::check_pod_update(&cur.value, &new)?;
            }
            match def.builtin {
                Some(Builtin::Crd) if !status_only => {
                    crate::crd::check_crd(&new)?;
                    admit::crd_status(&mut new);
                }
                Some(Builtin::KubePodGroup | Builtin::Workload) => {
                    // Validated as the registry will store it; the fields of gates that are off
                    // are dropped after the field manager recorded the request, as there.
                    let mut stored = new.clone();
                    crate::validate_workload::drop_gated(def, Some(&cur.value), &mut stored);
                    let mut causes = crate::validate::metadata(def, &stored);
                    if status_only {
                        causes.extend(crate::validate_workload::status(&stored));
                    } else {
                        causes.extend(crate::validate_workload::check(
                            def,
                            Some(&cur.value),
                            &stored,
                        ));
                    }
                    admit::refuse_if_any(def, &stored, causes)?;
                }
                Some(b) => {
                    admit::validate_builtin_update(def, Some(&cur.value), &new)?;
                    if b == Builtin::Secret {
                        admit::fold_string_data(&mut new);
                    }
                }
                None => {
                    warnings = admit::admit_custom(def, &mut new, opts.validation, status_only)?;
                }
            }
            if status_only {
                if let Some(manager) = &opts.manager {
                    crate::patch::apply::record_status_update(
                        &cur.value,
                        &mut new,
                        manager,
                        !def.is_custom(),
                        &time::now_rfc3339(),
                    );
                }
            } else {
                // The server's own writes (a binding, the garbage collector's) go to storage
                // past the kind's strategy, which is what raises the generation.
                if scope == Scope::Main {
                    admit::bump_generation(def, &cur.value, &mut new);
                }
                if let Some(manager) = &opts.manager {
                    let mut recorded = as_requested.unwrap_or_else(|| new.clone());
                    record_update(
                        Some(&cur.value),
                        &mut recorded,
                        manager,
                        !def.is_custom(),
                        &time::now_rfc3339(),
                    );
                    match recorded.pointer("/metadata/managedFields") {
                        Some(m) => new["metadata"]["managedFields"] = m.clone(),
                        None => {
                            if let Some(meta) = new["metadata"].as_object_mut() {
                                meta.remove("managedFields");
                            }
                        }
                    }
                }
            }
            crate::validate_workload::drop_gated(def, Some(&cur.value), &mut new);
            crate::defaults::encode(def, &mut new);
            // What the Service registry allocates after the field manager recorded the write.
            if scope == Scope::Main && def.builtin == Some(Builtin::Service) {
                self.allocate_service(&mut new);
            }
            new["metadata"]["resourceVersion"] = json!(cur.rv.to_string());
            if new == cur.value {
                return Ok(Written {
                    obj: cur,
                    warnings,
                    removed: false,
                });
            }
            if opts.dry_run {
                return Ok(Written {
                    obj: Stored::detached(new),
                    warnings,
                    removed: false,
                });
            }
            let finalized = new.pointer("/metadata/deletionTimestamp").is_some()
                && (def.builtin != Some(Builtin::Namespace)
                    || crate::deletion::spec_finalized(&new))
                && new
                    .pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .is_none_or(Vec::is_empty)
                && new
                    .pointer("/metadata/deletionGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                    == 0;
            let result = if finalized {
                self.store
                    .remove(&kind, key, Some(cur.rv))
                    .map(|obj| (obj, true))
            } else {
                self.store
                    .replace(&kind, key, cur.rv, new)
                    .map(|obj| (obj, false))
            };
            match result {
                Ok((obj, removed)) => {
                    if def.builtin == Some(Builtin::Crd) {
                        if removed {
                            self.forget_crd(&obj);
                        } else {
                            self.edit_registry(|r| r.put_crd(&obj.value))?;
                        }
                    } else if removed {
                        // An object its last finalizer let go takes its dependents, as any
                        // removed object does.
                        self.collect_dependents(&obj, def.builtin);
                        self.removed_from_namespace(&key.0);
                    }
                    return Ok(Written {
                        obj,
                        warnings,
                        removed,
                    });
                }
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(storage_error(def, &key.1, e)),
            }
        }
    }

    /// Deletes an object, honouring preconditions, finalizers and (for pods on a node) the
    /// grace period; a namespace terminates first (`namespaces.rs`).
    pub fn delete(
        &self,
        def: &Arc<ResourceDef>,
        key: &Key,
        opts: &DeleteOpts,
    ) -> Result<Deleted, ApiError> {
        if def.builtin == Some(Builtin::Namespace) {
            return self.delete_namespace(def, key, opts);
        }
        self.delete_plain(def, key, opts)
    }

    /// [`Self::delete`] as the generic registry does it.
    pub(crate) fn delete_plain(
        &self,
        def: &Arc<ResourceDef>,
        key: &Key,
        opts: &DeleteOpts,
    ) -> Result<Deleted, ApiError> {
        let kind = def.storage_key();
        loop {
            let cur = self
                .store
                .get(&kind, key)
                .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, &key.1))?;
            // kube-apiserver's BeforeDelete checks the preconditions and names the kind (not
            // the resource) in its conflict.
            if let Some(uid) = &opts.uid
                && uid != cur.uid()
            {
                return Err(ApiError::conflict(
                    &def.group,
                    &def.kind,
                    &key.1,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        cur.uid()
                    ),
                ));
            }
            if let Some(rv) = &opts.resource_version
                && *rv != cur.rv.to_string()
            {
                return Err(ApiError::conflict(
                    &def.group,
                    &def.kind,
                    &key.1,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, \
                         ResourceVersion in object meta: {}",
                        cur.rv
                    ),
                ));
            }
            let mut new = cur.value.clone();
            // kube-apiserver's BeforeDelete: pods are deleted gracefully (the only kind with a
            // graceful strategy): the first delete marks them (deletionTimestamp, grace period,
            // generation + 1) in a write of its own, even with a grace period of 0.
            let mut graceful = false;
            let mut last_grace = 0;
            if def.builtin == Some(Builtin::Pod) {
                match pod_deletion(&cur.value, opts.grace) {
                    PodDeletion::Pending => {
                        return Ok(Deleted {
                            obj: cur,
                            removed: false,
                        });
                    }
                    PodDeletion::Now => {}
                    PodDeletion::Mark {
                        timestamp,
                        grace,
                        first,
                    } => {
                        new["metadata"]["deletionTimestamp"] =
                            json!(time::format_rfc3339(timestamp));
                        new["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
                        if first
                            && let Some(g) =
                                new.pointer("/metadata/generation").and_then(Value::as_i64)
                            && g > 0
                        {
                            new["metadata"]["generation"] = json!(g + 1);
                        }
                        graceful = true;
                        last_grace = grace;
                    }
                }
            }
            let before: Vec<String> = string_list(&cur.value, "/metadata/finalizers");
            let finalizers = gc_finalizers(def, &before, opts.propagation.as_deref());
            if finalizers != before {
                new["metadata"]["finalizers"] = json!(finalizers);
            }
            let pending_finalizers = !finalizers.is_empty();
            if !graceful && pending_finalizers {
                mark_as_deleting(&mut new);
            }
            let removes_now = !pending_finalizers && last_grace == 0;
            if opts.dry_run {
                return Ok(Deleted {
                    obj: if removes_now {
                        cur
                    } else {
                        Stored::detached(new)
                    },
                    removed: removes_now,
                });
            }
            let mut expected = cur.rv;
            if new != cur.value {
                match self.store.replace(&kind, key, cur.rv, new) {
                    Ok(obj) if !removes_now => {
                        if def.builtin == Some(Builtin::KubePodGroup) {
                            self.podgroup_deleting(&obj);
                        }
                        for f in [crate::deletion::ORPHAN, crate::deletion::FOREGROUND] {
                            if obj
                                .value
                                .pointer("/metadata/finalizers")
                                .and_then(Value::as_array)
                                .is_some_and(|fs| fs.iter().any(|x| x.as_str() == Some(f)))
                            {
                                self.collect_for_policy(def, &obj, f);
                            }
                        }
                        return Ok(Deleted {
                            obj,
                            removed: false,
                        });
                    }
                    Ok(obj) => expected = obj.rv,
                    Err(StoreError::Conflict) => continue,
                    Err(e) => return Err(storage_error(def, &key.1, e)),
                }
            } else if !removes_now {
                return Ok(Deleted {
                    obj: cur,
                    removed: false,
                });
            }
            match self.store.remove(&kind, key, Some(expected)) {
                Ok(obj) => {
                    match def.builtin {
                        Some(Builtin::Crd) => self.forget_crd(&obj),
                        b => self.collect_dependents_after_lag(&obj, b),
                    }
                    self.removed_from_namespace(&key.0);
                    return Ok(Deleted { obj, removed: true });
                }
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(storage_error(def, &key.1, e)),
            }
        }
    }

    fn forget_crd(&self, crd: &Obj) {
        let name = admit::name_of(&crd.value).to_string();
        let mut removed = None;
        let _ = self.edit_registry(|r| {
            removed = r.remove_crd(&name);
            Ok(())
        });
        if let Some(defs) = removed
            && let Some(first) = defs.first()
        {
            self.store.drop_kind(&first.storage_key());
        }
    }

    /// After an object of namespace `ns` went: the namespace controller's next pass, if the
    /// namespace is terminating (not from within a pass over it).
    fn removed_from_namespace(&self, ns: &str) {
        if ns.is_empty() {
            return;
        }
        let terminating = self
            .store
            .get("/namespaces", &(String::new(), ns.to_string()))
            .is_some_and(|n| crate::deletion::terminating(&n.value));
        if !terminating {
            return;
        }
        let pass = (self.name.clone(), ns.to_string());
        let first = FINALIZING.with(|f| f.borrow_mut().insert(pass.clone()));
        if first {
            self.finalize_namespace(ns);
            FINALIZING.with(|f| f.borrow_mut().remove(&pass));
        }
    }

    fn pod_priority(&self, pod: &Value) -> Result<Option<i64>, ApiError> {
        let classes = "scheduling.k8s.io/priorityclasses";
        match pod
            .pointer("/spec/priorityClassName")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            Some(name) => {
                let pc = self
                    .store
                    .get(classes, &(String::new(), name.to_string()))
                    .ok_or_else(|| {
                        ApiError::forbidden(
                            "",
                            "pods",
                            admit::name_of(pod),
                            &format!("no PriorityClass with name {name} was found"),
                        )
                    })?;
                Ok(pc.value.get("value").and_then(Value::as_i64))
            }
            None => {
                let (all, _) = self.store.list(classes, None, None);
                let default = all
                    .iter()
                    .find(|pc| pc.value.get("globalDefault").and_then(Value::as_bool) == Some(true))
                    .and_then(|pc| pc.value.get("value").and_then(Value::as_i64));
                Ok(Some(default.unwrap_or(0)))
            }
        }
    }

    /// What the Priority admission plugin gives a new Kubernetes PodGroup: its class's value
    /// (the class named, else the global default's, else 0) and the global default's name when
    /// it names none; refused when it names no class there is or brings another integer.
    fn group_priority(&self, group: &Value) -> Result<(Option<String>, i64), ApiError> {
        let classes = "scheduling.k8s.io/priorityclasses";
        let refuse = |why: String| {
            ApiError::forbidden(
                "scheduling.k8s.io",
                "podgroups",
                admit::name_of(group),
                &why,
            )
        };
        let named = group
            .pointer("/spec/priorityClassName")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let (class, value) = match named {
            Some(name) => {
                let pc = self
                    .store
                    .get(classes, &(String::new(), name.to_string()))
                    .ok_or_else(|| {
                        refuse(format!("no PriorityClass with name {name} was found"))
                    })?;
                (
                    None,
                    pc.value.get("value").and_then(Value::as_i64).unwrap_or(0),
                )
            }
            None => {
                let (all, _) = self.store.list(classes, None, None);
                let default = all.iter().find(|pc| {
                    pc.value.get("globalDefault").and_then(Value::as_bool) == Some(true)
                });
                match default {
                    Some(pc) => (
                        pc.value
                            .pointer("/metadata/name")
                            .and_then(Value::as_str)
                            .map(String::from),
                        pc.value.get("value").and_then(Value::as_i64).unwrap_or(0),
                    ),
                    None => (None, 0),
                }
            }
        };
        if let Some(given) = group.pointer("/spec/priority").and_then(Value::as_i64)
            && given != value
        {
            return Err(refuse(format!(
                "priority set in the pod group ({given}) must match the priority computed \
                 ({value}) based on the priority class set in the spec"
            )));
        }
        Ok((class, value))
    }

    /// What the Service registry sets: a cluster IP and its family, and node ports for
    /// `NodePort` and `LoadBalancer` Services.
    fn default_service(&self, svc: &mut Value) {
        self.allocate_service(svc);
        svc["status"] = json!({"loadBalancer": {}});
    }

    /// What the Service registry allocates that a Service lacks: a cluster IP (and its
    /// family), node ports where its type needs them.
    fn allocate_service(&self, svc: &mut Value) {
        if svc.pointer("/spec/type").is_none() {
            svc["spec"]["type"] = json!("ClusterIP");
        }
        let kind = svc
            .pointer("/spec/type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let ip = svc
            .pointer("/spec/clusterIP")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if kind != "ExternalName" {
            if ip.is_empty() {
                let n = self.service_ips.fetch_add(1, Ordering::Relaxed);
                let ip = format!("10.96.{}.{}", (n >> 8) & 0xff, n & 0xff);
                svc["spec"]["clusterIP"] = json!(ip);
                svc["spec"]["clusterIPs"] = json!([ip]);
            } else if svc.pointer("/spec/clusterIPs").is_none() {
                svc["spec"]["clusterIPs"] = json!([ip]);
            }
            if svc.pointer("/spec/ipFamilyPolicy").is_none() {
                svc["spec"]["ipFamilyPolicy"] = json!("SingleStack");
            }
            if svc.pointer("/spec/ipFamilies").is_none() {
                svc["spec"]["ipFamilies"] = json!(["IPv4"]);
            }
        }
        if matches!(kind.as_str(), "NodePort" | "LoadBalancer")
            && let Some(ports) = svc.pointer_mut("/spec/ports").and_then(Value::as_array_mut)
        {
            for p in ports.iter_mut().filter(|p| p.get("nodePort").is_none()) {
                let n = self.service_ips.fetch_add(1, Ordering::Relaxed);
                p["nodePort"] = json!(30000 + n % 2768);
            }
        }
    }

    /// A PodDisruptionBudget's status from the pods it selects now.
    pub fn pdb_status(&self, pdb: &Value) -> Value {
        let ns = pdb
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default");
        let selector = LabelSelector::from_object(pdb.pointer("/spec/selector"));
        let (pods, _) = self.store.list("/pods", Some(ns), None);
        let matched: Vec<&Obj> = pods.iter().filter(|p| selector.matches(&p.value)).collect();
        let expected = matched.len() as i64;
        let healthy = matched.iter().filter(|p| pod_healthy(&p.value)).count() as i64;
        let resolve = |v: &Value, round_up: bool| -> i64 {
            match v {
                Value::Number(n) => n.as_i64().unwrap_or(0),
                Value::String(s) if s.ends_with('%') => {
                    let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
                    let x = pct * expected;
                    if round_up { (x + 99) / 100 } else { x / 100 }
                }
                Value::String(s) => s.parse().unwrap_or(0),
                _ => 0,
            }
        };
        let desired = if let Some(min) = pdb.pointer("/spec/minAvailable") {
            resolve(min, true)
        } else if let Some(max) = pdb.pointer("/spec/maxUnavailable") {
            (expected - resolve(max, true)).max(0)
        } else {
            0
        };
        json!({
            "observedGeneration": pdb.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1),
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "disruptionsAllowed": (healthy - desired).max(0),
            "expectedPods": expected,
        })
    }
}

/// Whether a pod counts as healthy for a disruption budget: running, ready, not terminating.
pub fn pod_healthy(pod: &Value) -> bool {
    let running = pod.pointer("/status/phase").and_then(Value::as_str) == Some("Running");
    let ready = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            c.get("type").and_then(Value::as_str) == Some("Ready")
                && c.get("status").and_then(Value::as_str) == Some("True")
        });
    running && ready && pod.pointer("/metadata/deletionTimestamp").is_none()
}

/// What a delete does to a pod, as its graceful strategy decides.
enum PodDeletion {
    /// A graceful deletion is pending already and this one does not shorten it: nothing.
    Pending,
    /// Marked already with a grace period of 0: it goes (once no finalizer holds it).
    Now,
    /// Marked for deletion at `timestamp` after `grace` seconds; `first` when it was not yet.
    Mark {
        timestamp: i64,
        grace: i64,
        first: bool,
    },
}

/// kube-apiserver's `BeforeDelete` with the pod strategy's `CheckGracefulDelete`: a pod not
/// on a node, or finished, goes at once (grace 0); otherwise after the requested grace period
/// or its `terminationGracePeriodSeconds` (30 by default). A negative period counts as 1. A
/// pod marked already only has its grace period shortened.
fn pod_deletion(pod: &Value, requested: Option<i64>) -> PodDeletion {
    let requested = requested.map(|g| if g < 0 { 1 } else { g });
    let now = time::now_secs();
    if let Some(marked) = pod
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(time::parse_rfc3339)
    {
        let current = pod
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .map(|g| if g < 0 { 1 } else { g });
        return match (current, requested) {
            (None | Some(0), _) => PodDeletion::Now,
            (Some(current), Some(period)) if period < current => {
                let mut timestamp = marked - current + period;
                let mut grace = period;
                if timestamp < now {
                    timestamp = now;
                    if period != 0 {
                        grace = 1;
                    }
                }
                PodDeletion::Mark {
                    timestamp,
                    grace,
                    first: false,
                }
            }
            _ => PodDeletion::Pending,
        };
    }
    let bound = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let grace = if !bound || matches!(phase, "Succeeded" | "Failed") {
        0
    } else {
        requested
            .or_else(|| {
                pod.pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
            })
            .unwrap_or(30)
    };
    PodDeletion::Mark {
        timestamp: now + grace,
        grace,
        first: true,
    }
}

/// The strings of the list at `pointer`.
pub(crate) fn string_list(v: &Value, pointer: &str) -> Vec<String> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(String::from))
        .collect()
}

/// The finalizers a delete leaves on an object for the garbage collector, as
/// kube-apiserver's `deletionFinalizersForGarbageCollection` does: a propagation policy
/// replaces the `orphan` and `foregroundDeletion` finalizers with its own (none for
/// `Background`); without one they stay. Events do not take part in garbage collection: a
/// delete takes both off them. The list is unchanged when the set is.
pub(crate) fn gc_finalizers(
    def: &ResourceDef,
    before: &[String],
    propagation: Option<&str>,
) -> Vec<String> {
    let events = matches!(def.builtin, Some(Builtin::Event | Builtin::EventsV1));
    let is_gc = |f: &String| f == crate::deletion::ORPHAN || f == crate::deletion::FOREGROUND;
    let wanted = if events {
        None
    } else {
        match propagation {
            Some("Orphan") => Some(crate::deletion::ORPHAN),
            Some("Foreground") => Some(crate::deletion::FOREGROUND),
            Some(_) => None,
            None => return before.to_vec(),
        }
    };
    let mut after: Vec<String> = before.iter().filter(|f| !is_gc(f)).cloned().collect();
    if let Some(f) = wanted {
        after.push(f.to_string());
    }
    let set = |l: &[String]| l.iter().cloned().collect::<std::collections::BTreeSet<_>>();
    if set(&after) == set(before) {
        before.to_vec()
    } else {
        after
    }
}

/// kube-apiserver's `markAsDeleting`, for an object without a grace period that finalizers
/// hold: marked now (unless marked earlier) with a grace period of 0; the first mark raises
/// its generation.
fn mark_as_deleting(obj: &mut Value) {
    let now = time::now_secs();
    let marked = obj
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(time::parse_rfc3339);
    if marked.is_none()
        && let Some(g) = obj.pointer("/metadata/generation").and_then(Value::as_i64)
        && g > 0
    {
        obj["metadata"]["generation"] = json!(g + 1);
    }
    if marked.is_none_or(|t| t > now) {
        obj["metadata"]["deletionTimestamp"] = json!(time::format_rfc3339(now));
    }
    obj["metadata"]["deletionGracePeriodSeconds"] = json!(0);
}
