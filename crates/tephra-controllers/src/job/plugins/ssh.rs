//! Volcano's `ssh` job plugin: a Secret `<job>-ssh` with a key pair (`id_rsa`, `id_rsa.pub`,
//! `authorized_keys`) and an ssh `config` naming every pod's host, mounted in every container
//! at `/root/.ssh` (`--ssh-key-file-path`), so that the pods of an MPI job reach each other
//! without passwords. Arguments as Volcano's: `--ssh-key-file-path`, `--ssh-private-key` and
//! `--ssh-public-key` (a key pair of the user's), `--ssh-port` (default 22).
//!
//! The key pair is made by the caller (this crate does no IO and has no entropy): Ed25519 in
//! OpenSSH's format, which `ssh` reads from `id_rsa` as well as Volcano's RSA keys. Volcano's
//! file names are kept so that images and scripts that name them work unchanged.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    KeyToPath, PodSpec, Secret, SecretVolumeSource, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tephra_api::Job;

use super::plugin::{Ctx, Flags, JobPlugin, Objects, PodAt, made};
use super::ssh_key::SshKey;
use crate::job::names::{owner, pod_name};

/// The Secret's keys, as Volcano names them.
pub const PRIVATE_KEY: &str = "id_rsa";
/// The public key.
pub const PUBLIC_KEY: &str = "id_rsa.pub";
/// The authorized keys (the public key).
pub const AUTHORIZED_KEYS: &str = "authorized_keys";
/// The ssh client config.
pub const CONFIG: &str = "config";
/// Where the keys are mounted by default.
pub const DEFAULT_PATH: &str = "/root/.ssh";

/// The name of the Job's ssh Secret.
pub fn secret_name(job: &Job) -> String {
    format!("{}-ssh", job.metadata.name.as_deref().unwrap_or_default())
}

/// Whether the Job asks for the plugin.
pub fn wanted(job: &Job) -> bool {
    job.spec.plugins.contains_key(NAME)
}

fn flags(job: &Job) -> Flags<'_> {
    Flags(job.spec.plugins.get(NAME).map_or(&[][..], Vec::as_slice))
}

/// Whether the Job brings its own key pair (`--ssh-private-key`), so that none need be made.
pub fn brings_key(job: &Job) -> bool {
    flags(job).get("ssh-private-key").is_some()
}

/// The ssh client config: no host key checks, and a `Host` entry per pod (one per task whose
/// template names a hostname) with its DNS name under the Job's subdomain and the port.
fn config(job: &Job, port: i32) -> String {
    let job_name = job.metadata.name.as_deref().unwrap_or_default();
    let mut out = String::from("StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n");
    for t in &job.spec.tasks {
        let spec = t.template.spec.as_ref();
        let fixed = spec
            .and_then(|s| s.hostname.clone())
            .filter(|h| !h.is_empty());
        let subdomain = spec
            .and_then(|s| s.subdomain.clone())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| job_name.to_string());
        let name = t.name.as_deref().unwrap_or_default();
        let count = if fixed.is_some() {
            1
        } else {
            t.replicas.unwrap_or(1).max(0) as u32
        };
        for i in 0..count {
            let host = fixed.clone().unwrap_or_else(|| pod_name(job_name, name, i));
            out.push_str(&format!(
                "Host {host}\n  HostName {host}.{subdomain}\n  Port {port}\n"
            ));
        }
    }
    out
}

/// The Job's ssh Secret, with `key` unless the Job brings its own pair; `None` when the plugin
/// is not asked for, or no key was given.
pub fn secret(job: &Job, key: Option<&SshKey>) -> Option<Secret> {
    if !wanted(job) {
        return None;
    }
    let f = flags(job);
    let port = f
        .get("ssh-port")
        .and_then(|p| p.parse::<i32>().ok())
        .filter(|p| (1..=65535).contains(p))
        .unwrap_or(22);
    let (private, public) = match (f.get("ssh-private-key"), key) {
        (Some(private), _) => (private, f.get("ssh-public-key").unwrap_or_default()),
        (None, Some(k)) => (k.private.clone(), k.public.clone()),
        (None, None) => return None,
    };
    let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
    let data = BTreeMap::from([
        (PRIVATE_KEY.to_string(), bytes(&private)),
        (PUBLIC_KEY.to_string(), bytes(&public)),
        (AUTHORIZED_KEYS.to_string(), bytes(&public)),
        (CONFIG.to_string(), bytes(&config(job, port))),
    ]);
    Some(Secret {
        metadata: ObjectMeta {
            name: Some(secret_name(job)),
            namespace: job.metadata.namespace.clone(),
            owner_references: Some(vec![owner(job)]),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..Secret::default()
    })
}

/// Mounts the Secret's keys in every container and init container at `--ssh-key-file-path`
/// (mode 0600 at `/root/.ssh`, else 0644 so that a non-root user can read them).
pub fn on_pod(job: &Job, spec: &mut PodSpec) {
    if !wanted(job) {
        return;
    }
    let path = flags(job)
        .get("ssh-key-file-path")
        .unwrap_or_else(|| DEFAULT_PATH.to_string());
    let name = secret_name(job);
    let items = [PRIVATE_KEY, PUBLIC_KEY, AUTHORIZED_KEYS, CONFIG]
        .iter()
        .map(|k| KeyToPath {
            key: k.to_string(),
            path: format!(".ssh/{k}"),
            ..KeyToPath::default()
        })
        .collect();
    spec.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: name.clone(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(name.clone()),
            items: Some(items),
            default_mode: Some(if path == DEFAULT_PATH { 0o600 } else { 0o644 }),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    });
    let mount = VolumeMount {
        name,
        mount_path: path,
        sub_path: Some(".ssh".into()),
        ..VolumeMount::default()
    };
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        c.volume_mounts
            .get_or_insert_with(Vec::new)
            .push(mount.clone());
    }
}

/// Whether a pass over `job` would use a fresh key pair: it asks for the plugin, brings no
/// pair of its own, and its Secret is not made yet.
pub fn needs_key(job: &Job) -> bool {
    wanted(job) && !brings_key(job) && !made(job, NAME)
}

/// Its name in `spec.plugins`.
pub const NAME: &str = "ssh";

/// The `ssh` plugin.
pub struct Ssh;

impl JobPlugin for Ssh {
    fn name(&self) -> &'static str {
        NAME
    }

    fn makes_objects(&self, ctx: &Ctx<'_>) -> bool {
        ctx.key.is_some() || brings_key(ctx.job)
    }

    fn objects(&self, ctx: &Ctx<'_>) -> Option<Objects> {
        secret(ctx.job, ctx.key).map(|s| Objects {
            secrets: vec![s],
            ..Objects::default()
        })
    }

    fn on_pod(&self, ctx: &Ctx<'_>, _pod: &PodAt<'_>, spec: &mut PodSpec) {
        on_pod(ctx.job, spec);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;

    fn job(args: serde_json::Value) -> Job {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "mpi", "namespace": "hpc", "uid": "u1"},
            "spec": {"plugins": {"ssh": args}, "tasks": [
                {"name": "master", "replicas": 1, "template": {"spec": {"containers": [{"name": "m", "image": "x"}]}}},
                {"name": "worker", "replicas": 2, "template": {"spec": {"containers": [{"name": "w", "image": "x"}]}}}]}
        }))
        .expect("job")
    }

    fn key() -> SshKey {
        SshKey::ed25519(&[7; 32], &[9; 32], 0xdead_beef, "mpi")
    }

    fn text(s: &Secret, k: &str) -> String {
        String::from_utf8(s.data.as_ref().expect("data")[k].0.clone()).expect("utf8")
    }

    #[test]
    fn the_secret_holds_the_pair_and_a_config_naming_every_pod() {
        let s = secret(&job(serde_json::json!([])), Some(&key())).expect("secret");
        assert_eq!(s.metadata.name.as_deref(), Some("mpi-ssh"));
        assert_eq!(text(&s, PUBLIC_KEY), text(&s, AUTHORIZED_KEYS));
        assert!(text(&s, PUBLIC_KEY).starts_with("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI"));
        assert!(
            text(&s, PRIVATE_KEY).starts_with(
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU"
            )
        );
        let config = text(&s, CONFIG);
        assert!(config.starts_with("StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n"));
        assert!(
            config.contains("Host mpi-worker-1\n  HostName mpi-worker-1.mpi\n  Port 22\n"),
            "{config}"
        );
        assert_eq!(config.matches("Host ").count(), 3);
    }

    #[test]
    fn a_users_own_pair_and_port_are_used() {
        let j = job(serde_json::json!([
            "--ssh-private-key=PRIV",
            "--ssh-public-key=PUB",
            "--ssh-port=2222"
        ]));
        assert!(brings_key(&j));
        let s = secret(&j, None).expect("secret");
        assert_eq!(text(&s, PRIVATE_KEY), "PRIV");
        assert_eq!(text(&s, AUTHORIZED_KEYS), "PUB");
        assert!(text(&s, CONFIG).contains("Port 2222"));
    }

    #[test]
    fn without_a_key_no_secret_is_made() {
        assert_eq!(secret(&job(serde_json::json!([])), None), None);
    }

    #[test]
    fn every_container_mounts_the_keys() {
        let j = job(serde_json::json!(["--ssh-key-file-path=/home/mpi/.ssh"]));
        let mut spec: PodSpec = serde_json::from_value(serde_json::json!({
            "containers": [{"name": "a", "image": "x"}], "initContainers": [{"name": "i", "image": "x"}]}))
        .expect("spec");
        on_pod(&j, &mut spec);
        let v = &spec.volumes.as_ref().expect("volumes")[0];
        let src = v.secret.as_ref().expect("secret volume");
        assert_eq!(src.default_mode, Some(0o644));
        assert_eq!(src.items.as_ref().expect("items").len(), 4);
        for c in spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
        {
            let m = &c.volume_mounts.as_ref().expect("mounts")[0];
            assert_eq!(
                (m.mount_path.as_str(), m.sub_path.as_deref()),
                ("/home/mpi/.ssh", Some(".ssh"))
            );
        }
    }
}
