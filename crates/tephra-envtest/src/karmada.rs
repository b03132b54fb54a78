//! A real Karmada control plane for tests, and member clusters joined to it in Push mode.
//!
//! Karmada's API server is a kube-apiserver ([`Cluster`]) with the aggregation layer's
//! front-proxy flags of Karmada's own deploy (`artifacts/deploy/karmada-apiserver.yaml`: a
//! front-proxy CA of its own, `front-proxy-client`, the `X-Remote-*` headers; the
//! `ServiceAccount` and `StorageObjectInUseProtection` admission plugins off) and
//! kube-controller-manager with the controllers Karmada runs (`kube-controller-manager.yaml`:
//! namespaces, garbage collection, tokens, CSRs). On it: Karmada's CRDs and tephra's, and
//! Karmada's own processes built by `.ci/real-components`:
//!
//! - karmada-aggregated-apiserver, which serves `cluster.karmada.io/v1alpha1` (Cluster objects
//!   are not a CRD) from the environment's etcd under a prefix of its own, registered by an
//!   APIService and an ExternalName Service pointing at its loopback port;
//! - karmada-webhook (unless [`KarmadaOptions::webhook`] is off), with Karmada's mutating and
//!   validating webhook configurations pointing at its loopback port, and the CRD conversion
//!   webhook of the binding CRDs (`charts/karmada/_crds/patches`);
//! - karmada-controller-manager with every default controller, the gates of
//!   [`KarmadaOptions::feature_gates`] and short cluster-health periods for tests;
//! - karmada-scheduler (unless [`KarmadaOptions::scheduler`] is off), so that bindings that
//!   name `default-scheduler` are placed by Karmada;
//! - with [`KarmadaOptions::estimator`], karmada-scheduler-estimator for each member (plain
//!   gRPC on a loopback port of its own, found by karmada-scheduler through an ExternalName
//!   Service `karmada-scheduler-estimator-<member>` in `karmada-system`).
//!
//! Each member is a real cluster as [`tier::fleet`](crate::tier::fleet) starts it (its
//! controller manager, tephra's CRDs, a `default` Queue, simulated kubelets) joined as
//! `karmadactl join` joins one: in the member, service accounts in `karmada-cluster` (the
//! cluster's bound to `cluster-admin`, and the impersonator's); on Karmada, their tokens in
//! Secrets `karmada-cluster/<name>` (`token`, `caBundle`) and
//! `karmada-cluster/<name>-impersonator` (`token`), and a Push-mode Cluster with the member's
//! endpoint and `kube-system` uid as its id. The fleet is returned once every Cluster is Ready.
//!
//! Without the webhook, nothing labels what the webhook labels on create:
//! PropagationPolicies (`propagationpolicy.karmada.io/permanent-id` and the
//! `karmada.io/propagation-policy-controller` finalizer; the cluster-scoped kind likewise),
//! ResourceBindings (`resourcebinding.karmada.io/permanent-id`), ClusterResourceBindings and
//! Works (`work.karmada.io/permanent-id`). [`KarmadaFleet::propagation_policy`] labels
//! policies as the webhook would (not the defaults it also fills in: resource selectors'
//! namespace, spread constraints, replica division preference), and propagation then
//! works, but bindings and Works are
//! made by Karmada's own controllers: the workloads in members carry
//! `resourcebinding.karmada.io/permanent-id: ""` and no Work id, and the binding controller
//! finds a binding's Works (to delete them, or the orphans a move leaves) by that id. Run the
//! webhook (the default) for anything that deletes or moves bindings.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use crate::components::{Karmada, require_karmada};
use crate::env::{create_dir, wait_port, write};
use crate::kubelet::{KubeletOptions, Kubelets, NodeSpec};
use crate::pki::{Pair, Pki};
use crate::process::{Proc, free_port};
use crate::tier::{Member, client_of, find_member, prepare};
use crate::{Cluster, ClusterOptions, Env, Error, Release, User, objects, require};

/// The name of Karmada's API server in a [`KarmadaFleet`] (its directory and etcd prefix).
pub const KARMADA: &str = "karmada";
/// Karmada's own namespace (the aggregated API server's Service lives there).
pub const KARMADA_SYSTEM: &str = "karmada-system";
/// Where members' credentials live, on Karmada and in each member, as `karmadactl join`
/// puts them.
pub const CLUSTER_NAMESPACE: &str = "karmada-cluster";
/// The controllers of kube-controller-manager on Karmada's API server, as Karmada's deploy
/// runs it.
pub const KUBE_CONTROLLERS: &str = "namespace,garbagecollector,serviceaccount-token,\
ttl-after-finished,bootstrapsigner,tokencleaner,csrapproving,csrcleaner,csrsigning,\
clusterrole-aggregation";
/// The APIService of Cluster objects, served by karmada-aggregated-apiserver.
const CLUSTER_API: &str = "/apis/cluster.karmada.io/v1alpha1";
const AGGREGATED: &str = "karmada-aggregated-apiserver";
const WEBHOOK: &str = "karmada-webhook";
const CONTROLLER_MANAGER: &str = "karmada-controller-manager";
const SCHEDULER: &str = "karmada-scheduler";
const ESTIMATOR: &str = "karmada-scheduler-estimator";
/// The port karmada-scheduler asks each estimator's Service for (its default); each Service
/// maps it to the port its estimator listens on.
const ESTIMATOR_PORT: u16 = 10352;
/// Karmada's impersonator service account in each member (`names.GenerateServiceAccountName`).
const IMPERSONATOR: &str = "karmada-impersonator";
/// Label and finalizer the policy webhooks add on create.
const PP_ID: &str = "propagationpolicy.karmada.io/permanent-id";
const CPP_ID: &str = "clusterpropagationpolicy.karmada.io/permanent-id";
const PP_FINALIZER: &str = "karmada.io/propagation-policy-controller";
const CPP_FINALIZER: &str = "karmada.io/cluster-propagation-policy-controller";

/// How Karmada runs.
#[derive(Clone, Debug)]
pub struct KarmadaOptions {
    /// Run karmada-scheduler (default on).
    pub scheduler: bool,
    /// Run karmada-webhook and register its webhooks (default on).
    pub webhook: bool,
    /// `--feature-gates` of Karmada's processes, `Name=true` each (default `Failover`,
    /// `GracefulEviction` and `MultiplePodTemplatesScheduling`).
    pub feature_gates: Vec<String>,
    /// `--controllers` of karmada-controller-manager (default `*`: every default one).
    pub controllers: String,
    /// `--cluster-status-update-frequency`: how often each member is probed (default 1 s).
    pub cluster_status_update_frequency: Duration,
    /// `--cluster-failure-threshold`: how long probes fail before a Ready cluster is marked
    /// not Ready (default 2 s).
    pub cluster_failure_threshold: Duration,
    /// `--cluster-success-threshold`: how long probes succeed before a not-Ready cluster is
    /// marked Ready again (default 1 s).
    pub cluster_success_threshold: Duration,
    /// More karmada-controller-manager flags (after the others: a flag given again here
    /// wins), `--graceful-eviction-timeout=30s` say.
    pub controller_manager_args: Vec<String>,
    /// Run karmada-scheduler-estimator for each member and have karmada-scheduler call it
    /// (default off; the binary is built by `.ci/real-components --with-karmada-estimator`).
    pub estimator: bool,
}

impl Default for KarmadaOptions {
    fn default() -> Self {
        Self {
            scheduler: true,
            webhook: true,
            feature_gates: vec![
                "Failover=true".into(),
                "GracefulEviction=true".into(),
                "MultiplePodTemplatesScheduling=true".into(),
            ],
            controllers: "*".into(),
            cluster_status_update_frequency: Duration::from_secs(1),
            cluster_failure_threshold: Duration::from_secs(2),
            cluster_success_threshold: Duration::from_secs(1),
            controller_manager_args: Vec::new(),
            estimator: false,
        }
    }
}

/// Karmada's API server and processes, and member clusters joined to it.
pub struct KarmadaFleet {
    // Field order is drop order: Karmada's processes (clients of every API server) first,
    // the members, Karmada's API server, the environment last.
    components: Vec<Proc>,
    /// An admin client of Karmada's API server.
    pub karmada_client: kube::Client,
    /// The members, joined and Ready.
    pub members: Vec<Member>,
    /// Karmada's API server (and kube-controller-manager beside it); Karmada's processes log
    /// into its directory too (`karmada-controller-manager.log`, ...: see
    /// [`Cluster::log_tail`]).
    pub karmada: Cluster,
    /// The environment.
    pub env: Env,
    webhook: bool,
}

fn client_err(what: &str) -> impl FnOnce(kube::Error) -> Error + '_ {
    move |e| Error::Client(format!("{what}: {e}"))
}

/// A Go duration flag value.
fn go_duration(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// The dynamic API of Karmada's Cluster objects.
fn clusters_api(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "cluster.karmada.io".into(),
        version: "v1alpha1".into(),
        api_version: "cluster.karmada.io/v1alpha1".into(),
        kind: "Cluster".into(),
        plural: "clusters".into(),
    };
    Api::all_with(client.clone(), &ar)
}

/// Starts Karmada on a real API server of `release` and one member per `(name, nodes)`,
/// joined and Ready; `None` (after saying why) when the components are not built and this is
/// not CI.
pub async fn karmada_fleet(
    release: &Release,
    members: &[(&str, Vec<NodeSpec>)],
    options: KarmadaOptions,
) -> Result<Option<KarmadaFleet>, Error> {
    let Some(bins) = require(release) else {
        return Ok(None);
    };
    let Some(karmada_bins) = require_karmada() else {
        return Ok(None);
    };
    for (name, _) in members {
        if *name == KARMADA || name.len() > 48 {
            return Err(Error::Client(format!(
                "member name {name}: not `{KARMADA}`, at most 48 characters"
            )));
        }
    }
    if options.estimator && !karmada_bins.dir.join(ESTIMATOR).is_file() {
        return Err(Error::Missing {
            what: format!(
                "{ESTIMATOR} in {} (bash .ci/real-components --with-karmada-estimator)",
                karmada_bins.dir.display()
            ),
        });
    }
    let env = Env::start(bins).await?;
    let ((karmada, karmada_client, mut components), members) = tokio::try_join!(
        control_plane(&env, &karmada_bins, &options),
        futures::future::try_join_all(
            members
                .iter()
                .map(|(name, nodes)| start_member(&env, name, nodes))
        ),
    )?;
    if options.estimator {
        // Before the members join: karmada-scheduler connects to a member's estimator when
        // it first sees the member's Cluster.
        for m in &members {
            components.push(estimator(&karmada, &karmada_client, &karmada_bins, m).await?);
        }
    }
    futures::future::try_join_all(members.iter().map(|m| join(&karmada_client, m))).await?;
    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
    wait_ready(&karmada_client, &names, &mut components).await?;
    Ok(Some(KarmadaFleet {
        components,
        karmada_client,
        members,
        karmada,
        env,
        webhook: options.webhook,
    }))
}

/// A member cluster as the tier's fleets start them: controller manager, tephra's CRDs, a
/// `default` Queue, the `default` namespace ready for pods, simulated kubelets.
async fn start_member(env: &Env, name: &str, nodes: &[NodeSpec]) -> Result<Member, Error> {
    let cluster = env
        .cluster(
            name,
            ClusterOptions {
                controller_manager: true,
                ..ClusterOptions::default()
            },
        )
        .await?;
    let client = cluster.client().await?;
    prepare(&client).await?;
    let kubelets = Kubelets::start(client.clone(), nodes, KubeletOptions::default()).await?;
    Ok(Member {
        name: name.to_string(),
        client,
        kubelets,
        cluster,
    })
}

/// Karmada's API server with its CRDs and tephra's, and Karmada's processes on it (in the
/// order they should stop).
async fn control_plane(
    env: &Env,
    bins: &Karmada,
    options: &KarmadaOptions,
) -> Result<(Cluster, kube::Client, Vec<Proc>), Error> {
    // The aggregation layer's front proxy: a CA of its own and its client certificate.
    let pki_dir = env.dir().join("karmada-front-proxy");
    create_dir(&pki_dir)?;
    let front = Pki::generate()?;
    let client = front.client("front-proxy-client", None)?;
    let p = |f: &str| pki_dir.join(f).display().to_string();
    write(&pki_dir.join("ca.crt"), &front.ca_pem)?;
    write(&pki_dir.join("client.crt"), &client.cert_pem)?;
    write(&pki_dir.join("client.key"), &client.key_pem)?;
    let cluster = env
        .cluster(
            KARMADA,
            ClusterOptions {
                controller_manager: true,
                controllers: Some(KUBE_CONTROLLERS.into()),
                apiserver_args: vec![
                    "--disable-admission-plugins=StorageObjectInUseProtection,ServiceAccount"
                        .into(),
                    "--enable-bootstrap-token-auth=true".into(),
                    format!("--proxy-client-cert-file={}", p("client.crt")),
                    format!("--proxy-client-key-file={}", p("client.key")),
                    format!("--requestheader-client-ca-file={}", p("ca.crt")),
                    "--requestheader-allowed-names=front-proxy-client".into(),
                    "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
                    "--requestheader-group-headers=X-Remote-Group".into(),
                    "--requestheader-username-headers=X-Remote-User".into(),
                ],
                ..ClusterOptions::default()
            },
        )
        .await?;
    let client = cluster.client().await?;
    let mut crds = objects::crds_in(&bins.dir.join("crds"), "Karmada's CRDs")?;
    let webhook_port = free_port()?;
    if options.webhook {
        let url = format!("https://127.0.0.1:{webhook_port}/convert");
        for crd in &mut crds {
            let name = crd.pointer("/metadata/name").and_then(Value::as_str);
            if matches!(
                name,
                Some(
                    "resourcebindings.work.karmada.io" | "clusterresourcebindings.work.karmada.io"
                )
            ) {
                crd["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
                    "clientConfig": {"url": url, "caBundle": STANDARD.encode(env.ca_pem())},
                    "conversionReviewVersions": ["v1"]}});
            }
        }
    }
    objects::install_crds(&client, &crds).await?;
    objects::install_tephra_crds(&client).await?;
    for ns in [KARMADA_SYSTEM, CLUSTER_NAMESPACE] {
        create_or_keep(
            &client,
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )
        .await?;
    }
    let mut components = Vec::new();
    components.push(aggregated_apiserver(env, &cluster, &client, bins).await?);
    if options.webhook {
        components.push(webhook(env, &cluster, &client, bins, webhook_port, options).await?);
    }
    let gates = format!("--feature-gates={}", options.feature_gates.join(","));
    let kubeconfig = masters_kubeconfig(&cluster, CONTROLLER_MANAGER)?;
    let mut args = vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--controllers={}", options.controllers),
        gates.clone(),
        "--enable-no-execute-taint-eviction=true".into(),
        format!(
            "--cluster-status-update-frequency={}",
            go_duration(options.cluster_status_update_frequency)
        ),
        format!(
            "--cluster-failure-threshold={}",
            go_duration(options.cluster_failure_threshold)
        ),
        format!(
            "--cluster-success-threshold={}",
            go_duration(options.cluster_success_threshold)
        ),
        // The lease-based health of Pull-mode clusters, short as well.
        "--cluster-monitor-period=1s".into(),
        "--cluster-monitor-grace-period=5s".into(),
        "--cluster-startup-grace-period=10s".into(),
        "--metrics-bind-address=0".into(),
        "--health-probe-bind-address=0".into(),
        "--leader-elect=false".into(),
        "--v=2".into(),
    ];
    args.extend(options.controller_manager_args.iter().cloned());
    let controller_manager = spawn(&cluster, bins, CONTROLLER_MANAGER, &args)?;
    let mut scheduler = None;
    if options.scheduler {
        let kubeconfig = masters_kubeconfig(&cluster, SCHEDULER)?;
        let mut args = vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            gates,
            "--metrics-bind-address=0".into(),
            "--health-probe-bind-address=0".into(),
            "--leader-elect=false".into(),
            "--v=2".into(),
        ];
        if options.estimator {
            args.extend([
                "--enable-scheduler-estimator=true".into(),
                format!("--scheduler-estimator-service-namespace={KARMADA_SYSTEM}"),
                format!("--scheduler-estimator-service-prefix={ESTIMATOR}"),
                format!("--scheduler-estimator-port={ESTIMATOR_PORT}"),
            ]);
        }
        scheduler = Some(spawn(&cluster, bins, SCHEDULER, &args)?);
    }
    // Stopping order: the controller manager and the scheduler before the servers they call.
    let mut ordered = vec![controller_manager];
    ordered.extend(scheduler);
    ordered.extend(components.into_iter().rev());
    Ok((cluster, client, ordered))
}

/// Starts karmada-scheduler-estimator for `member` on a port of its own (plain gRPC, as
/// without certificates it serves), with an admin kubeconfig of the member, and the
/// ExternalName Service on Karmada's API server through which karmada-scheduler finds it
/// (`<prefix>-<cluster>` in `karmada-system`, its port mapped to the estimator's).
async fn estimator(
    cluster: &Cluster,
    client: &kube::Client,
    bins: &Karmada,
    member: &Member,
) -> Result<Proc, Error> {
    let port = free_port()?;
    let kubeconfig = member.cluster.write_kubeconfig(
        ESTIMATOR,
        &User::Certificate(ESTIMATOR.into(), Some("system:masters".into())),
    )?;
    let args = vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--cluster-name={}", member.name),
        format!("--server-port={port}"),
        "--metrics-bind-address=0".into(),
        "--health-probe-bind-address=0".into(),
        "--v=2".into(),
    ];
    let proc = Proc::spawn(
        ESTIMATOR,
        &bins.dir.join(ESTIMATOR),
        &args,
        &cluster
            .dir()
            .join(format!("{ESTIMATOR}-{}.log", member.name)),
    )?;
    create_or_keep(
        client,
        &json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": format!("{ESTIMATOR}-{}", member.name),
                "namespace": KARMADA_SYSTEM},
            "spec": {"type": "ExternalName", "externalName": "localhost",
                "ports": [{"name": "grpc", "port": ESTIMATOR_PORT, "targetPort": port}]}}),
    )
    .await?;
    Ok(proc)
}

/// Starts one of Karmada's binaries with its log in Karmada's directory.
fn spawn(cluster: &Cluster, bins: &Karmada, name: &str, args: &[String]) -> Result<Proc, Error> {
    Proc::spawn(
        name,
        &bins.dir.join(name),
        args,
        &cluster.dir().join(format!("{name}.log")),
    )
}

/// A kubeconfig of Karmada's API server for its process `name`: a user of that name in
/// `system:masters`.
fn masters_kubeconfig(cluster: &Cluster, name: &str) -> Result<PathBuf, Error> {
    cluster.write_kubeconfig(
        name,
        &User::Certificate(name.into(), Some("system:masters".into())),
    )
}

/// Where one of Karmada's serving processes keeps its files.
struct ServingFiles {
    /// Its directory (in Karmada's), with its serving certificate as `tls.crt` and `tls.key`.
    dir: PathBuf,
    /// Its kubeconfig of Karmada's API server ([`masters_kubeconfig`]).
    kubeconfig: PathBuf,
}

/// Makes the directory of Karmada's serving process `name` with its serving certificate
/// `serving`, and writes its kubeconfig.
fn serving_files(cluster: &Cluster, name: &str, serving: &Pair) -> Result<ServingFiles, Error> {
    let dir = cluster.dir().join(name);
    create_dir(&dir)?;
    write(&dir.join("tls.crt"), &serving.cert_pem)?;
    write(&dir.join("tls.key"), &serving.key_pem)?;
    let kubeconfig = masters_kubeconfig(cluster, name)?;
    Ok(ServingFiles { dir, kubeconfig })
}

/// Fails with the first of `components` that has exited, and its log's end.
fn check_running(components: &mut [Proc]) -> Result<(), Error> {
    for proc in components {
        if let Some(status) = proc.exited() {
            return Err(Error::Exited {
                name: proc.name().to_string(),
                status: status.to_string(),
                log: proc.tail(30),
            });
        }
    }
    Ok(())
}

/// Creates an object, or leaves the one there.
async fn create_or_keep(client: &kube::Client, manifest: &Value) -> Result<(), Error> {
    match objects::create(client, manifest).await {
        Ok(_) => Ok(()),
        Err(Error::Client(e)) if e.contains("already exists") => Ok(()),
        Err(e) => Err(e),
    }
}

/// karmada-aggregated-apiserver on a free loopback port, registered for
/// `cluster.karmada.io/v1alpha1`, once the API server proxies to it.
async fn aggregated_apiserver(
    env: &Env,
    cluster: &Cluster,
    client: &kube::Client,
    bins: &Karmada,
) -> Result<Proc, Error> {
    // The API server checks the name of the Service it proxies to.
    let service_name = format!("{AGGREGATED}.{KARMADA_SYSTEM}.svc");
    let serving = env.inner.pki.serving_for(AGGREGATED, &[&service_name])?;
    let ServingFiles { dir, kubeconfig } = serving_files(cluster, AGGREGATED, &serving)?;
    let port = free_port()?;
    let kc = kubeconfig.display().to_string();
    let args = vec![
        format!("--kubeconfig={kc}"),
        format!("--authentication-kubeconfig={kc}"),
        format!("--authorization-kubeconfig={kc}"),
        format!("--etcd-servers={}", env.inner.etcd_url),
        format!("--etcd-prefix=/{}-aggregated", cluster.name()),
        format!("--cert-dir={}", dir.display()),
        format!("--tls-cert-file={}", dir.join("tls.crt").display()),
        format!("--tls-private-key-file={}", dir.join("tls.key").display()),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        "--profiling=false".into(),
    ];
    let mut proc = spawn(cluster, bins, AGGREGATED, &args)?;
    wait_port(&mut proc, port, Duration::from_secs(60)).await?;
    create_or_keep(
        client,
        &json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": AGGREGATED, "namespace": KARMADA_SYSTEM},
            "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}}),
    )
    .await?;
    create_or_keep(
        client,
        &json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1alpha1.cluster.karmada.io"},
            "spec": {"caBundle": STANDARD.encode(env.ca_pem()), "group": "cluster.karmada.io",
                "groupPriorityMinimum": 2000, "version": "v1alpha1", "versionPriority": 10,
                "service": {"name": AGGREGATED, "namespace": KARMADA_SYSTEM, "port": port}}}),
    )
    .await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let req = http::Request::get(CLUSTER_API)
            .body(Vec::new())
            .map_err(|e| Error::Client(e.to_string()))?;
        if client.request_text(req).await.is_ok() {
            return Ok(proc);
        }
        check_running(std::slice::from_mut(&mut proc))?;
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: format!("{CLUSTER_API} served through Karmada's API server"),
                log: format!(
                    "{}\n--- kube-apiserver:\n{}",
                    proc.tail(20),
                    cluster.log_tail("kube-apiserver", 20)
                ),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One of Karmada's webhooks (`artifacts/deploy/webhook-configuration.yaml`).
struct Hook {
    name: &'static str,
    path: &'static str,
    group: &'static str,
    resource: &'static str,
    scope: &'static str,
    operations: &'static [&'static str],
}

const fn hook(
    name: &'static str,
    path: &'static str,
    group: &'static str,
    resource: &'static str,
    scope: &'static str,
    operations: &'static [&'static str],
) -> Hook {
    Hook {
        name,
        path,
        group,
        resource,
        scope,
        operations,
    }
}

const CU: &[&str] = &["CREATE", "UPDATE"];
const C: &[&str] = &["CREATE"];
const POLICY: &str = "policy.karmada.io";
const WORK: &str = "work.karmada.io";
const AUTOSCALING: &str = "autoscaling.karmada.io";
const NETWORKING: &str = "networking.karmada.io";
const CONFIG: &str = "config.karmada.io";
const NS: &str = "Namespaced";
const CL: &str = "Cluster";

const MUTATING: &[Hook] = &[
    hook(
        "propagationpolicy.karmada.io",
        "/mutate-propagationpolicy",
        POLICY,
        "propagationpolicies",
        NS,
        CU,
    ),
    hook(
        "clusterpropagationpolicy.karmada.io",
        "/mutate-clusterpropagationpolicy",
        POLICY,
        "clusterpropagationpolicies",
        CL,
        CU,
    ),
    hook(
        "overridepolicy.karmada.io",
        "/mutate-overridepolicy",
        POLICY,
        "overridepolicies",
        NS,
        CU,
    ),
    hook(
        "resourcebinding.karmada.io",
        "/mutate-resourcebinding",
        WORK,
        "resourcebindings",
        NS,
        C,
    ),
    hook(
        "clusterresourcebinding.karmada.io",
        "/mutate-clusterresourcebinding",
        WORK,
        "clusterresourcebindings",
        CL,
        C,
    ),
    hook("work.karmada.io", "/mutate-work", WORK, "works", NS, CU),
    hook(
        "autoscaling.karmada.io",
        "/mutate-federatedhpa",
        AUTOSCALING,
        "federatedhpas",
        NS,
        CU,
    ),
    hook(
        "multiclusterservice.karmada.io",
        "/mutate-multiclusterservice",
        NETWORKING,
        "multiclusterservices",
        NS,
        CU,
    ),
];

const VALIDATING: &[Hook] = &[
    hook(
        "propagationpolicy.karmada.io",
        "/validate-propagationpolicy",
        POLICY,
        "propagationpolicies",
        NS,
        CU,
    ),
    hook(
        "clusterpropagationpolicy.karmada.io",
        "/validate-clusterpropagationpolicy",
        POLICY,
        "clusterpropagationpolicies",
        CL,
        CU,
    ),
    hook(
        "overridepolicy.karmada.io",
        "/validate-overridepolicy",
        POLICY,
        "overridepolicies",
        NS,
        CU,
    ),
    hook(
        "clusteroverridepolicy.karmada.io",
        "/validate-clusteroverridepolicy",
        POLICY,
        "clusteroverridepolicies",
        CL,
        CU,
    ),
    hook(
        "config.karmada.io",
        "/validate-resourceinterpreterwebhookconfiguration",
        CONFIG,
        "resourceinterpreterwebhookconfigurations",
        CL,
        CU,
    ),
    hook(
        "resourceinterpretercustomization.karmada.io",
        "/validate-resourceinterpretercustomization",
        CONFIG,
        "resourceinterpretercustomizations",
        CL,
        CU,
    ),
    hook(
        "federatedresourcequota.karmada.io",
        "/validate-federatedresourcequota",
        POLICY,
        "federatedresourcequotas",
        NS,
        CU,
    ),
    hook(
        "multiclusteringress.karmada.io",
        "/validate-multiclusteringress",
        NETWORKING,
        "multiclusteringresses",
        NS,
        CU,
    ),
    hook(
        "federatedhpa.karmada.io",
        "/validate-federatedhpa",
        AUTOSCALING,
        "federatedhpas",
        NS,
        CU,
    ),
    hook(
        "cronfederatedhpa.karmada.io",
        "/validate-cronfederatedhpa",
        AUTOSCALING,
        "cronfederatedhpas",
        NS,
        CU,
    ),
    hook(
        "multiclusterservice.karmada.io",
        "/validate-multiclusterservice",
        NETWORKING,
        "multiclusterservices",
        NS,
        CU,
    ),
    hook(
        "resourcedeletionprotection.karmada.io",
        "/validate-resourcedeletionprotection",
        "*",
        "*",
        "*",
        &["DELETE"],
    ),
    hook(
        "resourcebinding.karmada.io",
        "/validate-resourcebinding",
        WORK,
        "resourcebindings",
        NS,
        CU,
    ),
    hook(
        "clustertaintpolicy.karmada.io",
        "/validate-clustertaintpolicy",
        POLICY,
        "clustertaintpolicies",
        CL,
        CU,
    ),
];

/// A webhook configuration of `hooks` calling `base` (`https://127.0.0.1:PORT`).
fn webhook_configuration(kind: &str, name: &str, hooks: &[Hook], base: &str, ca: &str) -> Value {
    let webhooks: Vec<Value> = hooks
        .iter()
        .map(|h| {
            let mut w = json!({"name": h.name,
                "rules": [{"operations": h.operations, "apiGroups": [h.group],
                    "apiVersions": ["*"], "resources": [h.resource], "scope": h.scope}],
                "clientConfig": {"url": format!("{base}{}", h.path), "caBundle": ca},
                "failurePolicy": "Fail", "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                // Karmada's 3 s (10 s for customizations) is short on a loaded test machine.
                "timeoutSeconds": 10});
            if h.name == "resourcedeletionprotection.karmada.io" {
                w["objectSelector"] = json!({"matchExpressions": [{
                    "key": "resourcetemplate.karmada.io/deletion-protected",
                    "operator": "Exists"}]});
            }
            if h.path == "/validate-resourcebinding" {
                w["sideEffects"] = json!("NoneOnDryRun");
            }
            w
        })
        .collect();
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": name, "labels": {"app": WEBHOOK}}, "webhooks": webhooks})
}

/// karmada-webhook on `port`, and Karmada's webhook configurations calling it.
async fn webhook(
    env: &Env,
    cluster: &Cluster,
    client: &kube::Client,
    bins: &Karmada,
    port: u16,
    options: &KarmadaOptions,
) -> Result<Proc, Error> {
    let serving = env.inner.pki.serving(WEBHOOK)?;
    let ServingFiles { dir, kubeconfig } = serving_files(cluster, WEBHOOK, &serving)?;
    let args = vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        format!("--cert-dir={}", dir.display()),
        "--metrics-bind-address=0".into(),
        "--health-probe-bind-address=0".into(),
        format!("--feature-gates={}", options.feature_gates.join(",")),
        "--allow-no-execute-taint-policy=true".into(),
        "--v=2".into(),
    ];
    let mut proc = spawn(cluster, bins, WEBHOOK, &args)?;
    wait_port(&mut proc, port, Duration::from_secs(60)).await?;
    let base = format!("https://127.0.0.1:{port}");
    let ca = STANDARD.encode(env.ca_pem());
    create_or_keep(
        client,
        &webhook_configuration(
            "MutatingWebhookConfiguration",
            "mutating-config",
            MUTATING,
            &base,
            &ca,
        ),
    )
    .await?;
    create_or_keep(
        client,
        &webhook_configuration(
            "ValidatingWebhookConfiguration",
            "validating-config",
            VALIDATING,
            &base,
            &ca,
        ),
    )
    .await?;
    Ok(proc)
}

/// Joins `member` to Karmada in Push mode, as `karmadactl join` does.
async fn join(karmada: &kube::Client, member: &Member) -> Result<(), Error> {
    let name = &member.name;
    let account = format!("karmada-{name}");
    let token = member
        .cluster
        .service_account_token(CLUSTER_NAMESPACE, &account)
        .await?;
    create_or_keep(
        &member.client,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": format!("system:karmada:{account}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": account,
                "namespace": CLUSTER_NAMESPACE}]}),
    )
    .await?;
    let impersonator = member
        .cluster
        .service_account_token(CLUSTER_NAMESPACE, IMPERSONATOR)
        .await?;
    let id = Api::<Namespace>::all(member.client.clone())
        .get("kube-system")
        .await
        .map_err(client_err("kube-system"))?
        .metadata
        .uid
        .unwrap_or_default();
    let impersonator_secret = format!("{name}-impersonator");
    objects::create(
        karmada,
        &json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": CLUSTER_NAMESPACE},
            "data": {"token": STANDARD.encode(&token),
                "caBundle": STANDARD.encode(member.cluster.env().ca_pem())}}),
    )
    .await?;
    objects::create(
        karmada,
        &json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": impersonator_secret, "namespace": CLUSTER_NAMESPACE},
            "data": {"token": STANDARD.encode(&impersonator)}}),
    )
    .await?;
    let cluster = objects::create(
        karmada,
        &json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name},
            "spec": {"syncMode": "Push", "apiEndpoint": member.cluster.url(), "id": id,
                "secretRef": {"namespace": CLUSTER_NAMESPACE, "name": name},
                "impersonatorSecretRef": {"namespace": CLUSTER_NAMESPACE,
                    "name": impersonator_secret}}}),
    )
    .await?;
    // The Secrets go with the Cluster, as join makes them.
    let owner = json!({"metadata": {"ownerReferences": [{
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "name": name,
        "uid": cluster.pointer("/metadata/uid").cloned().unwrap_or_default(),
        "controller": true, "blockOwnerDeletion": true}]}});
    let secrets: Api<Secret> = Api::namespaced(karmada.clone(), CLUSTER_NAMESPACE);
    for secret in [name.as_str(), impersonator_secret.as_str()] {
        secrets
            .patch(secret, &PatchParams::default(), &Patch::Merge(&owner))
            .await
            .map_err(client_err(secret))?;
    }
    Ok(())
}

/// The status of a Cluster's Ready condition (`True`, `False`, `Unknown`), if it has one.
async fn ready_status(karmada: &kube::Client, name: &str) -> Result<Option<String>, Error> {
    let cluster = clusters_api(karmada)
        .get_opt(name)
        .await
        .map_err(client_err(name))?;
    Ok(cluster.and_then(|c| {
        c.data
            .pointer("/status/conditions")?
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Ready")?["status"]
            .as_str()
            .map(str::to_string)
    }))
}

/// Waits until every named Cluster is Ready, failing early when a process of Karmada's
/// exits.
async fn wait_ready(
    karmada: &kube::Client,
    names: &[&str],
    components: &mut [Proc],
) -> Result<(), Error> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut pending: Vec<&str> = names.to_vec();
    loop {
        let mut still = Vec::new();
        for name in pending {
            if ready_status(karmada, name).await.ok().flatten().as_deref() != Some("True") {
                still.push(name);
            }
        }
        pending = still;
        if pending.is_empty() {
            return Ok(());
        }
        check_running(components)?;
        if Instant::now() > deadline {
            let log = components
                .iter()
                .find(|p| p.name() == CONTROLLER_MANAGER)
                .map(|p| p.tail(30))
                .unwrap_or_default();
            return Err(Error::Timeout {
                what: format!("Karmada Clusters {pending:?} Ready"),
                log,
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl KarmadaFleet {
    /// A member by name.
    pub fn member(&self, name: &str) -> Result<&Member, Error> {
        find_member(&self.members, name)
    }

    /// An admin client of `name` (a member, or [`KARMADA`]).
    pub fn client(&self, name: &str) -> Result<kube::Client, Error> {
        client_of((KARMADA, &self.karmada_client), &self.members, name)
    }

    /// Stops a member's API server: its port refuses connections, Karmada's probes fail.
    pub fn stop_member(&self, name: &str) -> Result<(), Error> {
        self.member(name)?.cluster.stop_apiserver();
        Ok(())
    }

    /// Starts a stopped member's API server again, on its port and data.
    pub async fn restore_member(&self, name: &str) -> Result<(), Error> {
        self.member(name)?.cluster.start_apiserver().await
    }

    /// The status of the Ready condition of the member's Cluster object (`True`, `False`,
    /// `Unknown`), if it has one.
    pub async fn cluster_ready(&self, name: &str) -> Result<Option<String>, Error> {
        ready_status(&self.karmada_client, name).await
    }

    /// The member's Cluster object on Karmada, as JSON.
    pub async fn cluster_object(&self, name: &str) -> Result<Value, Error> {
        let c = clusters_api(&self.karmada_client)
            .get(name)
            .await
            .map_err(client_err(name))?;
        serde_json::to_value(c).map_err(|e| Error::Client(e.to_string()))
    }

    /// The ResourceBinding Karmada's detector made for the resource template `kind`
    /// `namespace/name` (it names it `<name>-<kind>`, lower case), if there is one.
    pub async fn resource_binding(
        &self,
        namespace: &str,
        kind: &str,
        name: &str,
    ) -> Result<Option<Value>, Error> {
        let ar = ApiResource {
            group: "work.karmada.io".into(),
            version: "v1alpha2".into(),
            api_version: "work.karmada.io/v1alpha2".into(),
            kind: "ResourceBinding".into(),
            plural: "resourcebindings".into(),
        };
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.karmada_client.clone(), namespace, &ar);
        let binding = format!("{}-{}", name.replace(':', "."), kind).to_lowercase();
        let rb = api.get_opt(&binding).await.map_err(client_err(&binding))?;
        rb.map(|rb| serde_json::to_value(rb).map_err(|e| Error::Client(e.to_string())))
            .transpose()
    }

    /// Creates a PropagationPolicy or ClusterPropagationPolicy on Karmada and returns it as
    /// stored. Without the webhook, it first adds what the webhook adds on create: the
    /// `permanent-id` label (a fresh uuid) and the policy controller's finalizer.
    pub async fn propagation_policy(&self, mut manifest: Value) -> Result<Value, Error> {
        if !self.webhook {
            let (label, finalizer) = match manifest["kind"].as_str() {
                Some("ClusterPropagationPolicy") => (CPP_ID, CPP_FINALIZER),
                _ => (PP_ID, PP_FINALIZER),
            };
            if !manifest["metadata"]["labels"].is_object() {
                manifest["metadata"]["labels"] = json!({});
            }
            if manifest["metadata"]["labels"][label].is_null() {
                manifest["metadata"]["labels"][label] = json!(tephra_devcluster::admit::uuid());
            }
            if !manifest["metadata"]["finalizers"].is_array() {
                manifest["metadata"]["finalizers"] = json!([]);
            }
            if let Some(f) = manifest["metadata"]["finalizers"].as_array_mut()
                && !f.iter().any(|x| x == finalizer)
            {
                f.push(json!(finalizer));
            }
        }
        objects::create(&self.karmada_client, &manifest).await
    }

    /// Whether karmada-webhook runs.
    pub fn webhook(&self) -> bool {
        self.webhook
    }

    /// Checks that Karmada's processes still run.
    pub fn check_components(&mut self) -> Result<(), Error> {
        check_running(&mut self.components)
    }
}
