//! What the real-cluster tier's tests start from: one real cluster (API server and controller
//! manager) with tephra's CRDs, a `default` Queue, simulated kubelets for the given nodes and
//! an admin client; and namespaces made ready for pods (the controller manager gives each its
//! `default` service account, without which the ServiceAccount admission plugin refuses
//! pods). A [`Fleet`] is a control plane and member clusters on one etcd; its [`Member`]s, and
//! finding one by name, serve [`karmada`](crate::karmada)'s fleet too. The kube-scheduler
//! configuration the project ships for members that call tephra's extender is read here for
//! the tests that start a real kube-scheduler with it.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

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

/// The name of the control plane's cluster in a [`Fleet`].
pub const CONTROL_PLANE: &str = "control-plane";
/// Where a fleet's member credentials live on the control plane.
pub const CREDENTIALS_NAMESPACE: &str = "tephra-system";
/// The service account each member gives the fleet (bound to `cluster-admin`).
const FLEET_ACCOUNT: &str = "tephra-fleet";

/// A member of a [`Fleet`].
pub struct Member {
    /// Its name (the Cluster object's).
    pub name: String,
    /// An admin client.
    pub client: kube::Client,
    /// Its nodes' kubelets.
    pub kubelets: Kubelets,
    /// The member's API server.
    pub cluster: Cluster,
}

/// The member called `name` among a fleet's `members` (a [`Fleet`]'s or a
/// [`KarmadaFleet`](crate::KarmadaFleet)'s).
pub(crate) fn find_member<'a>(members: &'a [Member], name: &str) -> Result<&'a Member, Error> {
    members
        .iter()
        .find(|m| m.name == name)
        .ok_or_else(|| Error::Client(format!("no member {name}")))
}

/// An admin client of `name` in a fleet: the control plane's (`control_plane`, its name and
/// client) when `name` is its name, else the member's.
pub(crate) fn client_of(
    control_plane: (&str, &kube::Client),
    members: &[Member],
    name: &str,
) -> Result<kube::Client, Error> {
    let (control_plane_name, client) = control_plane;
    if name == control_plane_name {
        return Ok(client.clone());
    }
    Ok(find_member(members, name)?.client.clone())
}

/// A control plane (tephra's CRDs, a `default` Queue, one Cluster object and token Secret
/// per member) and member clusters with their nodes, each a real API server with its
/// controller manager, all on one etcd.
pub struct Fleet {
    /// An admin client of the control plane.
    pub control_plane_client: kube::Client,
    /// The members.
    pub members: Vec<Member>,
    /// The control plane.
    pub control_plane: Cluster,
    /// The environment (dropped last).
    pub env: Env,
}

/// Starts a fleet of `release`: the control plane and one member per `(name, nodes)`;
/// `None` (after saying why) when the components are not built and this is not CI.
pub async fn fleet(
    release: &Release,
    members: &[(&str, Vec<NodeSpec>)],
) -> Result<Option<Fleet>, Error> {
    fleet_with(release, members, ClusterOptions::default()).await
}

/// [`fleet`], each cluster started with `options` (feature gates, API versions) and its
/// controller manager.
pub async fn fleet_with(
    release: &Release,
    members: &[(&str, Vec<NodeSpec>)],
    options: ClusterOptions,
) -> Result<Option<Fleet>, Error> {
    let Some(bins) = require(release) else {
        return Ok(None);
    };
    let env = Env::start(bins).await?;
    let with_kcm = || ClusterOptions {
        controller_manager: true,
        ..options.clone()
    };
    let mut names = vec![CONTROL_PLANE];
    names.extend(members.iter().map(|(n, _)| *n));
    let clusters =
        futures::future::try_join_all(names.iter().map(|n| env.cluster(n, with_kcm()))).await?;
    let mut clusters = clusters.into_iter();
    let control_plane = clusters
        .next()
        .ok_or_else(|| Error::Client("no control plane".into()))?;
    let cp = control_plane.client().await?;
    prepare(&cp).await?;
    namespace(&cp, CREDENTIALS_NAMESPACE).await?;
    let mut out = Vec::new();
    for ((name, nodes), cluster) in members.iter().zip(clusters) {
        let client = cluster.client().await?;
        let kubelets = Kubelets::start(client.clone(), nodes, KubeletOptions::default()).await?;
        namespace(&client, "default").await?;
        let member = Member {
            name: name.to_string(),
            client,
            kubelets,
            cluster,
        };
        let token = member_token(&member, false).await?;
        register(&cp, &member, &token).await?;
        out.push(member);
    }
    Ok(Some(Fleet {
        control_plane_client: cp,
        members: out,
        control_plane,
        env,
    }))
}

/// A token for the fleet's account in `member` (bound to `cluster-admin`); with `renew`, the
/// account is made anew first, so every token issued before is refused from then on.
async fn member_token(member: &Member, renew: bool) -> Result<String, Error> {
    let c = &member.client;
    if renew {
        let sas: Api<ServiceAccount> = Api::namespaced(c.clone(), CREDENTIALS_NAMESPACE);
        let _ = sas
            .delete(FLEET_ACCOUNT, &kube::api::DeleteParams::default())
            .await;
        let deadline = Instant::now() + Duration::from_secs(30);
        while sas.get_opt(FLEET_ACCOUNT).await.ok().flatten().is_some() {
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: format!("{} deleted in {}", FLEET_ACCOUNT, member.name),
                    log: String::new(),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let token = member
        .cluster
        .service_account_token(CREDENTIALS_NAMESPACE, FLEET_ACCOUNT)
        .await?;
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding", "metadata": {"name": FLEET_ACCOUNT},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": FLEET_ACCOUNT,
            "namespace": CREDENTIALS_NAMESPACE}]});
    match objects::create(c, &binding).await {
        Ok(_) => {}
        Err(Error::Client(e)) if e.contains("already exists") => {}
        Err(e) => return Err(e),
    }
    Ok(token)
}

/// The member's token Secret and Cluster object on the control plane.
async fn register(cp: &kube::Client, member: &Member, token: &str) -> Result<(), Error> {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    let secret = format!("{}-credentials", member.name);
    objects::create(
        cp,
        &json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret, "namespace": CREDENTIALS_NAMESPACE},
            "type": "Opaque",
            "data": {"token": STANDARD.encode(token),
                "caBundle": STANDARD.encode(member.cluster.env().ca_pem())}}),
    )
    .await?;
    objects::create(
        cp,
        &json!({"apiVersion": "cluster.tephra.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": member.name},
            "spec": {"syncMode": "Push", "apiEndpoint": member.cluster.url(),
                "secretRef": {"namespace": CREDENTIALS_NAMESPACE, "name": secret},
                "bindingMode": "Direct"}}),
    )
    .await?;
    Ok(())
}

impl Fleet {
    /// A member by name.
    pub fn member(&self, name: &str) -> Result<&Member, Error> {
        find_member(&self.members, name)
    }

    /// An admin client of `name` (a member, or [`CONTROL_PLANE`]).
    pub fn client(&self, name: &str) -> Result<kube::Client, Error> {
        client_of(
            (CONTROL_PLANE, &self.control_plane_client),
            &self.members,
            name,
        )
    }

    /// Stops a member's API server: its port refuses connections.
    pub fn stop_member(&self, name: &str) -> Result<(), Error> {
        self.member(name)?.cluster.stop_apiserver();
        Ok(())
    }

    /// Starts a stopped member's API server again, on its data.
    pub async fn restore_member(&self, name: &str) -> Result<(), Error> {
        self.member(name)?.cluster.start_apiserver().await
    }

    /// Makes the member's fleet account anew, so that the token in its Secret is refused, and
    /// returns a new token (which the caller writes into the Secret, as an operator would).
    pub async fn rotate_member_token(&self, name: &str) -> Result<String, Error> {
        member_token(self.member(name)?, true).await
    }
}

/// The kube-scheduler configuration the project ships for a member that keeps its own
/// scheduler (`examples/kube-scheduler-extender.yaml`), as is but for the extender's address,
/// `url`.
pub fn shipped_extender_config(url: &str) -> Result<Value, Error> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/kube-scheduler-extender.yaml"
    );
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        what: format!("reading {path}"),
        source,
    })?;
    let bad = |e: String| Error::Client(format!("{path}: {e}"));
    let cm: Value = serde_saphyr::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let inner = cm["data"]["kube-scheduler-config.yaml"]
        .as_str()
        .ok_or_else(|| bad("no data.kube-scheduler-config.yaml".into()))?;
    let mut config: Value = serde_saphyr::from_str(inner).map_err(|e| bad(e.to_string()))?;
    config["extenders"][0]["urlPrefix"] = json!(url);
    Ok(config)
}
