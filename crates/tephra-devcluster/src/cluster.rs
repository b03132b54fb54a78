//! A devcluster: an optional control plane (CRDs, Queues, one Cluster object and token Secret
//! per member) and one API server per member cluster, each on its own loopback port with its
//! nodes and simulated kubelets; kubeconfigs for all of them; and the faults tests and
//! `tephra dev` inject.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::api::{ApiServer, ServerOptions, WriteOpts};
use crate::error::Error;
use crate::fleet::{FleetSpec, MemberSpec};
use crate::kubeconfig;
use crate::kubelet::{Kubelet, KubeletOptions};
use crate::resource::Builtin;
use crate::server::Server;
use crate::tls::Certs;

/// The name of the control plane's server and kubeconfig context.
pub const CONTROL_PLANE: &str = "control-plane";
/// The namespace holding the members' credentials on the control plane.
pub const CREDENTIALS_NAMESPACE: &str = "tephra-system";

/// What to start.
#[derive(Clone, Debug)]
pub struct Options {
    /// Member clusters, each with its nodes.
    pub members: Vec<MemberSpec>,
    /// Whether to start a control plane.
    pub control_plane: bool,
    /// Install tephra's CRDs: on the control plane, or on every member when there is none.
    pub install_crds: bool,
    /// Queues to create where the CRDs go.
    pub queues: Vec<Value>,
    /// Simulated kubelets (none: pods are never run).
    pub kubelet: Option<KubeletOptions>,
    /// API server settings.
    pub server: ServerOptions,
    /// Ports from this one up (control plane first); none: free ports.
    pub base_port: Option<u16>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            members: Vec::new(),
            control_plane: false,
            install_crds: true,
            queues: Vec::new(),
            kubelet: Some(KubeletOptions::default()),
            server: ServerOptions::default(),
            base_port: None,
        }
    }
}

impl Options {
    /// One member named `local` with no nodes and the CRDs installed: the quick server tests
    /// start.
    pub fn single() -> Self {
        Self {
            members: vec![MemberSpec {
                name: "local".into(),
                ..MemberSpec::default()
            }],
            ..Self::default()
        }
    }

    /// A control plane and the fleet's members.
    pub fn fleet(fleet: FleetSpec) -> Self {
        let mut kubelet = KubeletOptions::default();
        if let Some(d) = fleet.start_delay {
            kubelet.start_delay = d;
        }
        Self {
            members: fleet.members,
            control_plane: true,
            queues: fleet.queues,
            kubelet: Some(kubelet),
            ..Self::default()
        }
    }
}

struct Member {
    server: Arc<Server>,
    kubelet: Option<Arc<Kubelet>>,
    /// The PV controller and provisioner, and the ResourceClaim controller.
    controllers: Vec<crate::controller::Controller>,
}

/// Starts devclusters.
pub struct DevCluster;

/// A running devcluster.
pub struct Handle {
    control_plane: Option<Arc<Server>>,
    /// The control plane's ResourceClaim controller (kube-controller-manager's part a real
    /// control plane runs too: claims for declared pods' templates).
    control_controllers: Vec<crate::controller::Controller>,
    members: Vec<Member>,
    /// The CA that signed every server's certificate and the kubelet client certificate.
    ca_der: Vec<u8>,
}

fn setup(what: impl Into<String>) -> impl FnOnce(crate::status::ApiError) -> Error {
    let what = what.into();
    move |source| Error::Setup { what, source }
}

/// tephra's CRDs as JSON, generated once per process.
fn tephra_crds() -> Result<&'static [(&'static str, Value)], Error> {
    static CRDS: std::sync::OnceLock<Result<Vec<(&'static str, Value)>, String>> =
        std::sync::OnceLock::new();
    CRDS.get_or_init(|| {
        tephra_api::crds()
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|(file, crd)| {
                serde_json::to_value(&crd)
                    .map(|v| (file, v))
                    .map_err(|e| e.to_string())
            })
            .collect()
    })
    .as_deref()
    .map_err(|e| Error::Fleet(e.clone()))
}

/// Installs tephra's CRDs on a server (those it serves already stay as they are).
pub fn install_crds(api: &ApiServer) -> Result<(), Error> {
    let def = api.builtin(Builtin::Crd);
    for (file, crd) in tephra_crds()? {
        match api.create(&def, None, crd.clone(), &WriteOpts::default()) {
            Err(e) if e.code == 409 => {}
            other => {
                other.map_err(setup(*file))?;
            }
        }
    }
    Ok(())
}

/// Installs one of tephra's CRDs (by its file name in `crds/`) on a server.
pub fn install_crd(api: &ApiServer, file: &str) -> Result<(), Error> {
    let def = api.builtin(Builtin::Crd);
    let crds = tephra_crds()?;
    let (name, crd) = crds
        .iter()
        .find(|(f, _)| *f == file)
        .ok_or_else(|| Error::Fleet(format!("no CRD {file}")))?;
    api.create(&def, None, crd.clone(), &WriteOpts::default())
        .map_err(setup(*name))?;
    Ok(())
}

/// Creates objects (queues, ...) on a server, each through its resource's own rules.
pub fn create_objects(api: &ApiServer, objects: &[Value]) -> Result<(), Error> {
    for obj in objects {
        let api_version = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
        let def = api
            .registry()
            .by_kind(api_version, kind)
            .ok_or_else(|| Error::Fleet(format!("{api_version} {kind} is not served")))?;
        let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str);
        api.create(&def, ns, obj.clone(), &WriteOpts::default())
            .map_err(setup(format!("{kind} {}", crate::admit::name_of(obj))))?;
    }
    Ok(())
}

impl DevCluster {
    /// Starts the servers, registers the nodes, installs CRDs and queues, and (with a control
    /// plane) the members' Cluster objects and token Secrets.
    pub async fn start(options: Options) -> Result<Handle, Error> {
        let certs = Certs::generate()?;
        let addr = |i: u16| {
            let port = options.base_port.map_or(0, |b| b.saturating_add(i));
            SocketAddr::from((Ipv4Addr::LOCALHOST, port))
        };
        let control_plane = if options.control_plane {
            let api = ApiServer::new(CONTROL_PLANE, options.server.clone());
            Some(Server::start(api, addr(0), &certs, kubeconfig::token())?)
        } else {
            None
        };
        let mut members = Vec::new();
        for (i, m) in options.members.iter().enumerate() {
            let api = ApiServer::new(&m.name, options.server.clone());
            let server =
                Server::start(api.clone(), addr(i as u16 + 1), &certs, kubeconfig::token())?;
            let kubelet = options
                .kubelet
                .clone()
                .map(|k| Kubelet::start(api.clone(), k));
            if let Some(k) = &kubelet {
                for n in &m.nodes {
                    k.register(n).map_err(setup(format!("node {}", n.name)))?;
                }
            }
            // A member whose fleet declares HyperNodes serves their CRD, as a member with
            // Volcano installed does.
            if m.objects.iter().any(|o| o["kind"] == "HyperNode") {
                install_crd(&api, "topology.volcano.sh_hypernodes.yaml")?;
            }
            create_objects(&api, &m.objects)?;
            let controllers = vec![
                crate::volumes::start(api.clone()),
                crate::claims::start(api.clone()),
                crate::podgroup_protection::start(api.clone()),
            ];
            members.push(Member {
                server,
                kubelet,
                controllers,
            });
        }
        let crd_targets: Vec<&Arc<ApiServer>> = match &control_plane {
            Some(cp) => vec![&cp.api],
            None => members.iter().map(|m| &m.server.api).collect(),
        };
        if options.install_crds {
            for api in crd_targets {
                install_crds(api)?;
                create_objects(api, &options.queues)?;
            }
        }
        if let Some(cp) = &control_plane {
            register_members(cp, &members, &options.members, options.install_crds)?;
        }
        let control_controllers = control_plane
            .iter()
            .flat_map(|cp| {
                [
                    crate::claims::start(cp.api.clone()),
                    crate::podgroup_protection::start(cp.api.clone()),
                ]
            })
            .collect();
        Ok(Handle {
            control_plane,
            control_controllers,
            members,
            ca_der: certs.ca_der(),
        })
    }
}

fn register_members(
    cp: &Server,
    members: &[Member],
    specs: &[MemberSpec],
    clusters: bool,
) -> Result<(), Error> {
    let api = &cp.api;
    create_objects(
        api,
        &[
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CREDENTIALS_NAMESPACE}}),
        ],
    )?;
    for (m, spec) in members.iter().zip(specs) {
        let secret = format!("{}-credentials", spec.name);
        create_objects(
            api,
            &[json!({"apiVersion": "v1", "kind": "Secret",
                     "metadata": {"name": secret, "namespace": CREDENTIALS_NAMESPACE},
                     "type": "Opaque",
                     "data": {"token": STANDARD.encode(m.server.token()),
                              "caBundle": STANDARD.encode(m.server.entry().ca_pem)}})],
        )?;
        if !clusters {
            continue;
        }
        let mut cluster_spec = json!({
            "syncMode": "Push",
            "apiEndpoint": m.server.url(),
            "secretRef": {"namespace": CREDENTIALS_NAMESPACE, "name": secret},
            "bindingMode": "Direct",
        });
        if let Some(p) = &spec.provider {
            cluster_spec["provider"] = json!(p);
        }
        if let Some(r) = &spec.region {
            cluster_spec["region"] = json!(r);
        }
        if let Some(z) = &spec.zone {
            cluster_spec["zones"] = json!([z]);
        }
        if !spec.taints.is_empty() {
            cluster_spec["taints"] = json!(spec.taints);
        }
        if !spec.price.is_empty() {
            cluster_spec["price"] = spec
                .price
                .iter()
                .map(|(k, v)| (k.clone(), json!(format!("{v}"))))
                .collect();
        }
        let mut meta = json!({"name": spec.name});
        if !spec.labels.is_empty() {
            meta["labels"] = json!(spec.labels);
        }
        create_objects(
            api,
            &[
                json!({"apiVersion": "cluster.tephra.io/v1alpha1", "kind": "Cluster",
                     "metadata": meta, "spec": cluster_spec}),
            ],
        )?;
    }
    Ok(())
}

impl Handle {
    fn member(&self, name: &str) -> Result<&Member, Error> {
        self.members
            .iter()
            .find(|m| m.server.api.name == name)
            .ok_or_else(|| Error::Unknown {
                what: "member",
                name: name.to_string(),
            })
    }

    /// The control plane, if started.
    pub fn control_plane(&self) -> Option<&Arc<Server>> {
        self.control_plane.as_ref()
    }

    /// A server by name (a member's, or `control-plane`).
    pub fn server(&self, name: &str) -> Option<&Arc<Server>> {
        if name == CONTROL_PLANE {
            return self.control_plane.as_ref();
        }
        self.member(name).ok().map(|m| &m.server)
    }

    /// The members' servers, in fleet order.
    pub fn members(&self) -> impl Iterator<Item = &Arc<Server>> {
        self.members.iter().map(|m| &m.server)
    }

    /// Every server: the control plane first.
    pub fn servers(&self) -> impl Iterator<Item = &Arc<Server>> {
        self.control_plane.iter().chain(self.members())
    }

    /// The CA (DER) that signed the servers' certificates and the client certificate they
    /// present to a kubelet served elsewhere.
    pub fn ca_der(&self) -> &[u8] {
        &self.ca_der
    }

    /// A kubeconfig with a context per server; the current context is the control plane (or
    /// the first member).
    pub fn kubeconfig_yaml(&self) -> String {
        let entries: Vec<_> = self.servers().map(|s| s.entry()).collect();
        let current = entries.first().map(|e| e.name.clone()).unwrap_or_default();
        kubeconfig::yaml(&entries, &current)
    }

    /// The kubeconfig of every server, for kube-rs.
    pub fn kubeconfig(&self) -> Result<kube::config::Kubeconfig, Error> {
        kubeconfig::parse(&self.kubeconfig_yaml())
    }

    /// A kubeconfig for one server only.
    pub fn kubeconfig_for(&self, name: &str) -> Result<String, Error> {
        let server = self.server(name).ok_or_else(|| Error::Unknown {
            what: "member",
            name: name.to_string(),
        })?;
        Ok(kubeconfig::yaml(&[server.entry()], name))
    }

    /// A kubeconfig for one server as a service account (RBAC applies).
    pub fn service_account_kubeconfig(
        &self,
        server: &str,
        namespace: &str,
        name: &str,
    ) -> Result<String, Error> {
        let s = self.server(server).ok_or_else(|| Error::Unknown {
            what: "member",
            name: server.to_string(),
        })?;
        Ok(kubeconfig::yaml(
            &[s.service_account_entry(namespace, name)],
            server,
        ))
    }

    /// A kube-rs `Config` for one server.
    pub async fn config(&self, name: &str) -> Result<kube::Config, Error> {
        kubeconfig::config(&self.kubeconfig_for(name)?, name).await
    }

    /// A kube-rs `Client` for one server.
    pub async fn client(&self, name: &str) -> Result<kube::Client, Error> {
        let config = self.config(name).await?;
        kube::Client::try_from(config).map_err(|e| Error::Kubeconfig(e.to_string()))
    }

    /// Fault: the member stops answering (connection refused).
    pub async fn stop_member(&self, name: &str) -> Result<(), Error> {
        self.member(name)?.server.stop().await;
        Ok(())
    }

    /// Fault: the member answers every request with `code` (500, 503, ...).
    pub fn fail_member_with(&self, name: &str, code: u16) -> Result<(), Error> {
        self.member(name)?.server.fail_with(code);
        Ok(())
    }

    /// The member is rebuilt with new credentials: its old token and its service accounts'
    /// tokens get 401 from now on and its open watches are closed. Returns the new token, which the member's credentials Secret on
    /// the control plane does not have until someone writes it there.
    pub fn rotate_member_token(&self, name: &str) -> Result<String, Error> {
        Ok(self.member(name)?.server.rotate_token())
    }

    /// Undoes [`Handle::stop_member`] and [`Handle::fail_member_with`].
    pub async fn restore_member(&self, name: &str) -> Result<(), Error> {
        let m = self.member(name)?;
        m.server.clear_failure();
        m.server.resume().await
    }

    fn kubelet(&self, member: &str) -> Result<&Arc<Kubelet>, Error> {
        self.member(member)?.kubelet.as_ref().ok_or(Error::Unknown {
            what: "kubelet of member",
            name: member.to_string(),
        })
    }

    /// Fault: a node goes NotReady.
    pub fn node_not_ready(&self, member: &str, node: &str) -> Result<(), Error> {
        self.kubelet(member)?
            .set_ready(node, false)
            .map_err(setup(format!("node {node}")))
    }

    /// Undoes [`Handle::node_not_ready`].
    pub fn node_ready(&self, member: &str, node: &str) -> Result<(), Error> {
        self.kubelet(member)?
            .set_ready(node, true)
            .map_err(setup(format!("node {node}")))
    }

    /// Fault: a node is deleted (its pods fail with `NodeLost` and are removed).
    pub fn delete_node(&self, member: &str, node: &str) -> Result<(), Error> {
        let api = &self.member(member)?.server.api;
        let def = api.builtin(Builtin::Node);
        api.delete(
            &def,
            &(String::new(), node.to_string()),
            &Default::default(),
        )
        .map_err(setup(format!("node {node}")))?;
        Ok(())
    }

    /// Stops every server, kubelet and volume controller.
    pub fn shutdown(&self) {
        for m in &self.members {
            if let Some(k) = &m.kubelet {
                k.shutdown();
            }
            for c in &m.controllers {
                c.shutdown();
            }
            m.server.stop_now();
        }
        if let Some(cp) = &self.control_plane {
            cp.stop_now();
        }
        for c in &self.control_controllers {
            c.shutdown();
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shutdown();
    }
}
