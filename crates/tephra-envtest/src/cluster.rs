//! One real cluster of a test environment: kube-apiserver on a free loopback port, configured
//! as a real cluster is (client certificates, the Node and RBAC authorizers, service-account
//! tokens, the default admission plugins plus `OwnerReferencesPermissionEnforcement` and
//! `NodeRestriction`, an audit log of every request), and, when asked, the real
//! kube-controller-manager and kube-scheduler under their bootstrap identities. The API server
//! can be stopped and started again on the same port and data (an outage).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::Error;
use crate::audit::{self, AuditEvent};
use crate::env::{Env, create_dir, write};
use crate::pki::Pair;
use crate::process::{Proc, free_port};

/// What to run beside the API server, and how to configure it.
#[derive(Clone, Debug, Default)]
pub struct ClusterOptions {
    /// Run kube-controller-manager (every default controller; each under its own service
    /// account, as `--use-service-account-credentials` does).
    pub controller_manager: bool,
    /// `--controllers` for kube-controller-manager (default: every default controller).
    pub controllers: Option<String>,
    /// Run the real kube-scheduler with this `KubeSchedulerConfiguration` (its client
    /// connection and leader election are filled in); `Some(Value::Null)` for the defaults.
    pub scheduler: Option<Value>,
    /// `--feature-gates` for every component, `Name=true` each.
    pub feature_gates: Vec<String>,
    /// `--runtime-config` for the API server, `group/version=true` each.
    pub runtime_config: Vec<String>,
    /// More API server flags.
    pub apiserver_args: Vec<String>,
    /// Audit the bodies of writes too (`create`, `update`, `patch` at level `Request`), so
    /// that [`AuditEvent::request_owners`] says which owners a write named.
    pub audit_request_bodies: bool,
}

/// A user of the cluster, for kubeconfigs and clients.
#[derive(Clone, Debug)]
pub enum User {
    /// `admin` in `system:masters`.
    Admin,
    /// A client certificate for this user name and group.
    Certificate(String, Option<String>),
    /// A bearer token (a service account's, say).
    Token(String),
}

/// A running cluster. Dropping it stops its processes (the environment's etcd keeps its data
/// until the environment goes).
pub struct Cluster {
    name: String,
    env: Env,
    port: u16,
    dir: PathBuf,
    apiserver_args: Vec<String>,
    admin: Pair,
    // Processes in the order they stop on drop: the clients before the server.
    scheduler: Mutex<Option<Proc>>,
    controller_manager: Mutex<Option<Proc>>,
    apiserver: Mutex<Option<Proc>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// The audit policy: every request's metadata and response status, once it completed.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
";

/// [`AUDIT_POLICY`], with the request bodies of writes.
const AUDIT_POLICY_WITH_WRITES: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Request
  verbs: [create, update, patch]
- level: Metadata
";

impl Env {
    /// Starts a cluster named `name` (its API server, and what `options` asks for beside it).
    /// (Here rather than in `env`, which knows nothing of clusters.)
    pub async fn cluster(&self, name: &str, options: ClusterOptions) -> Result<Cluster, Error> {
        Cluster::start(self.clone(), name, options).await
    }
}

impl Cluster {
    pub(crate) async fn start(
        env: Env,
        name: &str,
        options: ClusterOptions,
    ) -> Result<Self, Error> {
        let dir = env.dir().join(name);
        create_dir(&dir)?;
        let pki = &env.inner.pki;
        let serving = pki.serving("kube-apiserver")?;
        let admin = pki.client("admin", Some("system:masters"))?;
        // What it presents to kubelets (`pods/log`, `exec`), as kubeadm's
        // apiserver-kubelet-client.
        let kubelet_client = pki.client(
            "kube-apiserver-kubelet-client",
            Some("kubeadm:cluster-admins"),
        )?;
        let files = [
            ("ca.crt", pki.ca_pem.as_str()),
            ("apiserver.crt", serving.cert_pem.as_str()),
            ("apiserver.key", serving.key_pem.as_str()),
            (
                "apiserver-kubelet-client.crt",
                kubelet_client.cert_pem.as_str(),
            ),
            (
                "apiserver-kubelet-client.key",
                kubelet_client.key_pem.as_str(),
            ),
            ("sa.pub", pki.service_accounts.cert_pem.as_str()),
            ("sa.key", pki.service_accounts.key_pem.as_str()),
            (
                "audit-policy.yaml",
                if options.audit_request_bodies {
                    AUDIT_POLICY_WITH_WRITES
                } else {
                    AUDIT_POLICY
                },
            ),
        ];
        for (f, text) in files {
            write(&dir.join(f), text)?;
        }
        let port = free_port()?;
        let p = |f: &str| dir.join(f).display().to_string();
        let mut args = vec![
            format!("--etcd-servers={}", env.inner.etcd_url),
            format!("--etcd-prefix=/{name}"),
            format!("--secure-port={port}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            // Since v1.37 the lease reconciler of the `kubernetes` Service's endpoints refuses a
            // loopback address; nothing in the tests reaches the API through that Service.
            "--endpoint-reconciler-type=none".into(),
            format!("--cert-dir={}", p("certs")),
            format!("--tls-cert-file={}", p("apiserver.crt")),
            format!("--tls-private-key-file={}", p("apiserver.key")),
            format!("--client-ca-file={}", p("ca.crt")),
            format!(
                "--kubelet-client-certificate={}",
                p("apiserver-kubelet-client.crt")
            ),
            format!("--kubelet-client-key={}", p("apiserver-kubelet-client.key")),
            format!("--service-account-key-file={}", p("sa.pub")),
            format!("--service-account-signing-key-file={}", p("sa.key")),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            "--service-cluster-ip-range=10.96.0.0/16".into(),
            "--authorization-mode=Node,RBAC".into(),
            "--enable-admission-plugins=NodeRestriction,OwnerReferencesPermissionEnforcement"
                .into(),
            "--allow-privileged=true".into(),
            "--profiling=false".into(),
            format!("--audit-policy-file={}", p("audit-policy.yaml")),
            format!("--audit-log-path={}", p("audit.log")),
            "--audit-log-mode=blocking".into(),
            "--audit-log-maxsize=0".into(),
        ];
        if !options.feature_gates.is_empty() {
            args.push(format!(
                "--feature-gates={}",
                options.feature_gates.join(",")
            ));
        }
        if !options.runtime_config.is_empty() {
            args.push(format!(
                "--runtime-config={}",
                options.runtime_config.join(",")
            ));
        }
        args.extend(options.apiserver_args.iter().cloned());
        let cluster = Self {
            name: name.to_string(),
            env: env.clone(),
            port,
            dir: dir.clone(),
            apiserver_args: args,
            admin,
            scheduler: Mutex::new(None),
            controller_manager: Mutex::new(None),
            apiserver: Mutex::new(None),
        };
        cluster.start_apiserver().await?;
        if options.controller_manager {
            cluster.start_controller_manager(&options)?;
        }
        if let Some(config) = &options.scheduler {
            cluster.start_scheduler(config.clone(), &options.feature_gates)?;
        }
        Ok(cluster)
    }

    /// The cluster's name (also its etcd prefix and its directory's name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The environment it runs in.
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// The cluster's directory (its logs, kubeconfigs and audit log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts the API server (again, after [`Cluster::stop_apiserver`]: same port, same data)
    /// and waits until it is ready.
    pub async fn start_apiserver(&self) -> Result<(), Error> {
        let mut proc = Proc::spawn(
            "kube-apiserver",
            &self.env.binaries().kube_apiserver,
            &self.apiserver_args,
            &self.dir.join("kube-apiserver.log"),
        )?;
        let client = self.client().await?;
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let req = http::Request::get("/readyz")
                .body(Vec::new())
                .map_err(|e| Error::Client(e.to_string()))?;
            if let Ok(text) = client.request_text(req).await
                && text.trim() == "ok"
            {
                break;
            }
            if let Some(status) = proc.exited() {
                return Err(Error::Exited {
                    name: format!("{} kube-apiserver", self.name),
                    status: status.to_string(),
                    log: proc.tail(30),
                });
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: format!("{} kube-apiserver ready", self.name),
                    log: proc.tail(30),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        *lock(&self.apiserver) = Some(proc);
        Ok(())
    }

    /// Kills the API server (its port refuses connections until [`Cluster::start_apiserver`]).
    pub fn stop_apiserver(&self) {
        if let Some(mut p) = lock(&self.apiserver).take() {
            p.kill();
        }
    }

    fn start_controller_manager(&self, options: &ClusterOptions) -> Result<(), Error> {
        let kubeconfig = self.write_kubeconfig(
            "kube-controller-manager",
            &User::Certificate("system:kube-controller-manager".into(), None),
        )?;
        let p = |f: &str| self.dir.join(f).display().to_string();
        let mut args = vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            "--secure-port=0".into(),
            "--leader-elect=false".into(),
            "--use-service-account-credentials=true".into(),
            format!("--service-account-private-key-file={}", p("sa.key")),
            format!("--root-ca-file={}", p("ca.crt")),
            "--cluster-cidr=10.244.0.0/16".into(),
            "--service-cluster-ip-range=10.96.0.0/16".into(),
        ];
        if let Some(c) = &options.controllers {
            args.push(format!("--controllers={c}"));
        }
        if !options.feature_gates.is_empty() {
            args.push(format!(
                "--feature-gates={}",
                options.feature_gates.join(",")
            ));
        }
        let proc = Proc::spawn(
            "kube-controller-manager",
            &self.env.binaries().kube_controller_manager,
            &args,
            &self.dir.join("kube-controller-manager.log"),
        )?;
        *lock(&self.controller_manager) = Some(proc);
        Ok(())
    }

    /// Starts (or restarts) the real kube-scheduler with `config` (a
    /// `KubeSchedulerConfiguration`, or `Value::Null` for the defaults).
    pub fn start_scheduler(&self, config: Value, feature_gates: &[String]) -> Result<(), Error> {
        let kubeconfig = self.write_kubeconfig(
            "kube-scheduler",
            &User::Certificate("system:kube-scheduler".into(), None),
        )?;
        let mut config = if config.is_null() {
            json!({"apiVersion": "kubescheduler.config.k8s.io/v1",
                   "kind": "KubeSchedulerConfiguration"})
        } else {
            config
        };
        // The kubeconfig is the cluster's; the rest of the client connection (qps, burst) is
        // the caller's.
        if !config["clientConnection"].is_object() {
            config["clientConnection"] = json!({});
        }
        config["clientConnection"]["kubeconfig"] = json!(kubeconfig.display().to_string());
        config["leaderElection"] = json!({"leaderElect": false});
        let file = self.dir.join("kube-scheduler.yaml");
        write(&file, &config.to_string())?;
        let mut args = vec![
            format!("--config={}", file.display()),
            "--secure-port=0".into(),
        ];
        if !feature_gates.is_empty() {
            args.push(format!("--feature-gates={}", feature_gates.join(",")));
        }
        let mut slot = lock(&self.scheduler);
        if let Some(mut old) = slot.take() {
            old.kill();
        }
        *slot = Some(Proc::spawn(
            "kube-scheduler",
            &self.env.binaries().kube_scheduler,
            &args,
            &self.dir.join("kube-scheduler.log"),
        )?);
        Ok(())
    }

    /// Stops kube-scheduler, if it runs.
    pub fn stop_scheduler(&self) {
        if let Some(mut p) = lock(&self.scheduler).take() {
            p.kill();
        }
    }

    /// The last lines of a component's log (`kube-apiserver`, `kube-scheduler`, ...).
    pub fn log_tail(&self, component: &str, lines: usize) -> String {
        let text =
            std::fs::read_to_string(self.dir.join(format!("{component}.log"))).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// A kubeconfig for `user`, as YAML.
    pub fn kubeconfig(&self, user: &User) -> Result<String, Error> {
        let credentials = match user {
            User::Admin => self.cert_credentials(&self.admin),
            User::Certificate(cn, group) => {
                let pair = self.env.inner.pki.client(cn, group.as_deref())?;
                self.cert_credentials(&pair)
            }
            User::Token(t) => format!("    token: {}\n", quote(t)),
        };
        Ok(format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {n}\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: {n}\n  user:\n{credentials}contexts:\n- name: {n}\n  context:\n    cluster: {n}\n    user: {n}\n    namespace: default\ncurrent-context: {n}\n",
            n = quote(&self.name),
            url = quote(&self.url()),
            ca = STANDARD.encode(&self.env.inner.pki.ca_pem),
        ))
    }

    fn cert_credentials(&self, pair: &Pair) -> String {
        format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            STANDARD.encode(&pair.cert_pem),
            STANDARD.encode(&pair.key_pem)
        )
    }

    /// Writes the kubeconfig of `user` into the cluster's directory as `<file>.kubeconfig`.
    pub fn write_kubeconfig(&self, file: &str, user: &User) -> Result<PathBuf, Error> {
        let path = self.dir.join(format!("{file}.kubeconfig"));
        write(&path, &self.kubeconfig(user)?)?;
        Ok(path)
    }

    /// The admin's kubeconfig file (for `kubectl` and processes).
    pub fn admin_kubeconfig(&self) -> Result<PathBuf, Error> {
        self.write_kubeconfig("admin", &User::Admin)
    }

    /// A client as `user`.
    pub async fn client_as(&self, user: &User) -> Result<kube::Client, Error> {
        let yaml = self.kubeconfig(user)?;
        let kc =
            kube::config::Kubeconfig::from_yaml(&yaml).map_err(|e| Error::Client(e.to_string()))?;
        let config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| Error::Client(e.to_string()))?;
        kube::Client::try_from(config).map_err(|e| Error::Client(e.to_string()))
    }

    /// A client as the admin (`system:masters`).
    pub async fn client(&self) -> Result<kube::Client, Error> {
        self.client_as(&User::Admin).await
    }

    /// A token for the service account `namespace/name`, from the TokenRequest API (valid an
    /// hour), creating the namespace and the account when missing.
    pub async fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<String, Error> {
        use k8s_openapi::api::authentication::v1::TokenRequest;
        use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
        use kube::api::{Api, PostParams};
        let c = self.client().await?;
        let ns: Value = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace}});
        let ns: Namespace = serde_json::from_value(ns).map_err(|e| Error::Client(e.to_string()))?;
        create_or_keep(
            Api::<Namespace>::all(c.clone())
                .create(&PostParams::default(), &ns)
                .await,
        )?;
        let sa: ServiceAccount = serde_json::from_value(json!({"apiVersion": "v1",
            "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}}))
        .map_err(|e| Error::Client(e.to_string()))?;
        let sas: Api<ServiceAccount> = Api::namespaced(c.clone(), namespace);
        create_or_keep(sas.create(&PostParams::default(), &sa).await)?;
        let req: TokenRequest = serde_json::from_value(json!({"apiVersion":
            "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600}}))
        .map_err(|e| Error::Client(e.to_string()))?;
        let out = sas
            .create_token_request(name, &PostParams::default(), &req)
            .await
            .map_err(|e| Error::Client(format!("token for {namespace}/{name}: {e}")))?;
        out.status
            .and_then(|s| s.token)
            .ok_or_else(|| Error::Client(format!("no token for {namespace}/{name}")))
    }

    /// Every request the API server has audited so far.
    pub fn audit(&self) -> Result<Vec<AuditEvent>, Error> {
        audit::read(&self.dir.join("audit.log"))
    }
}

/// `Ok` for a create that succeeded or found the object there already.
fn create_or_keep<T>(r: Result<T, kube::Error>) -> Result<(), Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(Error::Client(e.to_string())),
    }
}
