//! A fleet whose cluster declares `topology.tiers` starts with Volcano's HyperNode CRD served in
//! that member and its racks and spines created there, as `kubectl get hypernodes` shows them;
//! a member without topology serves no HyperNodes at all (a 404, as a cluster without Volcano).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use kube::api::{Api, ListParams};
use tephra_api::HyperNode;
use tephra_devcluster::{DevCluster, Options, fleet};

#[tokio::test]
async fn a_members_topology_tiers_become_hypernodes_in_that_member_only() {
    let spec = fleet::parse(
        r#"
fleet:
  clusters:
    - name: racked
      nodePools: [{name: gpu, count: 6, capacity: {cpu: "8", nvidia.com/gpu: "8"}}]
      topology: {tiers: [{name: rack, size: 4}, {name: spine, size: 2}]}
    - name: flat
      nodePools: [{name: cpu, count: 2, capacity: {cpu: "8"}}]
"#,
        "topology.yaml",
    )
    .unwrap();
    let h = DevCluster::start(Options {
        members: spec.members,
        control_plane: true,
        ..Options::default()
    })
    .await
    .unwrap();
    let racked: Api<HyperNode> = Api::all(h.client("racked").await.unwrap());
    let mut got: Vec<(String, i64, usize)> = racked
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| {
            (
                n.metadata.name.unwrap(),
                n.spec.tier,
                n.spec.members.unwrap_or_default().len(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("rack-0".to_string(), 1, 4),
            ("rack-1".to_string(), 1, 2),
            ("spine-0".to_string(), 2, 2)
        ]
    );
    let flat: Api<HyperNode> = Api::all(h.client("flat").await.unwrap());
    let err = flat.list(&ListParams::default()).await.unwrap_err();
    assert!(
        err.to_string().contains("404") || err.to_string().contains("not found"),
        "{err}"
    );
}
