//! Volcano's job plugins (`spec.plugins`), with Volcano's names, arguments and effects:
//!
//! - `env`: `VK_TASK_INDEX` and `VC_TASK_INDEX` (the pod's index in its task) in every container;
//! - `svc`: a headless Service named after the Job (selecting its pods), a ConfigMap
//!   `<job>-svc` with each task's hosts (`<task>.host`, one per line; `VC_<TASK>_HOSTS`, comma
//!   separated; `VC_<TASK>_NUM`), mounted at `/etc/volcano`, the two variables in every
//!   container (unless `--inject-hosts-env=false`), and each pod's hostname and subdomain so
//!   that `<job>-<task>-<index>.<job>` resolves (`--publish-not-ready-addresses`);
//! - `pytorch`: `MASTER_ADDR`, `MASTER_PORT`, `WORLD_SIZE` and `RANK` (master 0, worker i+1)
//!   and the port opened (`--master`, `--worker`, `--port`, default 23456);
//! - `mpi`: `MPI_HOST` (the workers' hosts) on the master, and the port opened on every pod
//!   (`--master`, `--worker`, `--port`, default 22).
//!
//! `ssh` is in [`super::ssh`]. `tensorflow`, `ray` and `hcclrank` are accepted and not applied
//! yet, and `svc` does not create Volcano's NetworkPolicy.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapKeySelector, ConfigMapVolumeSource, Container, ContainerPort, EnvVar,
    EnvVarSource, PodSpec, Service, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tephra_api::Job;
use tephra_api::well_known::{JOB_NAME, JOB_NAMESPACE};

use super::gang::GangPlan;
use super::pods::{owner, pod_name};

/// Where `svc` mounts the hosts ConfigMap.
pub const HOSTS_MOUNT_PATH: &str = "/etc/volcano";

/// A plugin's arguments, read as Go's `flag` package reads them (`--name=value`, `-name value`,
/// a bare boolean flag).
pub(super) struct Flags<'a>(pub(super) &'a [String]);

impl Flags<'_> {
    pub(super) fn get(&self, name: &str) -> Option<String> {
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

    fn text(&self, name: &str, default: &str) -> String {
        self.get(name).unwrap_or_else(|| default.to_string())
    }

    fn flag(&self, name: &str, default: bool) -> bool {
        self.get(name).map_or(default, |v| v == "true" || v == "1")
    }

    fn port(&self, default: i32) -> i32 {
        self.get("port")
            .and_then(|p| p.parse().ok())
            .unwrap_or(default)
    }
}

fn args<'a>(job: &'a Job, plugin: &str) -> Option<Flags<'a>> {
    job.spec.plugins.get(plugin).map(|a| Flags(a.as_slice()))
}

/// The hosts of one task: `<hostname>.<subdomain>` per replica (one, if the template names a
/// hostname), as Volcano writes them.
fn task_hosts(job: &Job, plan: &GangPlan, task: usize) -> Vec<String> {
    let job_name = job.metadata.name.clone().unwrap_or_default();
    let (Some(t), Some(p)) = (job.spec.tasks.get(task), plan.tasks.get(task)) else {
        return Vec::new();
    };
    let spec = t.template.spec.as_ref();
    let hostname = spec
        .and_then(|s| s.hostname.clone())
        .filter(|h| !h.is_empty());
    let subdomain = spec
        .and_then(|s| s.subdomain.clone())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| job_name.clone());
    match hostname {
        Some(h) => vec![format!("{h}.{subdomain}")],
        None => (0..p.replicas)
            .map(|i| format!("{}.{subdomain}", pod_name(&job_name, &p.name, i)))
            .collect(),
    }
}

fn env_key(task: &str) -> String {
    task.replace('-', "_").to_uppercase()
}

/// The objects the Job's plugins need before its pods: for `svc`, the Service and the hosts
/// ConfigMap.
pub fn objects(job: &Job, plan: &GangPlan) -> (Vec<Service>, Vec<ConfigMap>) {
    let Some(flags) = args(job, "svc") else {
        return (Vec::new(), Vec::new());
    };
    let name = job.metadata.name.clone().unwrap_or_default();
    let meta = |n: String| ObjectMeta {
        name: Some(n),
        namespace: Some(plan.namespace.clone()),
        owner_references: Some(vec![owner(job)]),
        ..ObjectMeta::default()
    };
    let selector = BTreeMap::from([
        (JOB_NAME.to_string(), name.clone()),
        (JOB_NAMESPACE.to_string(), plan.namespace.clone()),
    ]);
    let service = Service {
        metadata: meta(name.clone()),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(selector),
            publish_not_ready_addresses: Some(flags.flag("publish-not-ready-addresses", false)),
            ..ServiceSpec::default()
        }),
        status: None,
    };
    let mut data = BTreeMap::new();
    for (i, t) in plan.tasks.iter().enumerate() {
        let hosts = task_hosts(job, plan, i);
        let key = t.name.replace('-', "_");
        data.insert(format!("{key}.host"), hosts.join("\n"));
        let upper = env_key(&t.name);
        data.insert(format!("VC_{upper}_HOSTS"), hosts.join(","));
        data.insert(format!("VC_{upper}_NUM"), hosts.len().to_string());
    }
    let config = ConfigMap {
        metadata: meta(format!("{name}-svc")),
        data: Some(data),
        ..ConfigMap::default()
    };
    (vec![service], vec![config])
}

fn push_env(c: &mut Container, name: &str, value: String) {
    c.env.get_or_insert_with(Vec::new).push(EnvVar {
        name: name.into(),
        value: Some(value),
        value_from: None,
    });
}

fn open_port(c: &mut Container, port: i32, name: &str) {
    let ports = c.ports.get_or_insert_with(Vec::new);
    if !ports.iter().any(|p| p.container_port == port) {
        ports.push(ContainerPort {
            name: Some(name.into()),
            container_port: port,
            ..ContainerPort::default()
        });
    }
}

/// What the Job's plugins do to pod `index` of task `task` (its name `pod`).
pub fn on_pod(job: &Job, plan: &GangPlan, task: usize, index: u32, pod: &str, spec: &mut PodSpec) {
    let Some(task_name) = plan.tasks.get(task).map(|t| t.name.clone()) else {
        return;
    };
    let job_name = job.metadata.name.clone().unwrap_or_default();
    let all = |spec: &mut PodSpec, f: &dyn Fn(&mut Container)| {
        spec.containers.iter_mut().for_each(f);
        spec.init_containers.iter_mut().flatten().for_each(f);
    };
    if args(job, "env").is_some() {
        all(spec, &|c| {
            push_env(c, "VK_TASK_INDEX", index.to_string());
            push_env(c, "VC_TASK_INDEX", index.to_string());
        });
    }
    if let Some(flags) = args(job, "svc") {
        if spec.hostname.as_deref().is_none_or(str::is_empty) {
            spec.hostname = Some(pod.to_string());
        }
        if spec.subdomain.as_deref().is_none_or(str::is_empty) {
            spec.subdomain = Some(job_name.clone());
        }
        let cm = format!("{job_name}-svc");
        if flags.flag("inject-hosts-env", true) {
            let keys: Vec<String> = plan
                .tasks
                .iter()
                .flat_map(|t| {
                    let k = env_key(&t.name);
                    [format!("VC_{k}_HOSTS"), format!("VC_{k}_NUM")]
                })
                .collect();
            all(spec, &|c| {
                for key in &keys {
                    c.env.get_or_insert_with(Vec::new).push(EnvVar {
                        name: key.clone(),
                        value: None,
                        value_from: Some(EnvVarSource {
                            config_map_key_ref: Some(ConfigMapKeySelector {
                                name: cm.clone(),
                                key: key.clone(),
                                optional: None,
                            }),
                            ..EnvVarSource::default()
                        }),
                    });
                }
            });
        }
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: cm.clone(),
            config_map: Some(ConfigMapVolumeSource {
                name: cm.clone(),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        });
        all(spec, &|c| {
            c.volume_mounts
                .get_or_insert_with(Vec::new)
                .push(VolumeMount {
                    name: cm.clone(),
                    mount_path: HOSTS_MOUNT_PATH.into(),
                    ..VolumeMount::default()
                });
        });
    }
    let role = |flags: &Flags<'_>, which: &str| flags.text(which, which);
    if let Some(flags) = args(job, "pytorch") {
        let (master, worker) = (role(&flags, "master"), role(&flags, "worker"));
        if let Some(m) = plan.tasks.iter().position(|t| t.name == master) {
            let port = flags.port(23456);
            let addr = task_hosts(job, plan, m)
                .into_iter()
                .next()
                .unwrap_or_default();
            let world: u32 = plan
                .tasks
                .iter()
                .filter(|t| t.name == master || t.name == worker)
                .map(|t| t.replicas)
                .sum();
            let rank = if task_name == worker {
                Some(index + 1)
            } else if task_name == master {
                Some(0)
            } else {
                None
            };
            for c in &mut spec.containers {
                open_port(c, port, "pytorchjob-port");
                push_env(c, "MASTER_ADDR", addr.clone());
                push_env(c, "MASTER_PORT", port.to_string());
                push_env(c, "WORLD_SIZE", world.to_string());
                if let Some(r) = rank {
                    push_env(c, "RANK", r.to_string());
                }
            }
        }
    }
    if let Some(flags) = args(job, "mpi") {
        let (master, worker) = (role(&flags, "master"), role(&flags, "worker"));
        let port = flags.port(22);
        let hosts = plan
            .tasks
            .iter()
            .position(|t| t.name == worker)
            .map(|w| task_hosts(job, plan, w).join(","));
        let is_master = task_name == master && hosts.is_some();
        all(spec, &|c| {
            open_port(c, port, "mpijob-port");
            if is_master && let Some(h) = &hosts {
                push_env(c, "MPI_HOST", h.clone());
            }
        });
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
