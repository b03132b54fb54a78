//! Objects into a real cluster by their manifests: any kind the server serves (found by
//! discovery), CRDs waited for until Established, and tephra's own CRDs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use serde_json::Value;

use crate::Error;

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The dynamic API of a manifest's kind (and namespace, for a namespaced kind).
pub async fn api_for(client: &kube::Client, manifest: &Value) -> Result<Api<DynamicObject>, Error> {
    let api_version = str_at(manifest, "/apiVersion");
    let kind = str_at(manifest, "/kind");
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| Error::Client(format!("{api_version} {kind}: {e}")))?;
    Ok(match caps.scope {
        Scope::Namespaced => {
            let ns = manifest
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("default");
            Api::namespaced_with(client.clone(), ns, &resource)
        }
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    })
}

/// Creates a manifest's object and returns it as the server stored it.
pub async fn create(client: &kube::Client, manifest: &Value) -> Result<Value, Error> {
    let api = api_for(client, manifest).await?;
    let obj: DynamicObject =
        serde_json::from_value(manifest.clone()).map_err(|e| Error::Client(e.to_string()))?;
    let out = api
        .create(&PostParams::default(), &obj)
        .await
        .map_err(|e| {
            Error::Client(format!(
                "create {} {}: {e}",
                str_at(manifest, "/kind"),
                str_at(manifest, "/metadata/name")
            ))
        })?;
    serde_json::to_value(out).map_err(|e| Error::Client(e.to_string()))
}

/// Creates CRDs (those that exist stay as they are) and waits until each is Established.
pub async fn install_crds(client: &kube::Client, crds: &[Value]) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let obj: CustomResourceDefinition =
            serde_json::from_value(crd.clone()).map_err(|e| Error::Client(e.to_string()))?;
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => {
                return Err(Error::Client(format!(
                    "CRD {}: {e}",
                    str_at(crd, "/metadata/name")
                )));
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for crd in crds {
        let name = str_at(crd, "/metadata/name");
        loop {
            let established = api.get(name).await.ok().is_some_and(|c| {
                c.status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
            if established {
                break;
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: format!("CRD {name} Established"),
                    log: String::new(),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

/// Installs tephra's CRDs (Volcano's groups and tephra's own), as `tephra crds` renders them.
pub async fn install_tephra_crds(client: &kube::Client) -> Result<(), Error> {
    let crds = tephra_api::crds()
        .map_err(|e| Error::Client(e.to_string()))?
        .into_iter()
        .map(|(_, crd)| serde_json::to_value(&crd).map_err(|e| Error::Client(e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    install_crds(client, &crds).await
}

/// Deletes a manifest's object (gone already is fine) and waits up to `secs` until it is gone
/// (its finalizers done).
pub async fn delete(client: &kube::Client, manifest: &Value, secs: u64) -> Result<(), Error> {
    let api = api_for(client, manifest).await?;
    let name = str_at(manifest, "/metadata/name");
    match api.delete(name, &kube::api::DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
        Err(e) => return Err(Error::Client(format!("delete {name}: {e}"))),
    }
    let deadline = Instant::now() + Duration::from_secs(secs);
    while api.get_opt(name).await.ok().flatten().is_some() {
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: format!("{} {name} gone", str_at(manifest, "/kind")),
                log: String::new(),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Every CRD in the YAML files under `dir` and its subdirectories (a component's shipped
/// CRDs: Karmada's `charts/karmada/_crds/bases`, Volcano's `config/crd/volcano/bases`), as
/// JSON; `what` names them when there are none.
pub fn crds_in(dir: &Path, what: &str) -> Result<Vec<Value>, Error> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Error> {
        let entries = std::fs::read_dir(dir).map_err(|source| Error::Io {
            what: dir.display().to_string(),
            source,
        })?;
        for entry in entries {
            let path = entry
                .map_err(|source| Error::Io {
                    what: dir.display().to_string(),
                    source,
                })?
                .path();
            if path.is_dir() {
                walk(&path, out)?;
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                out.push(path);
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(dir, &mut files)?;
    files.sort();
    let mut crds = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|source| Error::Io {
            what: file.display().to_string(),
            source,
        })?;
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
            .map_err(|e| Error::Client(format!("{}: {e}", file.display())))?;
        crds.extend(
            docs.into_iter()
                .filter(|d| d["kind"] == "CustomResourceDefinition"),
        );
    }
    if crds.is_empty() {
        return Err(Error::Missing {
            what: format!("{what} in {}", dir.display()),
        });
    }
    Ok(crds)
}
