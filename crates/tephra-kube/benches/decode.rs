//! What decoding a pod's watch event costs the watcher: k8s-openapi's `Pod` against
//! `tephra_kube::slim::Watched<Pod>` (the same object, its managedFields skipped unread), on a
//! pod as a client created it (one managedFields entry) and on a running pod (its kubelet's
//! status entry too), both written by hand in the shape kube-apiserver serves. Measures events decoded per second.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kube::api::WatchEvent;
use serde_json::{Value, json};
use tephra_kube::slim::Watched;

/// A gang member as kube-apiserver serves it after a client created it: defaults filled in and
/// the creating client's managedFields entry.
fn created() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "p-1234", "namespace": "bench-tephra-1", "uid": "0b5d3d0e-9c1e-4a52-8d0e-7d3b3c1a2f10",
        "resourceVersion": "123456", "creationTimestamp": "2026-12-01T10:00:00Z",
        "labels": {"app": "bench", "volcano.sh/job-name": "j-154"},
        "annotations": {"scheduling.k8s.io/group-name": "g154"},
        "managedFields": [{"manager": "e2e_real", "operation": "Update", "apiVersion": "v1",
            "time": "2026-12-01T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {
            "f:metadata": {"f:annotations": {".": {}, "f:scheduling.k8s.io/group-name": {}},
                "f:labels": {".": {}, "f:app": {}, "f:volcano.sh/job-name": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {},
                "f:imagePullPolicy": {}, "f:name": {}, "f:resources": {".": {},
                "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}},
                "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}}},
                "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {},
                "f:schedulerName": {}, "f:securityContext": {},
                "f:terminationGracePeriodSeconds": {}}}}]},
    "spec": {"containers": [{"name": "c", "image": "busybox", "imagePullPolicy": "Always",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File"}],
        "dnsPolicy": "ClusterFirst", "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0, "restartPolicy": "Always", "schedulerName": "volcano",
        "securityContext": {}, "serviceAccountName": "default", "serviceAccount": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists",
                "tolerationSeconds": 300},
            {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists",
                "tolerationSeconds": 300}]},
    "status": {"phase": "Pending", "qosClass": "Burstable"}})
}

/// The same pod bound and running: its kubelet's status entry and the status it wrote.
fn running() -> Value {
    let mut p = created();
    p["spec"]["nodeName"] = json!("node-17");
    p["metadata"]["managedFields"]
        .as_array_mut()
        .unwrap()
        .push(json!({"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
        "time": "2026-12-01T10:00:03Z", "fieldsType": "FieldsV1", "subresource": "status",
        "fieldsV1": {"f:status": {"f:conditions": {
            "k:{\"type\":\"ContainersReady\"}": {".": {}, "f:lastProbeTime": {},
                "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}},
            "k:{\"type\":\"Initialized\"}": {".": {}, "f:lastProbeTime": {},
                "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}},
            "k:{\"type\":\"PodReadyToStartContainers\"}": {".": {}, "f:lastProbeTime": {},
                "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}},
            "k:{\"type\":\"Ready\"}": {".": {}, "f:lastProbeTime": {},
                "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}},
            "f:containerStatuses": {}, "f:hostIP": {}, "f:hostIPs": {}, "f:phase": {},
            "f:podIP": {}, "f:podIPs": {".": {}, "k:{\"ip\":\"10.244.1.7\"}": {".": {}, "f:ip": {}}},
            "f:startTime": {}}}}));
    let cond = |t: &str| {
        json!({"type": t, "status": "True", "lastProbeTime": null,
        "lastTransitionTime": "2026-12-01T10:00:03Z"})
    };
    p["status"] = json!({"phase": "Running", "qosClass": "Burstable", "hostIP": "172.18.0.3",
        "hostIPs": [{"ip": "172.18.0.3"}], "podIP": "10.244.1.7", "podIPs": [{"ip": "10.244.1.7"}],
        "startTime": "2026-12-01T10:00:01Z",
        "conditions": [cond("PodReadyToStartContainers"), cond("Initialized"), cond("Ready"),
            cond("ContainersReady"), cond("PodScheduled")],
        "containerStatuses": [{"name": "c", "image": "docker.io/library/busybox:latest",
            "imageID": "docker.io/library/busybox@sha256:0123", "containerID": "containerd://abc",
            "ready": true, "restartCount": 0, "started": true,
            "state": {"running": {"startedAt": "2026-12-01T10:00:02Z"}}}]});
    p
}

fn decode(c: &mut Criterion) {
    for (name, pod) in [("created", created()), ("running", running())] {
        let line = json!({"type": "MODIFIED", "object": pod}).to_string();
        let mut g = c.benchmark_group(format!("pod watch event, {name}"));
        g.throughput(Throughput::Elements(1));
        g.bench_function("k8s-openapi Pod", |b| {
            b.iter(|| black_box(serde_json::from_str::<WatchEvent<Pod>>(black_box(&line))).unwrap())
        });
        g.bench_function("Watched<Pod>", |b| {
            b.iter(|| {
                black_box(serde_json::from_str::<WatchEvent<Watched<Pod>>>(black_box(
                    &line,
                )))
                .unwrap()
            })
        });
        g.finish();
    }
}

criterion_group!(benches, decode);
criterion_main!(benches);
