//! What a job plugin is: the [`JobPlugin`] trait (Volcano's plugin interface, as pure
//! functions: the objects a Job needs before its pods, and what each pod gets), what a plugin
//! sees of its Job ([`Ctx`], [`PodAt`]), its arguments read as Go's `flag` package reads them
//! ([`Flags`]), and the record in the Job's status of the objects it made ([`made`]).

use k8s_openapi::api::core::v1::{ConfigMap, PodSpec, Secret, Service};
use tephra_api::Job;

use super::ssh_key::SshKey;
use crate::job::gang::GangPlan;

/// One job plugin, named in a Job's `spec.plugins` with its arguments.
pub trait JobPlugin: Sync {
    /// Its name in `spec.plugins`.
    fn name(&self) -> &'static str;

    /// Whether it has objects to make for the Job now (an `ssh` plugin without a key pair
    /// cannot yet): what `status.controlledResources` records once the pass made them.
    fn makes_objects(&self, _ctx: &Ctx<'_>) -> bool {
        false
    }

    /// The objects it needs before the Job's pods (Volcano's `OnJobAdd`), created once and
    /// recorded in `status.controlledResources`; `None` when it makes none, or cannot yet.
    fn objects(&self, _ctx: &Ctx<'_>) -> Option<Objects> {
        None
    }

    /// What it does to a pod of the Job as the pod is made (Volcano's `OnPodCreate`).
    fn on_pod(&self, ctx: &Ctx<'_>, pod: &PodAt<'_>, spec: &mut PodSpec);
}

/// What a plugin sees of the Job it serves.
pub struct Ctx<'a> {
    /// The Job.
    pub job: &'a Job,
    /// Its gang plan (tasks in spec order, with their names and replicas).
    pub plan: &'a GangPlan,
    /// The plugin's arguments.
    pub flags: Flags<'a>,
    /// A key pair the caller made for the Job (the only entropy a plugin gets), if any.
    pub key: Option<&'a SshKey>,
}

/// The pod being made.
pub struct PodAt<'a> {
    /// Its task's place in the plan.
    pub task: usize,
    /// Its index in the task.
    pub index: u32,
    /// Its name.
    pub name: &'a str,
}

/// The objects a plugin needs before the pods.
#[derive(Default)]
pub struct Objects {
    /// Services.
    pub services: Vec<Service>,
    /// ConfigMaps.
    pub config_maps: Vec<ConfigMap>,
    /// Secrets.
    pub secrets: Vec<Secret>,
}

/// The `status.controlledResources` key that records a plugin's objects as made.
pub fn made_key(plugin: &str) -> String {
    format!("plugin-{plugin}")
}

/// Whether `plugin`'s objects are made (or the Job does not ask for it).
pub fn made(job: &Job, plugin: &str) -> bool {
    !job.spec.plugins.contains_key(plugin)
        || job.status.as_ref().is_some_and(|s| {
            s.controlled_resources
                .get(&made_key(plugin))
                .map(String::as_str)
                == Some(plugin)
        })
}

/// A plugin's arguments, read as Go's `flag` package reads them (`--name=value`, `-name value`,
/// a bare boolean flag).
pub struct Flags<'a>(pub &'a [String]);

impl Flags<'_> {
    /// The value of `name`, if given (`"true"` for a bare flag).
    pub fn get(&self, name: &str) -> Option<String> {
        let mut it = self.0.iter();
        while let Some(a) = it.next() {
            let Some(body) = a.strip_prefix("--").or_else(|| a.strip_prefix('-')) else {
                continue;
            };
            match body.split_once('=') {
                Some((k, v)) if k == name => return Some(v.to_string()),
                None if body == name => {
                    return Some(match it.clone().next() {
                        Some(v) if !v.starts_with('-') => v.clone(),
                        _ => "true".into(),
                    });
                }
                _ => {}
            }
        }
        None
    }

    /// A text argument, or `default`.
    pub fn text(&self, name: &str, default: &str) -> String {
        self.get(name).unwrap_or_else(|| default.to_string())
    }

    /// A boolean argument (`true` or `1`), or `default`.
    pub fn flag(&self, name: &str, default: bool) -> bool {
        self.get(name).map_or(default, |v| v == "true" || v == "1")
    }

    /// `--port`, or `default`.
    pub fn port(&self, default: i32) -> i32 {
        self.get("port")
            .and_then(|p| p.parse().ok())
            .unwrap_or(default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_flags_read_as_go_reads_them() {
        let a = [
            "--port=2222".to_string(),
            "-master".to_string(),
            "launcher".to_string(),
            "--publish-not-ready-addresses".to_string(),
        ];
        let f = Flags(&a);
        assert_eq!(f.port(22), 2222);
        assert_eq!(f.text("master", "master"), "launcher");
        assert!(f.flag("publish-not-ready-addresses", false));
        assert!(f.flag("inject-hosts-env", true));
    }
}
