//! Volcano's `svc` job plugin: a headless Service named after the Job (selecting its pods), a
//! ConfigMap `<job>-svc` with each task's hosts (`<task>.host`, one per line;
//! `VC_<TASK>_HOSTS`, comma separated; `VC_<TASK>_NUM`), mounted at `/etc/volcano`, the two
//! variables in every container (unless `--inject-hosts-env=false`), and each pod's hostname
//! and subdomain so that `<job>-<task>-<index>.<job>` resolves
//! (`--publish-not-ready-addresses`). Volcano's NetworkPolicy is not created.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapKeySelector, ConfigMapVolumeSource, EnvVar, EnvVarSource, PodSpec, Service,
    ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tephra_api::well_known::{JOB_NAME, JOB_NAMESPACE};

use super::plugin::{Ctx, JobPlugin, Objects, PodAt};
use super::shared::{env_key, every_container, task_hosts};
use crate::job::names::owner;

/// Where `svc` mounts the hosts ConfigMap.
pub const HOSTS_MOUNT_PATH: &str = "/etc/volcano";

/// The `svc` plugin.
pub struct Svc;

impl JobPlugin for Svc {
    fn name(&self) -> &'static str {
        "svc"
    }

    fn makes_objects(&self, _ctx: &Ctx<'_>) -> bool {
        true
    }

    fn objects(&self, ctx: &Ctx<'_>) -> Option<Objects> {
        let (job, plan) = (ctx.job, ctx.plan);
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
                publish_not_ready_addresses: Some(
                    ctx.flags.flag("publish-not-ready-addresses", false),
                ),
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
        Some(Objects {
            services: vec![service],
            config_maps: vec![config],
            secrets: Vec::new(),
        })
    }

    fn on_pod(&self, ctx: &Ctx<'_>, pod: &PodAt<'_>, spec: &mut PodSpec) {
        let job_name = ctx.job.metadata.name.clone().unwrap_or_default();
        if spec.hostname.as_deref().is_none_or(str::is_empty) {
            spec.hostname = Some(pod.name.to_string());
        }
        if spec.subdomain.as_deref().is_none_or(str::is_empty) {
            spec.subdomain = Some(job_name.clone());
        }
        let cm = format!("{job_name}-svc");
        if ctx.flags.flag("inject-hosts-env", true) {
            let keys: Vec<String> = ctx
                .plan
                .tasks
                .iter()
                .flat_map(|t| {
                    let k = env_key(&t.name);
                    [format!("VC_{k}_HOSTS"), format!("VC_{k}_NUM")]
                })
                .collect();
            every_container(spec, &|c| {
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
        every_container(spec, &|c| {
            c.volume_mounts
                .get_or_insert_with(Vec::new)
                .push(VolumeMount {
                    name: cm.clone(),
                    mount_path: HOSTS_MOUNT_PATH.into(),
                    ..VolumeMount::default()
                });
        });
    }
}
