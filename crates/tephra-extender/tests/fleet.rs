//! A member with `bindingMode: Extender` in a devcluster fleet: tephra's scheduler places a
//! gang there and creates its pods unbound, with their planned nodes and the gang's minimum;
//! the member's "kube-scheduler" (the tests' stand-in, calling the extender as kube-scheduler
//! does) binds them through the extender, each on its planned node, and they run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use tephra_api::PodGroup;

use common::fleet::{PROFILE, declare_gang, extender_fleet, fleet_scheduler, kube_scheduler};

#[tokio::test]
async fn a_gang_placed_in_an_extender_member_is_bound_by_its_kube_scheduler_on_the_plan() {
    let (_dev, cp, east) = extender_fleet().await;
    let ext =
        tephra_extender::Extender::new(east.clone(), &tephra_extender::Options::default()).unwrap();
    tephra_extender::watch::start(ext.clone(), east.clone());
    let (addr, _) = tephra_extender::serve(ext, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let _driver = kube_scheduler(east.clone(), addr);
    let sched = fleet_scheduler(&cp).await;
    // A gang of three one-CPU pods on two-CPU nodes: it must span both nodes.
    declare_gang(&cp, 3).await;

    let pods: Api<Pod> = Api::namespaced(east.clone(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let placed = loop {
        let list = pods.list(&ListParams::default()).await.unwrap().items;
        let running: Vec<&Pod> = list
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .collect();
        if running.len() == 3 {
            break list;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the gang never ran: {list:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for p in &placed {
        let a = p.metadata.annotations.clone().unwrap_or_default();
        let spec = p.spec.clone().unwrap_or_default();
        assert_eq!(spec.scheduler_name.as_deref(), Some(PROFILE));
        assert_eq!(
            a.get("tephra.io/gang-min-member").map(String::as_str),
            Some("3")
        );
        assert_eq!(
            spec.node_name.as_ref(),
            a.get("tephra.io/planned-node"),
            "bound on the plan"
        );
    }
    let nodes: BTreeSet<String> = placed
        .iter()
        .filter_map(|p| p.spec.clone()?.node_name)
        .collect();
    assert_eq!(nodes.len(), 2, "the plan spans both nodes: {nodes:?}");
    sched.stop().await;
}

#[tokio::test]
async fn a_declared_pod_is_not_scheduled_until_its_member_copy_has_a_node() {
    let (_dev, cp, east) = extender_fleet().await;
    // No kube-scheduler runs in east: the copies are created there and stay unbound.
    let sched = fleet_scheduler(&cp).await;
    declare_gang(&cp, 3).await;
    let copies: Api<Pod> = Api::namespaced(east.clone(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while copies
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len()
        < 3
    {
        assert!(tokio::time::Instant::now() < deadline, "no copies in east");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Time for any status the copies would bring back to the control plane.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let declared: Api<Pod> = Api::namespaced(cp.clone(), "default");
    for i in 0..3 {
        let p = declared.get(&format!("llm-{i}")).await.unwrap();
        let scheduled = p
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "PodScheduled")
            .expect("a PodScheduled condition");
        assert_eq!(scheduled.status, "False", "{scheduled:?}");
        assert_eq!(scheduled.reason.as_deref(), Some("WaitingInMember"));
        let message = scheduled.message.unwrap_or_default();
        assert!(message.contains("east"), "{message}");
        assert!(message.contains(PROFILE), "{message}");
    }
    let pg = Api::<PodGroup>::namespaced(cp.clone(), "default")
        .get("llm")
        .await
        .unwrap();
    // Volcano's phase counts pods allocated to nodes, but none runs.
    let status = pg.status.unwrap_or_default();
    assert_eq!(status.running, 0, "{status:?}");
    sched.stop().await;
}
