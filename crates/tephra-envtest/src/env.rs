//! A test environment: one etcd, one CA and a directory of its own, shared by the API servers
//! started on it (a control plane and members each keep their objects under their own etcd
//! prefix). Everything is stopped and the directory removed when the last handle goes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::Error;
use crate::components::Binaries;
use crate::pki::Pki;
use crate::process::{Proc, free_port};

/// A test environment (cheap to clone).
#[derive(Clone)]
pub struct Env {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    // Field order is drop order: the process before the directory it writes to.
    pub(crate) _etcd: Proc,
    pub(crate) etcd_url: String,
    pub(crate) bins: Binaries,
    pub(crate) pki: Pki,
    pub(crate) dir: TempDir,
}

/// A directory removed when dropped (and kept when `TEPHRA_ENVTEST_KEEP` is set, to read
/// the components' logs after a failure).
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    fn new(base: &Path, prefix: &str) -> Result<Self, Error> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let path = base.join(format!(
            "{prefix}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        ));
        create_dir(&path)?;
        Ok(Self(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("TEPHRA_ENVTEST_KEEP").is_some() {
            eprintln!("envtest: kept {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Makes a directory and its parents, naming it in the error.
pub(crate) fn create_dir(path: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(path).map_err(|source| Error::Io {
        what: path.display().to_string(),
        source,
    })
}

/// Writes a file, naming it in the error.
pub(crate) fn write(path: &Path, text: &str) -> Result<(), Error> {
    std::fs::write(path, text).map_err(|source| Error::Io {
        what: path.display().to_string(),
        source,
    })
}

impl Env {
    /// Starts etcd (data on tmpfs where there is one, no fsync: test data) and makes the CA.
    pub async fn start(bins: Binaries) -> Result<Self, Error> {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let dir = TempDir::new(&base, "tephra-envtest")?;
        let pki = Pki::generate()?;
        // Another process may bind a port between `free_port` and etcd's own bind; then etcd
        // exits saying so, and new ports are tried.
        let mut attempt = 0;
        let (etcd, etcd_url) = loop {
            attempt += 1;
            let client = free_port()?;
            let peer = free_port()?;
            let etcd_url = format!("http://127.0.0.1:{client}");
            let peer_url = format!("http://127.0.0.1:{peer}");
            let args = vec![
                "--name=envtest".into(),
                format!("--data-dir={}", dir.0.join("etcd").display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=envtest={peer_url}"),
                "--unsafe-no-fsync=true".into(),
                "--log-level=error".into(),
            ];
            let mut etcd = Proc::spawn("etcd", &bins.etcd, &args, &dir.0.join("etcd.log"))?;
            match wait_port(&mut etcd, client, Duration::from_secs(30)).await {
                Ok(()) => break (etcd, etcd_url),
                Err(Error::Exited { log, .. })
                    if attempt < 3 && log.contains("address already in use") =>
                {
                    tracing::warn!(attempt, "etcd found a port taken; trying other ports");
                    let _ = std::fs::remove_dir_all(dir.0.join("etcd"));
                }
                Err(e) => return Err(e),
            }
        };
        Ok(Self {
            inner: Arc::new(Inner {
                _etcd: etcd,
                etcd_url,
                bins,
                pki,
                dir,
            }),
        })
    }

    /// The environment's directory (logs, kubeconfigs, audit logs).
    pub fn dir(&self) -> &Path {
        &self.inner.dir.0
    }

    /// The Kubernetes binaries it runs.
    pub fn binaries(&self) -> &Binaries {
        &self.inner.bins
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.inner.pki.ca_pem
    }
}

/// Waits until `port` accepts connections, failing early when the process exits.
pub(crate) async fn wait_port(proc: &mut Proc, port: u16, limit: Duration) -> Result<(), Error> {
    let deadline = Instant::now() + limit;
    loop {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        if let Some(status) = proc.exited() {
            return Err(Error::Exited {
                name: proc.name().to_string(),
                status: status.to_string(),
                log: proc.tail(20),
            });
        }
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: format!("{} listening on {port}", proc.name()),
                log: proc.tail(20),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
