//! What the real-cluster tier's tests start from: one real cluster (API server and controller
//! manager) with tephra's CRDs, a `default` Queue, simulated kubelets for the given nodes and
//! an admin client; and namespaces made ready for pods (the controller manager gives each its
//! `default` service account, without which the ServiceAccount admission plugin refuses
//! pods).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::kubelet::{KubeletOptions, Kubelets, NodeSpec};
use crate::{Cluster, ClusterOptions, Env, Error, Release, objects, require};

/// One real cluster ready for tephra.
pub struct Single {
    /// An admin client.
    pub client: kube::Client,
    /// The nodes' kubelets.
    pub kubelets: Kubelets,
    /// The cluster.
    pub cluster: Cluster,
    /// Its environment (dropped last).
    pub env: Env,
}

/// Starts a real cluster of `release` with the controller manager (and whatever `options`
/// adds), tephra's CRDs, a `default` Queue and `nodes`; `None` (after saying why) when the
/// components are not built and this is not CI.
pub async fn single(
    release: &Release,
    nodes: &[NodeSpec],
    options: ClusterOptions,
) -> Result<Option<Single>, Error> {
    let Some(bins) = require(release) else {
        return Ok(None);
    };
    let env = Env::start(bins).await?;
    let cluster = env
        .cluster(
            "local",
            ClusterOptions {
                controller_manager: true,
                ..options
            },
        )
        .await?;
    let client = cluster.client().await?;
    prepare(&client).await?;
    let kubelets = Kubelets::start(client.clone(), nodes, KubeletOptions::default()).await?;
    Ok(Some(Single {
        client,
        kubelets,
        cluster,
        env,
    }))
}

/// tephra's CRDs, the `default` Queue, and the `default` namespace ready for pods.
pub async fn prepare(client: &kube::Client) -> Result<(), Error> {
    objects::install_tephra_crds(client).await?;
    let queue = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "default"}, "spec": {"weight": 1, "reclaimable": true}});
    match objects::create(client, &queue).await {
        Ok(_) => {}
        Err(Error::Client(e)) if e.contains("already exists") => {}
        Err(e) => return Err(e),
    }
    namespace(client, "default").await
}

/// Creates `name` (when missing) and waits until its `default` service account exists.
pub async fn namespace(client: &kube::Client, name: &str) -> Result<(), Error> {
    let ns: Namespace = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name}}))
    .map_err(|e| Error::Client(e.to_string()))?;
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(Error::Client(format!("namespace {name}: {e}"))),
    }
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
    let deadline = Instant::now() + Duration::from_secs(60);
    while sas.get_opt("default").await.ok().flatten().is_none() {
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: format!("service account {name}/default"),
                log: String::new(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}
