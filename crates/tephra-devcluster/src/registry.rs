//! Everything one server serves: the built-in kinds (less the API groups it does not serve, as
//! an older Kubernetes) and the resources of every applied CustomResourceDefinition, indexed by
//! group, version and plural, rebuilt whenever a CRD changes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;

use crate::crd::defs_from_crd;
use crate::resource::{Builtin, ResourceDef, builtins};
use crate::status::ApiError;

/// Everything served, rebuilt whenever a CRD changes.
#[derive(Clone)]
pub struct Registry {
    resources: Vec<Arc<ResourceDef>>,
    index: HashMap<(String, String, String), Arc<ResourceDef>>,
    /// Per CRD name: its spec and the resources built from it (kept while the spec is unchanged,
    /// so a status write does not recompile CEL rules).
    crds: BTreeMap<String, (Value, Vec<Arc<ResourceDef>>)>,
    /// Built-in API groups not served, as an older Kubernetes does not serve them.
    unserved: Vec<String>,
    /// Every built-in kind, served or not: the in-process controllers find their kinds here
    /// (an unserved kind simply has no objects).
    all_builtins: Vec<Arc<ResourceDef>>,
    /// Bumped on every change; openapi documents are cached against it.
    pub generation: u64,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// The built-in kinds only.
    pub fn new() -> Self {
        Self::without(&[])
    }

    /// The built-in kinds but those of the `unserved` API groups.
    pub fn without(unserved: &[String]) -> Self {
        let mut r = Self {
            resources: Vec::new(),
            index: HashMap::new(),
            crds: BTreeMap::new(),
            unserved: unserved.to_vec(),
            all_builtins: builtins(),
            generation: 0,
        };
        r.reindex();
        r
    }

    fn reindex(&mut self) {
        let mut resources = builtins();
        resources.retain(|r| !self.unserved.contains(&r.group));
        for (_, defs) in self.crds.values() {
            resources.extend(defs.iter().cloned());
        }
        self.index = resources
            .iter()
            .map(|r| {
                (
                    (r.group.clone(), r.version.clone(), r.plural.clone()),
                    r.clone(),
                )
            })
            .collect();
        self.resources = resources;
        self.generation += 1;
    }

    /// A built-in kind, whether it is served or not.
    pub fn builtin(&self, which: Builtin) -> Option<Arc<ResourceDef>> {
        self.all_builtins
            .iter()
            .find(|r| r.builtin == Some(which))
            .cloned()
    }

    /// The resource served at `group/version/plural`.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.index
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// The resource of a kind in a group and version.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        self.resources
            .iter()
            .find(|r| r.kind == kind && r.api_version() == api_version)
            .cloned()
    }

    /// Every served resource, built-ins first.
    pub fn resources(&self) -> &[Arc<ResourceDef>] {
        &self.resources
    }

    /// Serves (or re-serves) a CRD's versions. The CRD must have passed [`check_crd`](crate::crd::check_crd).
    pub fn put_crd(&mut self, crd: &Value) -> Result<(), ApiError> {
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let spec = crd.get("spec").cloned().unwrap_or(Value::Null);
        if self.crds.get(&name).is_some_and(|(s, _)| *s == spec) {
            return Ok(());
        }
        let defs = defs_from_crd(crd)?;
        self.crds.insert(name, (spec, defs));
        self.reindex();
        Ok(())
    }

    /// Stops serving a CRD's versions.
    pub fn remove_crd(&mut self, name: &str) -> Option<Vec<Arc<ResourceDef>>> {
        let removed = self.crds.remove(name).map(|(_, defs)| defs);
        if removed.is_some() {
            self.reindex();
        }
        removed
    }
}
