//! Where the real components are: the cache `.ci/real-components` builds them into, the
//! versions it built (its `versions` file), and what a test does when they are missing (skips
//! with the build command, or fails under `CI`).

use std::path::{Path, PathBuf};

use crate::Error;

/// The command that builds the components, as error messages name it.
pub const BUILD_COMMAND: &str = "bash .ci/real-components";

/// The cache directory: `TEPHRA_REAL_CACHE`, else `$XDG_CACHE_HOME/tephra-real`, else
/// `$HOME/.cache/tephra-real` (the script's own rule).
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("TEPHRA_REAL_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join("tephra-real")
}

/// A Kubernetes release to run: the oldest or the newest the cache holds, or one exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Release {
    /// The oldest built (the tier's default: the version users run today).
    Oldest,
    /// The newest built (for APIs only it serves, such as `scheduling.k8s.io` Workloads).
    Newest,
    /// This version, `v1.x.y`.
    Exact(String),
}

impl Release {
    /// The release the real-cluster tier runs: `TEPHRA_REAL_RELEASE` (`oldest`, `newest` or a
    /// version `v1.x.y`), the oldest built by default.
    pub fn tier() -> Self {
        match std::env::var("TEPHRA_REAL_RELEASE").as_deref() {
            Ok("newest") => Self::Newest,
            Ok(v) if v.starts_with("v1.") => Self::Exact(v.to_string()),
            _ => Self::Oldest,
        }
    }
}

/// The binaries of one Kubernetes release and the etcd beside them.
#[derive(Clone, Debug)]
pub struct Binaries {
    /// `v1.x.y`.
    pub version: String,
    /// The minor version (34 for v1.34.4).
    pub minor: u32,
    /// kube-apiserver.
    pub kube_apiserver: PathBuf,
    /// kube-controller-manager.
    pub kube_controller_manager: PathBuf,
    /// kube-scheduler.
    pub kube_scheduler: PathBuf,
    /// etcd.
    pub etcd: PathBuf,
}

/// Karmada's binaries and CRDs.
#[derive(Clone, Debug)]
pub struct Karmada {
    /// `v1.x.y`.
    pub version: String,
    /// The directory holding `karmada-controller-manager`, `karmada-scheduler`,
    /// `karmada-webhook`, `karmada-aggregated-apiserver` and `crds/`.
    pub dir: PathBuf,
}

/// What `.ci/real-components` built, read from its `versions` file.
#[derive(Clone, Debug)]
pub struct Components {
    dir: PathBuf,
    kubernetes: Vec<String>,
    etcd: String,
    karmada: Option<String>,
}

fn complete(dir: &Path) -> bool {
    dir.join(".complete").is_file()
}

fn minor_of(version: &str) -> Option<u32> {
    version.strip_prefix("v1.")?.split('.').next()?.parse().ok()
}

impl Components {
    /// Reads the cache's `versions` file (see [`cache_dir`]).
    pub fn locate() -> Result<Self, Error> {
        Self::locate_in(&cache_dir())
    }

    /// Reads `dir/versions`.
    pub fn locate_in(dir: &Path) -> Result<Self, Error> {
        let file = dir.join("versions");
        let text = std::fs::read_to_string(&file).map_err(|_| Error::Missing {
            what: format!("{} (no versions file)", dir.display()),
        })?;
        let mut kubernetes = Vec::new();
        let mut etcd = None;
        let mut karmada = None;
        for line in text.lines() {
            match line.split_once('=') {
                Some(("kubernetes", v)) => {
                    kubernetes = v.split_whitespace().map(str::to_string).collect();
                }
                Some(("etcd", v)) => etcd = Some(v.trim().to_string()),
                Some(("karmada", v)) => karmada = Some(v.trim().to_string()),
                _ => {}
            }
        }
        kubernetes.sort_by_key(|v| minor_of(v).unwrap_or(0));
        let etcd = etcd.ok_or_else(|| Error::Missing {
            what: format!("etcd in {}", file.display()),
        })?;
        Ok(Self {
            dir: dir.to_path_buf(),
            kubernetes,
            etcd,
            karmada,
        })
    }

    /// The Kubernetes versions built, oldest first.
    pub fn kubernetes_versions(&self) -> &[String] {
        &self.kubernetes
    }

    /// The binaries of a Kubernetes release.
    pub fn kubernetes(&self, release: &Release) -> Result<Binaries, Error> {
        let version = match release {
            Release::Oldest => self.kubernetes.first(),
            Release::Newest => self.kubernetes.last(),
            Release::Exact(v) => self.kubernetes.iter().find(|k| *k == v),
        }
        .ok_or_else(|| Error::Missing {
            what: format!("Kubernetes {release:?} in {}", self.dir.display()),
        })?
        .clone();
        let k8s = self.dir.join(format!("kubernetes-{version}"));
        let etcd = self.dir.join(format!("etcd-{}", self.etcd));
        for d in [&k8s, &etcd] {
            if !complete(d) {
                return Err(Error::Missing {
                    what: d.display().to_string(),
                });
            }
        }
        Ok(Binaries {
            minor: minor_of(&version).unwrap_or(0),
            kube_apiserver: k8s.join("kube-apiserver"),
            kube_controller_manager: k8s.join("kube-controller-manager"),
            kube_scheduler: k8s.join("kube-scheduler"),
            etcd: etcd.join("etcd"),
            version,
        })
    }

    /// Karmada's binaries and CRDs.
    pub fn karmada(&self) -> Result<Karmada, Error> {
        let version = self.karmada.clone().ok_or_else(|| Error::Missing {
            what: format!("Karmada in {}", self.dir.display()),
        })?;
        let dir = self.dir.join(format!("karmada-{version}"));
        if !complete(&dir) {
            return Err(Error::Missing {
                what: dir.display().to_string(),
            });
        }
        Ok(Karmada { version, dir })
    }
}

/// Says, where the test runner shows it, that the calling test skips and why. The test harness
/// captures `eprintln!` of a passing test and shows nothing; this line goes to the process's
/// standard error itself, so `cargo test` prints it beside the test's `ok`.
pub fn skip(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED (passes without running): {why}");
}

/// Whether this run is CI's (`CI` set to anything but empty, `0` or `false`), where a missing
/// component fails a test instead of skipping it.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// The binaries of `release`, or `None` after printing why the calling test skips. Under
/// `CI` a missing component panics, naming the build command: CI must never pass by skipping.
#[allow(clippy::panic)]
pub fn require(release: &Release) -> Option<Binaries> {
    match Components::locate().and_then(|c| c.kubernetes(release)) {
        Ok(b) => Some(b),
        Err(e) if in_ci() => panic!("{e}"),
        Err(e) => {
            skip(&e.to_string());
            None
        }
    }
}

/// Karmada's binaries and CRDs, or `None` after printing why the calling test skips; under
/// `CI` a missing build panics, as [`require`] does.
#[allow(clippy::panic)]
pub fn require_karmada() -> Option<Karmada> {
    match Components::locate().and_then(|c| c.karmada()) {
        Ok(k) => Some(k),
        Err(e) if in_ci() => panic!("{e}"),
        Err(e) => {
            skip(&e.to_string());
            None
        }
    }
}
