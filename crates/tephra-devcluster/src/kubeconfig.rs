//! Kubeconfigs for the servers: one context per server (`https://127.0.0.1:PORT`, the CA as
//! `certificate-authority-data`, a bearer token), as YAML for `kubectl` and as kube-rs
//! `Kubeconfig`/`Config`/`Client`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::error::Error;

/// One server as a kubeconfig entry.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Cluster, user and context name.
    pub name: String,
    /// `https://127.0.0.1:PORT`.
    pub server: String,
    /// The bearer token.
    pub token: String,
    /// The CA, PEM.
    pub ca_pem: String,
}

fn quote(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// A kubeconfig with one context per entry; `current` names the current context.
pub fn yaml(entries: &[Entry], current: &str) -> String {
    let mut out = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for e in entries {
        out.push_str(&format!(
            "- name: {}\n  cluster:\n    server: {}\n    certificate-authority-data: {}\n",
            quote(&e.name),
            quote(&e.server),
            STANDARD.encode(&e.ca_pem)
        ));
    }
    out.push_str("users:\n");
    for e in entries {
        out.push_str(&format!(
            "- name: {}\n  user:\n    token: {}\n",
            quote(&e.name),
            quote(&e.token)
        ));
    }
    out.push_str("contexts:\n");
    for e in entries {
        out.push_str(&format!(
            "- name: {n}\n  context:\n    cluster: {n}\n    user: {n}\n    namespace: default\n",
            n = quote(&e.name)
        ));
    }
    out.push_str(&format!("current-context: {}\n", quote(current)));
    out
}

/// Parses a kubeconfig for kube-rs.
pub fn parse(yaml: &str) -> Result<Kubeconfig, Error> {
    Kubeconfig::from_yaml(yaml).map_err(|e| Error::Kubeconfig(e.to_string()))
}

/// A kube-rs `Config` for one context of a kubeconfig.
pub async fn config(yaml: &str, context: &str) -> Result<kube::Config, Error> {
    let kc = parse(yaml)?;
    let opts = KubeConfigOptions {
        context: Some(context.to_string()),
        ..KubeConfigOptions::default()
    };
    kube::Config::from_custom_kubeconfig(kc, &opts)
        .await
        .map_err(|e| Error::Kubeconfig(e.to_string()))
}

/// A random bearer token.
pub fn token() -> String {
    let mut b = [0u8; 24];
    if getrandom::fill(&mut b).is_err() {
        let t = crate::time::now_millis() as u64;
        b[..8].copy_from_slice(&t.to_le_bytes());
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}
