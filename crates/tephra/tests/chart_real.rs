//! The chart's roles under the real authorizer: the rendered objects installed on real
//! kube-apiservers (RBAC, `OwnerReferencesPermissionEnforcement`, service-account tokens, an
//! audit log of every request; `tephra-envtest`), the rendered Deployments run as processes
//! under their ServiceAccounts' real tokens, the same workloads as `tests/chart.rs` drives on
//! the devcluster, and then the audit logs read: a request of a chart ServiceAccount refused
//! (403) fails the test, naming the request and the server's message, and so does a grant no
//! request (or admission check of one) used.
//!
//! Needs Helm (as `tests/chart.rs`) and the real components (`bash .ci/real-components`);
//! without them these tests are skipped, except under `CI`, where they fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod chart_support;

use std::collections::BTreeMap;

use serde_json::json;

use chart_support::real::{self, Real};
use chart_support::roles::{Grants, WORKLOAD_API_LIST, WORKLOAD_API_STATUS, assert_roles_used};
use chart_support::scenarios::{
    self, Fleet, MEMBERS, one_cluster, one_cluster_args, serves_workload_api,
};
use chart_support::*;

/// One real cluster (default values, preemption on): both components run from their rendered
/// Deployments under their ServiceAccounts, through every workload of `scenarios::one_cluster`
/// (a stand-in provisioner provisions the volumes the scheduler asks for).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_cover_everything_the_components_do_on_one_real_cluster() {
    let Some(helm) = helm() else { return };
    let Some(real) =
        Real::start(&[("local", vec![node("node-a", "8"), node("node-b", "8")])]).await
    else {
        return;
    };
    let local = real.get("local");
    let dir = TempDir::new("real-one-cluster");
    let args = one_cluster_args(&dir);
    let docs = render(&helm, &args.iter().map(String::as_str).collect::<Vec<_>>());
    real::install(&local.client, &docs).await;
    let kubeconfigs = real::kubeconfigs(&local.cluster, &docs).await;
    let _running = run_deployments_as(&docs, &dir, &|sa| kubeconfigs[sa].clone());
    let provisioner = real::provisioner(local.client.clone());
    tephra_envtest::tier::namespace(&local.client, "team-a")
        .await
        .unwrap();
    let guard = real.guard();
    one_cluster(&local.client, &guard, Owners::Real).await;
    provisioner.abort();
    let used = audited(&real, &guard).await;
    let unused: &[_] = if serves_workload_api(&local.client).await {
        &[]
    } else {
        &[WORKLOAD_API_STATUS, WORKLOAD_API_LIST]
    };
    assert_roles_used(&docs, &used, unused);
}

/// A real fleet: a control plane and members `east` and `west`, each a real API server with
/// its controller manager; the member chart in each member, the control-plane chart with the
/// members' Cluster objects and Secrets (each member ServiceAccount's TokenRequest token), and
/// every workload of `scenarios::fleet` (stand-in provisioners in the members).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_cover_everything_the_components_do_in_a_real_fleet() {
    let Some(helm) = helm() else { return };
    let nodes = |m: &str| vec![node(&format!("{m}-a"), "8"), node(&format!("{m}-b"), "8")];
    let Some(real) = Real::start(&[
        ("control-plane", vec![]),
        (MEMBERS[0], nodes(MEMBERS[0])),
        (MEMBERS[1], nodes(MEMBERS[1])),
    ])
    .await
    else {
        return;
    };
    let dir = TempDir::new("real-fleet");
    let member_docs = member_docs(&helm, &dir);
    let account = member_account(&member_docs);
    let mut members = Vec::new();
    for m in MEMBERS {
        let c = real.get(m);
        real::install(&c.client, &member_docs).await;
        let token = c.cluster.service_account_token(NS, &account).await.unwrap();
        members.push(
            json!({"name": m, "apiEndpoint": c.cluster.url(), "token": token,
                            "caBundle": real.env.ca_pem(), "region": "us-east-1"}),
        );
    }
    let values = dir.write("fleet.json", &fleet_values_for(members));
    let docs = render(&helm, &["-f", values.to_str().unwrap()]);
    let cp = real.get("control-plane");
    real::install(&cp.client, &docs).await;
    let kubeconfigs = real::kubeconfigs(&cp.cluster, &docs).await;
    let _running = run_deployments_as(&docs, &dir, &|sa| kubeconfigs[sa].clone());
    let provisioners: Vec<_> = MEMBERS
        .iter()
        .map(|m| real::provisioner(real.get(m).client.clone()))
        .collect();
    tephra_envtest::tier::namespace(&cp.client, "team-a")
        .await
        .unwrap();
    let guard = real.guard();
    scenarios::fleet(&Fleet::Real(&real), &guard, Owners::Real).await;
    for p in provisioners {
        p.abort();
    }
    let used = audited(&real, &guard).await;
    let mut all = docs.clone();
    all.extend(member_docs);
    let unused: &[_] = if serves_workload_api(&real.get("control-plane").client).await {
        &[WORKLOAD_API_STATUS]
    } else {
        &[WORKLOAD_API_STATUS, WORKLOAD_API_LIST]
    };
    assert_roles_used(&all, &used, unused);
}

/// What every chart ServiceAccount did on every server, from the audit logs; panics on any
/// refused request.
async fn audited(real: &Real, guard: &Guard) -> BTreeMap<String, Grants> {
    let denied = guard.denied();
    assert!(
        denied.is_empty(),
        "requests the real API servers refused:\n{}",
        denied.join("\n")
    );
    let mut used: BTreeMap<String, Grants> = BTreeMap::new();
    for c in &real.clusters {
        for (user, set) in real::used_grants(&c.client, &c.audit).await {
            used.entry(user).or_default().extend(set);
        }
    }
    used
}
