//! The random lifecycle test's components under the chart's roles: the chart's RBAC objects
//! rendered with Helm and installed on the control plane and in each member, the members'
//! credentials pointed at the member chart's ServiceAccount, and the components' clients.

use super::*;

/// The control plane's clients of the scheduler and the controllers, and the ServiceAccount
/// the members' credentials name (`None`: the members' administrator).
pub(crate) struct Identities {
    pub(crate) scheduler: kube::Client,
    pub(crate) controllers: kube::Client,
    pub(crate) member_account: Option<String>,
}

/// The chart's RBAC objects rendered for a fleet's control plane and for a member, once.
fn chart_rbac() -> Option<&'static (Vec<serde_json::Value>, Vec<serde_json::Value>)> {
    static RBAC: std::sync::OnceLock<Option<(Vec<serde_json::Value>, Vec<serde_json::Value>)>> =
        std::sync::OnceLock::new();
    RBAC.get_or_init(|| {
        let helm = helm::helm()?;
        let rbac = |docs: Vec<serde_json::Value>| -> Vec<serde_json::Value> {
            const KINDS: [&str; 6] = [
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
                "Deployment",
            ];
            docs.into_iter()
                .filter(|d| KINDS.iter().any(|k| d["kind"] == *k))
                .collect()
        };
        let cp = rbac(helm::render(
            &helm,
            &["--skip-crds", "--set", "scheduler.members=clusters"],
        ));
        let values = std::env::temp_dir().join(format!(
            "tephra-lifecycle-member-{}.json",
            std::process::id()
        ));
        std::fs::write(&values, helm::member_values().to_string()).unwrap();
        let member = rbac(helm::render(
            &helm,
            &["--skip-crds", "-f", values.to_str().unwrap()],
        ));
        let _ = std::fs::remove_file(&values);
        Some((cp, member))
    })
    .as_ref()
}

/// The ServiceAccount of the rendered Deployment of `component`.
fn account_of(docs: &[serde_json::Value], component: &str) -> String {
    helm::of_kind(docs, "Deployment")
        .into_iter()
        .find(|d| d["metadata"]["labels"]["app.kubernetes.io/component"] == component)
        .and_then(|d| d["spec"]["template"]["spec"]["serviceAccountName"].as_str())
        .unwrap_or_else(|| panic!("the chart renders no {component} Deployment"))
        .to_string()
}

/// Installs the chart's roles on the control plane and in each member, points each member's
/// credentials at the member chart's ServiceAccount, and returns the components' clients.
pub(crate) async fn under_chart_roles(
    dev: &tephra_devcluster::Handle,
    cp: &kube::Client,
) -> Identities {
    let Some((cp_docs, member_docs)) = chart_rbac() else {
        return Identities {
            scheduler: cp.clone(),
            controllers: cp.clone(),
            member_account: None,
        };
    };
    let installed = |docs: &[serde_json::Value]| -> Vec<serde_json::Value> {
        docs.iter()
            .filter(|d| d["kind"] != "Deployment")
            .cloned()
            .collect()
    };
    helm::install(cp, &installed(cp_docs)).await;
    let account = helm::of_kind(member_docs, "ServiceAccount")[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    for m in MEMBERS {
        helm::install(&dev.client(m).await.unwrap(), &installed(member_docs)).await;
        let token = dev
            .server(m)
            .unwrap()
            .service_account_entry(helm::NS, &account)
            .token;
        set_member_token(cp, m, &token).await;
    }
    let client = |component: &str| {
        let yaml = dev
            .service_account_kubeconfig("control-plane", helm::NS, &account_of(cp_docs, component))
            .unwrap();
        async move {
            let config = tephra_devcluster::kubeconfig::config(&yaml, "control-plane")
                .await
                .unwrap();
            kube::Client::try_from(config).unwrap()
        }
    };
    Identities {
        scheduler: client("scheduler").await,
        controllers: client("controller-manager").await,
        member_account: Some(account),
    }
}

/// Writes `token` into member `m`'s credentials Secret on the control plane.
pub(crate) async fn set_member_token(cp: &kube::Client, m: &str, token: &str) {
    let secrets: Api<Secret> = Api::namespaced(cp.clone(), helm::NS);
    secrets
        .patch(
            &format!("{m}-credentials"),
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"token":
                base64::engine::general_purpose::STANDARD.encode(token)}})),
        )
        .await
        .unwrap();
}
