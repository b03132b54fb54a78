//! The seeded generator: from a sequence number, the requests the sequence sends. Each
//! sequence works in a namespace of its own (`diff-<seq>`) and names its cluster-scoped
//! objects after it, so many sequences share one server. Objects come from a small pool of
//! names per kind, so creates, reads, writes and deletes meet objects that exist, that do not,
//! and that were just changed; what an answer holds (a resourceVersion, a uid, a generated
//! name) reaches later requests through placeholders each side resolves from its own answers.

use std::collections::VecDeque;

use http::Method;
use serde_json::{Value, json};

use crate::exec::{Call, FromMemory, Step, Who};
use crate::prng::Rng;

/// A kind the generator sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    pub plural: &'static str,
    pub kind: &'static str,
    pub api_version: &'static str,
    pub namespaced: bool,
    pub custom: bool,
    pub short: &'static str,
}

const fn k(
    plural: &'static str,
    kind: &'static str,
    api_version: &'static str,
    namespaced: bool,
    custom: bool,
    short: &'static str,
) -> Kind {
    Kind {
        plural,
        kind,
        api_version,
        namespaced,
        custom,
        short,
    }
}

pub const CONFIGMAPS: Kind = k("configmaps", "ConfigMap", "v1", true, false, "cm");
pub const SECRETS: Kind = k("secrets", "Secret", "v1", true, false, "sec");
pub const PODS: Kind = k("pods", "Pod", "v1", true, false, "pod");
pub const NODES: Kind = k("nodes", "Node", "v1", false, false, "n");
pub const NAMESPACES: Kind = k("namespaces", "Namespace", "v1", false, false, "x");
pub const SERVICES: Kind = k("services", "Service", "v1", true, false, "svc");
pub const DEPLOYMENTS: Kind = k("deployments", "Deployment", "apps/v1", true, false, "dep");
pub const EVENTS: Kind = k("events", "Event", "v1", true, false, "ev");
pub const LEASES: Kind = k(
    "leases",
    "Lease",
    "coordination.k8s.io/v1",
    true,
    false,
    "lease",
);
pub const QUEUES: Kind = k(
    "queues",
    "Queue",
    "scheduling.volcano.sh/v1beta1",
    false,
    true,
    "q",
);
pub const PODGROUPS: Kind = k(
    "podgroups",
    "PodGroup",
    "scheduling.volcano.sh/v1beta1",
    true,
    true,
    "pg",
);
pub const JOBS: Kind = k(
    "jobs",
    "Job",
    "batch.volcano.sh/v1alpha1",
    true,
    true,
    "job",
);

/// Kubernetes' own PodGroup (the Workload API), served by kube-apiserver 1.37 with the
/// `GenericWorkload` gate and its version on.
pub const KUBE_PODGROUPS: Kind = k(
    "podgroups",
    "PodGroup",
    "scheduling.k8s.io/v1beta1",
    true,
    false,
    "kpg",
);
/// The Workload API's Workload (pod group templates).
pub const WORKLOADS: Kind = k(
    "workloads",
    "Workload",
    "scheduling.k8s.io/v1beta1",
    true,
    false,
    "wl",
);

/// Dynamic resource allocation's claims (`resource.k8s.io/v1`): requests, constraints and
/// configuration in an immutable spec; an allocation and reservations in the status.
pub const RESOURCE_CLAIMS: Kind = k(
    "resourceclaims",
    "ResourceClaim",
    "resource.k8s.io/v1",
    true,
    false,
    "rc",
);
/// Dynamic resource allocation's claim templates (the claims a pod's template asks for).
pub const RESOURCE_CLAIM_TEMPLATES: Kind = k(
    "resourceclaimtemplates",
    "ResourceClaimTemplate",
    "resource.k8s.io/v1",
    true,
    false,
    "rct",
);
/// Dynamic resource allocation's device classes: selectors and configuration.
pub const DEVICE_CLASSES: Kind = k(
    "deviceclasses",
    "DeviceClass",
    "resource.k8s.io/v1",
    false,
    false,
    "dc",
);

/// A custom resource of the differential's own, whose CRD (`widget_crd`) carries CEL rules,
/// bounds, an enum, a required field, defaults and a status subresource.
pub const WIDGETS: Kind = k("widgets", "Widget", "diff.tephra.io/v1", true, true, "w");

/// The CRD of [`WIDGETS`], installed on both servers before the sequences run.
pub fn widget_crd() -> Value {
    let spec = json!({"type": "object", "required": ["size"], "properties": {
        "size": {"type": "integer", "minimum": 0},
        "replicas": {"type": "integer", "format": "int32"},
        "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
        "tags": {"type": "array", "maxItems": 3, "items": {"type": "string"}},
        "limits": {"type": "object", "additionalProperties": {"type": "string"}}},
        "x-kubernetes-validations": [
            {"rule": "self.size < 10", "message": "size must be below 10"},
            {"rule": "!has(self.replicas) || self.replicas <= self.size",
             "messageExpression":
                 "self.mode == 'slow' ? 'a slow widget has more replicas than its size' : 'replicas exceed the size'",
             "fieldPath": ".replicas", "reason": "FieldValueForbidden"},
            {"rule": "self.mode != 'slow' || !has(self.tags) || size(self.tags) == 0",
             "message": "a slow widget has no tags"}]});
    let status = json!({"type": "object", "properties": {
        "ready": {"type": "integer", "minimum": 0},
        "phase": {"type": "string"}},
        "x-kubernetes-validations": [
            {"rule": "!has(self.phase) || self.phase != 'Done' || has(self.ready)",
             "message": "a Done widget says how many are ready"}]});
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.diff.tephra.io"},
        "spec": {"group": "diff.tephra.io", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": spec, "status": status}}}}]}})
}

/// CRDs kube-apiserver refuses, each for another reason: a `messageExpression` whose string
/// has no bound (its cost is over budget), one that is not a string, a rule that does not
/// compile, a `fieldPath` that names no field.
pub fn refused_crds() -> Vec<Value> {
    let with_rule = |name: &str, rule: Value| {
        let mut crd = widget_crd();
        crd["metadata"]["name"] = json!(format!("{name}s.diff.tephra.io"));
        crd["spec"]["names"] = json!({"plural": format!("{name}s"), "singular": name,
            "kind": name, "listKind": format!("{name}List")});
        let spec =
            &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        spec["x-kubernetes-validations"] = json!([rule]);
        crd
    };
    vec![
        with_rule(
            "unbounded",
            json!({"rule": "self.size < 10",
            "messageExpression": "'size ' + string(self.size) + ' is too big'"}),
        ),
        with_rule(
            "numeric",
            json!({"rule": "self.size < 10", "messageExpression": "self.size"}),
        ),
        with_rule("broken", json!({"rule": "self.size <"})),
        with_rule(
            "astray",
            json!({"rule": "self.size < 10", "fieldPath": ".nowhere"}),
        ),
    ]
}

/// Every kind, with how often it is picked. Left out: the `scale` subresource (of
/// Deployments), which the devcluster does not serve.
pub const KINDS: &[(Kind, usize)] = &[
    (CONFIGMAPS, 6),
    (SECRETS, 3),
    (PODS, 5),
    (NODES, 3),
    (NAMESPACES, 1),
    (SERVICES, 2),
    (DEPLOYMENTS, 3),
    (EVENTS, 2),
    (LEASES, 2),
    (QUEUES, 2),
    (PODGROUPS, 2),
    (JOBS, 2),
    (WIDGETS, 3),
];

/// The kinds of the Workload API's sequences (kube-apiserver 1.37), with ConfigMaps as their
/// owners' and neighbours' kind.
pub const WORKLOAD_KINDS: &[(Kind, usize)] =
    &[(KUBE_PODGROUPS, 6), (WORKLOADS, 5), (CONFIGMAPS, 2)];

/// The kinds of the dynamic resource allocation sequences (the oldest release), with
/// ConfigMaps as their owners' and neighbours' kind. Claims are reserved for consumers that
/// are not pods, which no claim controller on either side touches (neither runs one here:
/// the claim controllers are proven on both backends by the `tephra-kube` contracts). Left
/// out: the fields whose feature gates differ between releases (tolerations, capacity
/// requests, shares, binding conditions) and admin access.
pub const DRA_KINDS: &[(Kind, usize)] = &[
    (RESOURCE_CLAIMS, 8),
    (RESOURCE_CLAIM_TEMPLATES, 3),
    (DEVICE_CLASSES, 2),
    (CONFIGMAPS, 2),
];

/// Every kind any sequence sends (to look a kind up by its [`Kind::id`]).
pub fn all_kinds() -> impl Iterator<Item = Kind> {
    KINDS
        .iter()
        .chain(WORKLOAD_KINDS)
        .chain(DRA_KINDS)
        .map(|(k, _)| *k)
}

const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

/// The finalizer the generator holds objects with.
pub const HOLD: &str = "diff.tephra.io/hold";

impl Kind {
    /// What names the kind in keys and snapshots: its plural, but for Kubernetes' PodGroups,
    /// whose plural is Volcano's too.
    pub fn id(&self) -> &'static str {
        if self.api_version == KUBE_PODGROUPS.api_version && self.plural == "podgroups" {
            "kpodgroups"
        } else {
            self.plural
        }
    }

    fn base(&self) -> String {
        if self.api_version == "v1" {
            "/api/v1".into()
        } else {
            format!("/apis/{}", self.api_version)
        }
    }

    /// The collection path in namespace `ns` (ignored for cluster-scoped kinds).
    pub fn collection(&self, ns: &str) -> String {
        if self.namespaced {
            format!("{}/namespaces/{ns}/{}", self.base(), self.plural)
        } else {
            format!("{}/{}", self.base(), self.plural)
        }
    }
}

/// A sequence's generator.
pub struct Gen {
    rng: Rng,
    /// The sequence's number.
    pub seq: u64,
    /// Its namespace.
    pub ns: String,
    left: usize,
    queued: VecDeque<Step>,
    next_watch: usize,
    open_watches: Vec<usize>,
    generated: usize,
    /// The verbs the limited service account is granted on ConfigMaps.
    granted: Vec<&'static str>,
    /// The kinds it sends, with how often each is picked.
    kinds: &'static [(Kind, usize)],
}

fn pick_kind(rng: &mut Rng, kinds: &[(Kind, usize)]) -> Kind {
    let total: usize = kinds.iter().map(|(_, w)| w).sum();
    let mut n = rng.below(total);
    for (k, w) in kinds {
        if n < *w {
            return *k;
        }
        n -= w;
    }
    CONFIGMAPS
}

const VERBS: &[&str] = &[
    "get", "list", "watch", "create", "update", "patch", "delete",
];

impl Gen {
    /// The generator of sequence `seq` over `kinds`, sending `steps` requests besides its
    /// setup.
    pub fn of(seq: u64, steps: usize, kinds: &'static [(Kind, usize)]) -> Self {
        let mut rng = Rng::new(seq);
        let granted = VERBS.iter().copied().filter(|_| rng.chance(50)).collect();
        Self {
            rng,
            seq,
            ns: format!("diff-{seq}"),
            left: steps,
            queued: VecDeque::new(),
            next_watch: 0,
            open_watches: Vec::new(),
            generated: 0,
            granted,
            kinds,
        }
    }

    fn call(&self, method: Method, path: String, key: Option<String>) -> Call {
        Call {
            method,
            path,
            query: Vec::new(),
            content_type: None,
            body: None,
            from_memory: None,
            who: Who::Admin,
            key,
        }
    }

    /// The requests that set a sequence up: its namespace, and the Role and RoleBinding that
    /// grant the limited service account its verbs on ConfigMaps there.
    pub fn setup(&self) -> Vec<Call> {
        let ns = &self.ns;
        let mut create_ns = self.call(
            Method::POST,
            "/api/v1/namespaces".into(),
            Some(format!("namespaces/{ns}")),
        );
        create_ns.body = Some(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"diff": self.seq.to_string()}}}));
        let rbac = "/apis/rbac.authorization.k8s.io/v1";
        let mut role = self.call(
            Method::POST,
            format!("{rbac}/namespaces/{ns}/roles"),
            Some("roles/limited".into()),
        );
        role.body = Some(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "limited"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": self.granted}]}),
        );
        let mut binding = self.call(
            Method::POST,
            format!("{rbac}/namespaces/{ns}/rolebindings"),
            Some("rolebindings/limited".into()),
        );
        binding.body = Some(json!({"apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding", "metadata": {"name": "limited"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "limited"},
            "subjects": [{"kind": "ServiceAccount", "name": "limited", "namespace": "diff-rbac"}]}));
        vec![create_ns, role, binding]
    }

    /// The kinds the sequence sends.
    pub fn kinds(&self) -> impl Iterator<Item = Kind> + use<> {
        self.kinds.iter().map(|(k, _)| *k)
    }

    /// Whether the limited service account may `verb` ConfigMaps in the sequence's namespace.
    pub fn granted(&self) -> &[&'static str] {
        &self.granted
    }

    fn name(&mut self, kind: Kind) -> String {
        let i = self.rng.below(3);
        if kind.namespaced {
            format!("{}-{i}", kind.short)
        } else {
            format!("{}-{}{i}", self.ns, kind.short)
        }
    }

    fn path(&self, kind: Kind, name: &str) -> String {
        format!("{}/{name}", kind.collection(&self.ns))
    }

    fn labels(&mut self) -> Value {
        let mut l = json!({"diff": self.seq.to_string(), "app": *self.rng.pick(&["a", "b"])});
        if self.rng.chance(30) {
            l["tier"] = json!("x");
        }
        l
    }

    fn container(&mut self) -> Value {
        let mut c = json!({"name": "c", "image": *self.rng.pick(&["busybox:1.36", "busybox", "nginx@sha256:0d17b565c37bcbd895e9d92315a05c1c3c9a29f762b011a10c54a66cd53c9b31"])});
        if self.rng.chance(30) {
            c["resources"] = json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "100m"}});
        }
        if self.rng.chance(20) {
            c["ports"] = json!([{"containerPort": 8080}]);
        }
        c
    }

    fn pod_spec(&mut self) -> Value {
        // Left out: the ServiceAccount admission plugin's projected token volume
        // (`kube-api-access-<random>`, with the `kube-root-ca.crt` ConfigMap the root CA
        // publisher makes in every namespace), which the devcluster does not add yet. Pods say
        // `automountServiceAccountToken: false`, which real clusters honour the same way.
        let mut spec =
            json!({"containers": [self.container()], "automountServiceAccountToken": false});
        if self.rng.chance(15) {
            spec["schedulingGates"] = json!([{"name": "diff.tephra.io/gate"}]);
        }
        if self.rng.chance(15) {
            spec["tolerations"] =
                json!([{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]);
        }
        if self.rng.chance(10) {
            spec["restartPolicy"] = json!("Never");
        }
        spec
    }

    /// A valid object of `kind` named `name` (without apiVersion and kind when `bare`).
    fn valid(&mut self, kind: Kind, name: &str) -> Value {
        let labels = self.labels();
        let mut o = json!({"apiVersion": kind.api_version, "kind": kind.kind,
            "metadata": {"name": name, "labels": labels}});
        match kind.id() {
            "configmaps" => {
                o["data"] = json!({"k": *self.rng.pick(&["v1", "v2"])});
                if self.rng.chance(15) {
                    o["immutable"] = json!(true);
                }
            }
            "secrets" => {
                if self.rng.chance(50) {
                    o["data"] = json!({"k": "djE="});
                } else {
                    o["stringData"] = json!({"s": "text"});
                }
                if self.rng.chance(50) {
                    o["type"] = json!("Opaque");
                }
                if self.rng.chance(10) {
                    o["immutable"] = json!(true);
                }
            }
            "pods" => o["spec"] = self.pod_spec(),
            "nodes" => {
                let mut spec = json!({});
                if self.rng.chance(50) {
                    spec["taints"] = json!([{"key": "k1", "value": "v", "effect": "NoSchedule"},
                        {"key": "k1", "effect": "NoExecute"}]);
                }
                if self.rng.chance(20) {
                    spec["unschedulable"] = json!(true);
                }
                o["spec"] = spec;
            }
            "namespaces" => {}
            "services" => {
                let mut port = json!({"port": 80});
                if self.rng.chance(50) {
                    port["targetPort"] = json!(8080);
                }
                if self.rng.chance(30) {
                    port["name"] = json!("http");
                }
                o["spec"] = json!({"selector": {"app": "a"}, "ports": [port]});
                if self.rng.chance(20) {
                    o["spec"]["type"] = json!("NodePort");
                }
            }
            "deployments" => {
                let app = *self.rng.pick(&["a", "b"]);
                o["spec"] = json!({"replicas": self.rng.below(3),
                    "selector": {"matchLabels": {"app": app}},
                    "template": {"metadata": {"labels": {"app": app}}, "spec": self.pod_spec()}});
            }
            "events" => {
                o["involvedObject"] = json!({"kind": "ConfigMap", "name": "cm-0",
                    "namespace": self.ns, "apiVersion": "v1"});
                o["reason"] = json!("Tested");
                o["message"] = json!("a generated event");
                o["type"] = json!(*self.rng.pick(&["Normal", "Warning"]));
                o["source"] = json!({"component": "diff"});
                o["firstTimestamp"] = json!("2024-01-01T00:00:00Z");
                o["lastTimestamp"] = json!("2024-01-01T00:00:00Z");
                o["count"] = json!(1);
            }
            "leases" => {
                o["spec"] = json!({"holderIdentity": "a", "leaseDurationSeconds": 15});
            }
            "queues" => {
                o["spec"] =
                    json!({"weight": 1 + self.rng.below(4), "reclaimable": self.rng.chance(50)});
                if self.rng.chance(30) {
                    o["spec"]["capability"] = json!({"cpu": "8"});
                }
            }
            "podgroups" => {
                o["spec"] = json!({"minMember": self.rng.below(3), "queue": "default"});
            }
            "kpodgroups" => o["spec"] = self.kube_group_spec(),
            "workloads" => o["spec"] = self.workload_spec(),
            "resourceclaims" => o["spec"] = self.claim_spec(),
            "resourceclaimtemplates" => {
                o["spec"] = json!({"spec": self.claim_spec()});
                if self.rng.chance(40) {
                    o["spec"]["metadata"] =
                        json!({"labels": {"claim": "made"}, "annotations": {"from": "template"}});
                }
            }
            "deviceclasses" => o["spec"] = self.class_spec(),
            "jobs" => {
                o["spec"] = json!({"minAvailable": 1, "schedulerName": "tephra",
                    "tasks": [{"name": "t", "replicas": 1 + self.rng.below(2),
                        "template": {"spec": {"containers": [self.container()]}}}]});
            }
            "widgets" => {
                let size = self.rng.below(10);
                o["spec"] = json!({"size": size});
                if self.rng.chance(50) {
                    o["spec"]["replicas"] = json!(self.rng.below(size + 1));
                }
                if self.rng.chance(40) {
                    o["spec"]["mode"] = json!("slow");
                } else if self.rng.chance(50) {
                    o["spec"]["tags"] = json!(["a", "b"]);
                }
                if self.rng.chance(20) {
                    o["spec"]["limits"] = json!({"cpu": "1"});
                }
            }
            _ => {}
        }
        o
    }

    /// A valid Kubernetes PodGroup's spec: a gang or basic policy, maybe a Workload's
    /// template, a disruption mode, or a field whose gate is off (dropped by the server).
    fn kube_group_spec(&mut self) -> Value {
        let mut spec = if self.rng.chance(70) {
            json!({"schedulingPolicy": {"gang": {"minCount": 1 + self.rng.below(3)}}})
        } else {
            json!({"schedulingPolicy": {"basic": {}}})
        };
        if self.rng.chance(30) {
            spec["workloadRef"] = json!({"workloadName": "wl-0",
                "templateName": *self.rng.pick(&["t0", "t1"])});
        }
        if self.rng.chance(20) {
            spec["disruptionMode"] = json!({"all": {}});
        }
        if self.rng.chance(10) {
            spec["schedulingConstraints"] = json!({"topology": [{"key": "zone"}]});
        }
        if self.rng.chance(10) {
            spec["priority"] = json!(0);
        }
        spec
    }

    /// A valid Workload's spec: one to three pod group templates, maybe a controller.
    fn workload_spec(&mut self) -> Value {
        let n = 1 + self.rng.below(3);
        let templates: Vec<Value> = (0..n)
            .map(|i| {
                let mut t = json!({"name": format!("t{i}")});
                t["schedulingPolicy"] = if self.rng.chance(60) {
                    json!({"gang": {"minCount": 1 + self.rng.below(4)}})
                } else {
                    json!({"basic": {}})
                };
                if self.rng.chance(15) {
                    t["disruptionMode"] =
                        json!(*self.rng.pick(&[json!({"single": {}}), json!({"all": {}})]));
                }
                if self.rng.chance(10) {
                    t["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": "c"}]);
                }
                t
            })
            .collect();
        let mut spec = json!({"podGroupTemplates": templates});
        if self.rng.chance(30) {
            spec["controllerRef"] = json!({"apiGroup": "batch", "kind": "Job", "name": "j0"});
        }
        spec
    }

    /// A valid claim's spec: one or two requests (exact, or a list of alternatives), maybe a
    /// constraint over both and an opaque configuration.
    fn claim_spec(&mut self) -> Value {
        let n = 1 + self.rng.below(2);
        let requests: Vec<Value> = (0..n)
            .map(|i| self.device_request(&format!("r{i}")))
            .collect();
        let mut devices = json!({"requests": requests});
        if n == 2 && self.rng.chance(30) {
            devices["constraints"] =
                json!([{"requests": ["r0", "r1"], "matchAttribute": "gpu.example.com/model"}]);
        }
        if self.rng.chance(25) {
            devices["config"] = json!([{"requests": ["r0"],
                "opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "time"}}}]);
        }
        if self.rng.chance(5) {
            return json!({});
        }
        json!({"devices": devices})
    }

    fn device_request(&mut self, name: &str) -> Value {
        if self.rng.chance(25) {
            return json!({"name": name, "firstAvailable": [
                {"name": "big", "deviceClassName": "gpu.example.com", "count": 2},
                {"name": "small", "deviceClassName": "gpu.example.com",
                    "allocationMode": "ExactCount"}]});
        }
        let mut exactly = json!({"deviceClassName": *self.rng.pick(&["gpu.example.com", "nic"])});
        match self.rng.below(4) {
            0 => exactly["count"] = json!(1 + self.rng.below(3)),
            1 => exactly["allocationMode"] = json!("All"),
            2 => {
                exactly["allocationMode"] = json!("ExactCount");
                exactly["count"] = json!(2);
            }
            _ => {}
        }
        if self.rng.chance(30) {
            exactly["selectors"] =
                json!([{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]);
        }
        json!({"name": name, "exactly": exactly})
    }

    /// A valid device class's spec: maybe selectors, maybe an opaque configuration.
    fn class_spec(&mut self) -> Value {
        let mut spec = json!({});
        if self.rng.chance(60) {
            spec["selectors"] = json!([{"cel": {"expression": *self.rng.pick(&[
                "device.driver == \"gpu.example.com\"",
                "device.attributes[\"gpu.example.com\"].model == \"a100\"",
            ])}}]);
        }
        if self.rng.chance(30) {
            spec["config"] = json!([{"opaque": {"driver": "gpu.example.com",
                "parameters": {"mode": "default"}}}]);
        }
        spec
    }

    /// An allocation of a claim's request `request` (of one of the sequence's claims).
    fn allocation(&mut self, request: &str) -> Value {
        let node = format!("{}-n{}", self.ns, self.rng.below(2));
        json!({"devices": {"results": [{"request": request, "driver": "gpu.example.com",
                "pool": node, "device": format!("gpu-{}", self.rng.below(2))}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}})
    }

    /// Reservations for consumers that are not pods (see [`DRA_KINDS`]).
    fn reservations(&mut self) -> Value {
        let n = 1 + self.rng.below(2);
        let r: Vec<Value> = (0..n)
            .map(|i| {
                json!({"apiGroup": "diff.tephra.io", "resource": "widgets",
                    "name": format!("w-{i}"), "uid": format!("00000000-0000-4000-8000-00000000000{i}")})
            })
            .collect();
        json!(r)
    }

    /// `o` with one field of the wrong JSON type: built-in kinds are refused when the body is
    /// decoded (400), custom resources by their schema (422).
    fn mistyped(&mut self, kind: Kind, o: &mut Value) {
        if self.rng.chance(25) {
            match self.rng.below(3) {
                0 => o["metadata"]["labels"] = json!("app=a"),
                1 => o["metadata"]["labels"]["app"] = json!(5),
                _ => o["metadata"]["annotations"] = json!(["a"]),
            }
            return;
        }
        let two = self.rng.chance(50);
        match kind.id() {
            "configmaps" if two => o["data"] = json!(5),
            "configmaps" => o["data"] = json!({"k": 5}),
            "secrets" if two => o["type"] = json!(5),
            "secrets" => o["data"] = json!({"k": true}),
            "pods" if two => o["spec"] = json!(5),
            "pods" => o["spec"]["containers"][0]["ports"] = json!([{"containerPort": "80"}]),
            "nodes" if two => o["spec"]["unschedulable"] = json!("yes"),
            "nodes" => o["spec"]["taints"] = json!({"key": "k"}),
            "namespaces" => o["spec"] = json!({"finalizers": "kubernetes"}),
            "services" if two => o["spec"]["ports"][0]["port"] = json!("80"),
            "services" => o["spec"]["selector"] = json!(["app"]),
            "deployments" if two => o["spec"]["replicas"] = json!("two"),
            "deployments" => o["spec"]["template"]["metadata"]["labels"] = json!(7),
            "events" => o["count"] = json!("1"),
            "leases" => o["spec"]["leaseDurationSeconds"] = json!("15"),
            "queues" if two => o["spec"]["weight"] = json!("1"),
            "queues" => o["spec"]["reclaimable"] = json!("yes"),
            "podgroups" => o["spec"]["minMember"] = json!("1"),
            "kpodgroups" if two => o["spec"]["schedulingPolicy"] = json!("gang"),
            "kpodgroups" => o["spec"]["priority"] = json!("high"),
            "workloads" if two => o["spec"]["podGroupTemplates"] = json!({"name": "t0"}),
            "workloads" => o["spec"]["podGroupTemplates"][0]["name"] = json!(7),
            "resourceclaims" if two => o["spec"]["devices"]["requests"] = json!({"name": "r0"}),
            "resourceclaims" => {
                o["spec"]["devices"]["requests"] = json!([{"name": "r0",
                    "exactly": {"deviceClassName": "gpu.example.com", "count": "2"}}]);
            }
            "deviceclasses" => o["spec"]["selectors"] = json!({"cel": {"expression": "true"}}),
            "resourceclaimtemplates" => o["spec"]["spec"]["devices"] = json!([{"requests": []}]),
            "jobs" if two => o["spec"]["tasks"] = json!({"name": "t"}),
            "jobs" => o["spec"]["minAvailable"] = json!(1.5),
            "widgets" if two => o["spec"]["size"] = json!("3"),
            "widgets" => o["spec"]["tags"] = json!("a"),
            _ => o["spec"] = json!(5),
        }
    }

    /// A claim's spec kube-apiserver refuses, in one of the ways it can.
    fn invalid_claim_spec(&mut self) -> Value {
        let gpu = "gpu.example.com";
        let bad = match self.rng.below(14) {
            0 => json!([{"name": "Bad_Name", "exactly": {"deviceClassName": gpu}}]),
            1 => json!([{"name": "r0"}]),
            2 => json!([{"name": "r0", "exactly": {"deviceClassName": gpu},
                "firstAvailable": [{"name": "a", "deviceClassName": gpu}]}]),
            3 => json!([{"name": "r0", "exactly": {"deviceClassName": gpu, "count": 0}}]),
            4 => json!([{"name": "r0", "exactly": {"deviceClassName": gpu,
                "allocationMode": "Some"}}]),
            5 => json!([{"name": "r0", "exactly": {}}]),
            6 => json!([{"name": "r0", "exactly": {"deviceClassName": gpu,
                "allocationMode": "All", "count": 2}}]),
            7 => json!([{"name": "r0", "exactly": {"deviceClassName": gpu}},
                {"name": "r0", "exactly": {"deviceClassName": "nic"}}]),
            8 => json!([{"name": "r0", "exactly": {"deviceClassName": "Bad_Class"}}]),
            9 => json!([{"name": "r0", "exactly": {"deviceClassName": gpu,
                "selectors": [{"cel": {"expression": "device.driver =="}}]}}]),
            10 => json!([{"name": "r0", "exactly": {"deviceClassName": gpu,
                "selectors": [{}]}}]),
            11 => json!([{"name": "r0", "firstAvailable": [
                {"name": "a", "deviceClassName": gpu},
                {"name": "a", "deviceClassName": gpu, "count": -1}]}]),
            _ => json!([{"name": "r0", "exactly": {"deviceClassName": gpu}}]),
        };
        let mut spec = json!({"devices": {"requests": bad}});
        match self.rng.below(4) {
            0 => {
                spec["devices"]["constraints"] =
                    json!([{"requests": ["r9"], "matchAttribute": "model"}]);
            }
            1 => {
                spec["devices"]["config"] = json!([{"requests": ["r0/x/y"], "opaque": {"driver": "Bad Driver",
                        "parameters": {"a": 1}}}]);
            }
            2 => {
                spec["devices"]["config"] = json!([{"opaque":
                    {"driver": gpu, "parameters": [1]}}, {"requests": ["r0"]}]);
            }
            _ => {}
        }
        spec
    }

    /// An object of `kind` that admission refuses, in one of the ways it can.
    fn invalid(&mut self, kind: Kind, name: &str) -> Value {
        let mut o = self.valid(kind, name);
        let how = self.rng.below(5);
        if how == 4 {
            self.mistyped(kind, &mut o);
            return o;
        }
        match (kind.id(), how) {
            (_, 0) => o["metadata"]["name"] = json!(format!("{}_Bad", name)),
            (_, 1) => o["metadata"]["labels"]["bad label!"] = json!("x"),
            ("configmaps", _) => o["data"] = json!({"bad key!": "v"}),
            ("secrets", _) => {
                o["data"] = json!({"k": "not base64!"});
                if let Some(m) = o.as_object_mut() {
                    m.remove("stringData");
                }
            }
            ("pods", 2) => o["spec"]["containers"] = json!([]),
            ("pods", _) => o["spec"]["containers"][0]["name"] = json!("Bad_Name"),
            ("nodes", 2) => {
                o["spec"]["taints"] = json!([{"key": "k1", "effect": "NoSchedule"},
                    {"key": "k1", "value": "other", "effect": "NoSchedule"}]);
            }
            ("nodes", _) => o["spec"]["taints"] = json!([{"key": "k1", "effect": "Bogus"}]),
            ("namespaces", _) => {
                o["metadata"]["name"] = json!(format!("{name}-{}", "x".repeat(64)));
            }
            ("services", 2) => {
                if let Some(s) = o["spec"].as_object_mut() {
                    s.remove("ports");
                }
            }
            ("services", _) => o["spec"]["ports"][0]["port"] = json!(0),
            ("deployments", 2) => o["spec"]["template"]["metadata"]["labels"]["app"] = json!("zzz"),
            ("deployments", _) => o["spec"]["replicas"] = json!(-1),
            ("events", 2) => o["involvedObject"]["namespace"] = json!("elsewhere"),
            ("events", _) => {
                if let Some(m) = o.as_object_mut() {
                    m.remove("involvedObject");
                }
            }
            ("leases", _) => o["spec"]["leaseDurationSeconds"] = json!(0),
            ("queues", 2) => o["spec"]["weight"] = json!(0),
            ("queues", _) => o["spec"]["parent"] = json!(name),
            ("podgroups", _) => o["spec"]["minMember"] = json!(-1),
            ("kpodgroups", 2) => match self.rng.below(4) {
                0 => o["spec"]["schedulingPolicy"] = json!({"gang": {"minCount": 0}}),
                1 => o["spec"]["schedulingPolicy"] = json!({"gang": {"minCount": -2}}),
                2 => o["spec"]["schedulingPolicy"] = json!({}),
                _ => o["spec"]["schedulingPolicy"] = json!({"basic": {}, "gang": {"minCount": 1}}),
            },
            ("kpodgroups", _) => match self.rng.below(4) {
                0 => {
                    o["spec"]["workloadRef"] =
                        json!({"workloadName": "wl-0", "templateName": "Bad_T"})
                }
                1 => o["spec"]["workloadRef"] = json!({"templateName": "t0"}),
                2 => o["spec"]["disruptionMode"] = json!({}),
                _ => o["spec"]["priorityClassName"] = json!("no-such-class"),
            },
            ("workloads", 2) => {
                match self.rng.below(3) {
                    0 => o["spec"]["podGroupTemplates"] = json!([]),
                    1 => {
                        let t = o["spec"]["podGroupTemplates"][0].clone();
                        o["spec"]["podGroupTemplates"] = json!([t.clone(), t]);
                    }
                    _ => {
                        let ts: Vec<Value> = (0..9)
                        .map(|i| json!({"name": format!("t{i}"), "schedulingPolicy": {"basic": {}}}))
                        .collect();
                        o["spec"]["podGroupTemplates"] = json!(ts);
                    }
                }
            }
            ("workloads", _) => match self.rng.below(3) {
                0 => o["spec"]["podGroupTemplates"][0]["name"] = json!("Bad.Name"),
                1 => {
                    o["spec"]["podGroupTemplates"] = json!([
                        {"name": "a", "schedulingPolicy": {"basic": {}}, "priority": 1},
                        {"name": "b", "schedulingPolicy": {"basic": {}}}]);
                }
                _ => o["spec"]["controllerRef"] = json!({"kind": "Job", "name": "a/b"}),
            },
            ("widgets", 2) => match self.rng.below(3) {
                0 => o["spec"]["size"] = json!(12),
                1 => o["spec"]["size"] = json!(-1),
                _ => {
                    if let Some(m) = o["spec"].as_object_mut() {
                        m.remove("size");
                    }
                }
            },
            ("widgets", _) => match self.rng.below(3) {
                0 => o["spec"] = json!({"size": 2, "replicas": 3}),
                1 => o["spec"] = json!({"size": 2, "mode": "medium"}),
                _ => o["spec"] = json!({"size": 2, "mode": "slow", "tags": ["a", "b", "c", "d"]}),
            },
            ("resourceclaims", _) => o["spec"] = self.invalid_claim_spec(),
            ("resourceclaimtemplates", 2) => {
                o["spec"]["metadata"] = match self.rng.below(3) {
                    0 => json!({"name": "fixed"}),
                    1 => json!({"labels": {"bad label!": "x"}, "annotations": {"a": "b"}}),
                    _ => json!({"finalizers": ["a/b"], "labels": {"ok": "Bad Value"}}),
                };
            }
            ("resourceclaimtemplates", _) => o["spec"]["spec"] = self.invalid_claim_spec(),
            ("deviceclasses", 2) => {
                o["spec"]["selectors"] = json!([{"cel": {"expression": "device.("}}]);
            }
            ("deviceclasses", _) => {
                o["spec"]["config"] = json!([{"opaque": {"driver": "-bad-", "parameters": "x"}}]);
            }
            ("jobs", 2) => o["spec"]["minAvailable"] = json!(9),
            ("jobs", _) => {
                o["spec"]["tasks"] =
                    json!([o["spec"]["tasks"][0].clone(), o["spec"]["tasks"][0].clone()]);
            }
            _ => {}
        }
        o
    }

    /// A change to an object of `kind`, as a JSON merge patch: labels, data, or its spec.
    fn change(&mut self, kind: Kind) -> Value {
        let label = json!({"metadata": {"labels": {"app": *self.rng.pick(&["a", "b", "c"])}}});
        if self.rng.chance(8) {
            // The whole of a valid object but for one mistyped field.
            let mut o = self.valid(kind, "");
            self.mistyped(kind, &mut o);
            if let Some(m) = o.as_object_mut() {
                m.remove("apiVersion");
                m.remove("kind");
            }
            if let Some(m) = o["metadata"].as_object_mut() {
                m.remove("name");
            }
            return o;
        }
        if self.rng.chance(40) {
            return label;
        }
        match kind.id() {
            "configmaps" => json!({"data": {"k": *self.rng.pick(&["v1", "v2", "v3"])}}),
            "secrets" => json!({"data": {"k": "djI="}}),
            "pods" => match self.rng.below(4) {
                0 => json!({"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}}),
                1 => json!({"spec": {"activeDeadlineSeconds": 60}}),
                2 => json!({"spec": {"restartPolicy": "OnFailure"}}),
                _ => json!({"spec": {"schedulingGates": null}}),
            },
            "nodes" => json!({"spec": {"unschedulable": self.rng.chance(50)}}),
            "services" => match self.rng.below(2) {
                0 => json!({"spec": {"selector": {"app": "b"}}}),
                _ => json!({"spec": {"clusterIP": "10.96.200.200"}}),
            },
            "deployments" => match self.rng.below(3) {
                0 => json!({"spec": {"replicas": self.rng.below(4)}}),
                1 => json!({"spec": {"selector": {"matchLabels": {"app": "c"}}}}),
                _ => json!({"spec": {"paused": true}}),
            },
            "events" => json!({"count": 2, "message": "again"}),
            "leases" => json!({"spec": {"holderIdentity": *self.rng.pick(&["a", "b"])}}),
            "queues" => json!({"spec": {"weight": self.rng.below(3)}}),
            "podgroups" => json!({"spec": {"minMember": self.rng.below(3)}}),
            "kpodgroups" => match self.rng.below(4) {
                0 | 1 => {
                    json!({"spec": {"schedulingPolicy": {"gang": {"minCount": self.rng.below(4)}}}})
                }
                2 => json!({"spec": {"schedulingPolicy": {"basic": {}, "gang": null}}}),
                _ => json!({"spec": {"disruptionMode": {"all": {}, "single": null}}}),
            },
            "workloads" => match self.rng.below(3) {
                0 => json!({"spec": self.workload_spec()}),
                1 => json!({"spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job",
                    "name": *self.rng.pick(&["j0", "j1"])}}}),
                _ => json!({"spec": {"podGroupTemplates": [{"name": "t0",
                    "schedulingPolicy": {"gang": {"minCount": 1 + self.rng.below(3)}}}]}}),
            },
            "jobs" => json!({"spec": {"minAvailable": 1 + self.rng.below(3)}}),
            "resourceclaims" => json!({"spec": self.claim_spec()}),
            "resourceclaimtemplates" => json!({"spec": {"spec": self.claim_spec()}}),
            "deviceclasses" => json!({"spec": self.class_spec()}),
            "widgets" => match self.rng.below(3) {
                0 => json!({"spec": {"size": self.rng.below(12)}}),
                1 => json!({"spec": {"replicas": self.rng.below(6)}}),
                _ => json!({"spec": {"mode": *self.rng.pick(&["slow", "fast"]), "tags": null}}),
            },
            _ => label,
        }
    }

    /// A status for an object of `kind`, as a JSON merge patch.
    fn status(&mut self, kind: Kind) -> Value {
        match kind.id() {
            "pods" => json!({"status": {"phase": *self.rng.pick(&["Running", "Pending"]),
                "message": "set by the differential"}}),
            "nodes" => json!({"status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"}}}),
            "services" => json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}}),
            "deployments" => json!({"status": {"replicas": 1, "observedGeneration": 1}}),
            "namespaces" => json!({"status": {"phase": "Active"}}),
            "queues" => json!({"status": {"state": *self.rng.pick(&["Open", "Closed", "Bogus"])}}),
            "podgroups" => json!({"status": {"phase": "Running", "running": 1}}),
            "kpodgroups" => {
                let mut c = json!({"type": "PodGroupInitiallyScheduled",
                    "status": *self.rng.pick(&["True", "False"]), "reason": "Scheduled",
                    "message": "placed", "lastTransitionTime": "2026-01-01T00:00:00Z"});
                match self.rng.below(5) {
                    0 => c["status"] = json!("Maybe"),
                    1 => c["reason"] = json!("not a reason!"),
                    2 => {
                        if let Some(m) = c.as_object_mut() {
                            m.remove("lastTransitionTime");
                        }
                    }
                    _ => {}
                }
                json!({"status": {"conditions": [c]}})
            }
            "jobs" => json!({"status": {"state": {"phase": "Running"}, "running": 1}}),
            "resourceclaims" => match self.rng.below(12) {
                0..=2 => json!({"status": {"allocation": self.allocation("r0")}}),
                3 | 4 => json!({"status": {"allocation": self.allocation("r0"),
                    "reservedFor": self.reservations()}}),
                5 => json!({"status": {"reservedFor": self.reservations()}}),
                6 => json!({"status": {"allocation": null, "reservedFor": null}}),
                7 => json!({"status": {"reservedFor": null}}),
                8 => {
                    let request = *self.rng.pick(&["r9", "r0/x", "r0/big", "r1"]);
                    let mut a = self.allocation(request);
                    if self.rng.chance(50) {
                        a["devices"]["results"][0]["driver"] = json!("Bad_Driver");
                    }
                    json!({"status": {"allocation": a}})
                }
                9 => {
                    let mut r = self.reservations();
                    r[0]["uid"] =
                        json!(*self.rng.pick(&["", "00000000-0000-4000-8000-000000000001"]));
                    if self.rng.chance(50) {
                        r[0]["name"] = json!("");
                    }
                    json!({"status": {"allocation": self.allocation("r0"), "reservedFor": r}})
                }
                10 => {
                    let mut a = self.allocation("r0");
                    a["nodeSelector"] = json!({"nodeSelectorTerms": []});
                    json!({"status": {"allocation": a}})
                }
                _ => {
                    let mut a = self.allocation("r0");
                    a["devices"]["config"] = json!([{"source": *self.rng.pick(&["FromClaim", "FromClass", "Elsewhere"]),
                        "requests": ["r0"], "opaque": {"driver": "gpu.example.com", "parameters": {"k": "v"}}}]);
                    json!({"status": {"allocation": a}})
                }
            },
            "widgets" => match self.rng.below(3) {
                0 => json!({"status": {"ready": self.rng.below(3), "phase": "Done"}}),
                1 => json!({"status": {"phase": "Done"}}),
                _ => json!({"status": {"ready": "one"}}),
            },
            _ => json!({"status": {"x": 1}}),
        }
    }

    fn key(kind: Kind, name: &str) -> String {
        format!("{}/{name}", kind.id())
    }

    /// The next step, or `None` when the sequence is done.
    pub fn next(&mut self) -> Option<Step> {
        if let Some(s) = self.queued.pop_front() {
            return Some(s);
        }
        if self.left == 0 {
            if let Some(id) = self.open_watches.pop() {
                return Some(Step::WatchClose { id });
            }
            return None;
        }
        self.left -= 1;
        let kind = pick_kind(&mut self.rng, self.kinds);
        let name = self.name(kind);
        let key = Self::key(kind, &name);
        let path = self.path(kind, &name);
        let mut op = self.rng.below(100);
        // A claim's status holds most of its rules: written more often.
        if kind == RESOURCE_CLAIMS && self.rng.chance(20) {
            op = 66;
        }
        let step = match op {
            0..=21 => self.create(kind, &name, &key),
            22..=24 => self.create_generated(kind),
            25..=27 => self.create_invalid(kind, &name, &key),
            28..=32 => Step::Call(self.call(Method::GET, path, Some(key))),
            33..=37 => self.list(kind),
            38..=43 => self.update(kind, &key, &path),
            44..=50 => self.patch(kind, &key, &path),
            51..=57 => self.apply(kind, &name, &key, &path),
            58..=65 => self.delete(kind, &key, &path),
            66..=70 => self.status_write(kind, &key, &path),
            71..=73 => self.bind_or_evict(),
            74..=76 => self.watch(kind),
            77..=83 => self.limited(),
            84..=91 => self.owned(kind, &name, &key),
            92..=95 => self.held(kind, &name, &key),
            _ => self.use_generated(kind),
        };
        Some(step)
    }

    fn post(&self, kind: Kind, key: &str, body: Value) -> Call {
        let mut c = self.call(
            Method::POST,
            kind.collection(&self.ns),
            Some(key.to_string()),
        );
        c.body = Some(body);
        c
    }

    fn create(&mut self, kind: Kind, name: &str, key: &str) -> Step {
        let body = self.valid(kind, name);
        let mut c = self.post(kind, key, body);
        if self.rng.chance(10) {
            c.query.push(("dryRun".into(), "All".into()));
        }
        if self.rng.chance(10) {
            c.query.push(("fieldManager".into(), "creator".into()));
        }
        Step::Call(c)
    }

    fn create_generated(&mut self, kind: Kind) -> Step {
        let key = format!("{}/gen-{}", kind.id(), self.generated);
        self.generated += 1;
        let mut body = self.valid(kind, "");
        if let Some(m) = body["metadata"].as_object_mut() {
            m.remove("name");
            let prefix = if kind.namespaced {
                "g-".to_string()
            } else {
                format!("{}-g-", self.ns)
            };
            m.insert("generateName".into(), json!(prefix));
        }
        Step::Call(self.post(kind, &key, body))
    }

    /// A request on an object made with `generateName`, by the name each side gave it.
    fn use_generated(&mut self, kind: Kind) -> Step {
        let key = format!(
            "{}/gen-{}",
            kind.id(),
            self.rng.below(self.generated.max(1))
        );
        let path = self.path(kind, &format!("{{name:{key}}}"));
        if self.rng.chance(50) {
            return Step::Call(self.call(Method::GET, path, Some(key)));
        }
        let mut c = self.call(Method::DELETE, path, Some(key));
        c.body =
            Some(json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}));
        self.queued.push_back(Step::Settle);
        Step::Call(c)
    }

    fn create_invalid(&mut self, kind: Kind, name: &str, key: &str) -> Step {
        let body = self.invalid(kind, name);
        Step::Call(self.post(kind, key, body))
    }

    fn selector(&mut self, kind: Kind) -> String {
        let own = format!("diff={}", self.seq);
        let extra = *self.rng.pick(&[
            "",
            "app=a",
            "app in (a,b)",
            "app!=a",
            "tier",
            "!tier",
            "app=a,tier=x",
            "app notin (b)",
        ]);
        match (kind.namespaced, extra) {
            (true, "") => String::new(),
            (true, e) => e.to_string(),
            (false, "") => own,
            (false, e) => format!("{own},{e}"),
        }
    }

    fn list(&mut self, kind: Kind) -> Step {
        let mut c = self.call(
            Method::GET,
            kind.collection(&self.ns),
            Some(format!("list:{}", kind.id())),
        );
        let labels = self.selector(kind);
        if !labels.is_empty() {
            c.query.push(("labelSelector".into(), labels));
        }
        if self.rng.chance(35) {
            let name = self.name(kind);
            let field = match (kind.id(), self.rng.below(4)) {
                (_, 0) => format!("metadata.name={name}"),
                (_, 1) => format!("metadata.name!={name}"),
                ("pods", _) => "status.phase=Pending,spec.nodeName=".into(),
                ("secrets", _) => "type=Opaque".into(),
                ("events", _) => "involvedObject.name=cm-0,reason=Tested".into(),
                ("nodes", _) => "spec.unschedulable=false".into(),
                (_, 2) => "spec.bogus=x".into(),
                _ => format!("metadata.namespace={}", self.ns),
            };
            c.query.push(("fieldSelector".into(), field));
        }
        if self.rng.chance(15) {
            c.query.push(("limit".into(), "1".into()));
        }
        Step::Call(c)
    }

    fn update(&mut self, kind: Kind, key: &str, path: &str) -> Step {
        let mut patch = self.change(kind);
        if self.rng.chance(15) {
            // An unconditional update (no resourceVersion): allowed for the built-in kinds.
            patch["metadata"]["resourceVersion"] = Value::Null;
        }
        let mut c = self.call(Method::PUT, path.to_string(), Some(key.to_string()));
        c.from_memory = Some(FromMemory {
            key: key.to_string(),
            patch,
            stale: self.rng.chance(35),
        });
        Step::Call(c)
    }

    fn patch(&mut self, kind: Kind, key: &str, path: &str) -> Step {
        let mut c = self.call(Method::PATCH, path.to_string(), Some(key.to_string()));
        match self.rng.below(4) {
            0 | 1 => {
                let mut body = self.change(kind);
                if self.rng.chance(20) {
                    body["metadata"]["resourceVersion"] = json!(format!("{{rv0:{key}}}"));
                }
                c.content_type = Some(MERGE);
                c.body = Some(body);
            }
            2 => {
                c.content_type = Some(JSON_PATCH);
                c.body = Some(match self.rng.below(5) {
                    0 => json!([{"op": "add", "path": "/metadata/labels/tier", "value": "y"}]),
                    4 => json!([{"op": "add", "path": "/metadata/labels/tier", "value": 5}]),
                    1 => json!([{"op": "test", "path": "/metadata/labels/app", "value": "a"},
                        {"op": "replace", "path": "/metadata/labels/app", "value": "b"}]),
                    2 => json!([{"op": "remove", "path": "/metadata/labels/missing"}]),
                    _ => {
                        json!([{"op": "add", "path": "/metadata/annotations", "value": {"note": "n"}}])
                    }
                });
            }
            _ => {
                c.content_type = Some(STRATEGIC);
                c.body = Some(match kind.id() {
                    "pods" => {
                        json!({"spec": {"tolerations": [{"key": "t", "operator": "Exists"}]}})
                    }
                    "nodes" => json!({"spec": {"taints": [{"key": "k2", "effect": "NoSchedule"}]}}),
                    "deployments" => json!({"spec": {"template": {"spec": {"containers":
                        [{"name": "c", "image": "busybox:1.37"}]}}}}),
                    _ => self.change(kind),
                });
            }
        }
        Step::Call(c)
    }

    fn apply(&mut self, kind: Kind, name: &str, key: &str, path: &str) -> Step {
        let manager = *self.rng.pick(&["alice", "bob"]);
        let full = self.valid(kind, name);
        let mut body = json!({"apiVersion": kind.api_version, "kind": kind.kind,
            "metadata": {"name": name, "labels": {"app": *self.rng.pick(&["a", "b"]), "diff": self.seq.to_string()}}});
        // The kind's required fields, so an apply that creates is valid; a field of the
        // manager's own besides.
        if let Some(m) = full.as_object() {
            for (k, v) in m {
                if !matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    body[k] = v.clone();
                }
            }
        }
        // Not applied: a Kubernetes PodGroup's topology constraints, which the server drops
        // (their gate is off) after recording who applied them; the devcluster does not
        // model the conflicts over such a field yet.
        if kind == KUBE_PODGROUPS
            && let Some(spec) = body["spec"].as_object_mut()
        {
            spec.remove("schedulingConstraints");
        }
        if self.rng.chance(40) {
            body["metadata"]["annotations"] = json!({format!("owner.{manager}"): "yes"});
        }
        let mut c = self.call(Method::PATCH, path.to_string(), Some(key.to_string()));
        c.content_type = Some(APPLY);
        c.body = Some(body);
        c.query.push(("fieldManager".into(), manager.into()));
        if self.rng.chance(30) {
            c.query.push(("force".into(), "true".into()));
        }
        Step::Call(c)
    }

    fn delete(&mut self, kind: Kind, key: &str, path: &str) -> Step {
        let mut opts = json!({"kind": "DeleteOptions", "apiVersion": "v1"});
        match self.rng.below(6) {
            0 => opts["preconditions"] = json!({"uid": format!("{{uid:{key}}}")}),
            1 => opts["preconditions"] = json!({"uid": "11111111-1111-4111-8111-111111111111"}),
            2 => opts["preconditions"] = json!({"resourceVersion": format!("{{rv0:{key}}}")}),
            _ => {}
        }
        // Kubernetes PodGroups carry the protection finalizer, which its controller removes
        // while the garbage collector removes its own: on the real server the two race, so
        // these are deleted in the background only.
        if self.rng.chance(50) && kind != KUBE_PODGROUPS {
            opts["propagationPolicy"] =
                json!(*self.rng.pick(&["Orphan", "Background", "Foreground"]));
        }
        if kind.plural == "pods" && self.rng.chance(60) {
            opts["gracePeriodSeconds"] = json!(0);
        }
        let mut c = self.call(Method::DELETE, path.to_string(), Some(key.to_string()));
        c.body = Some(opts);
        self.queued.push_back(Step::Settle);
        Step::Call(c)
    }

    fn status_write(&mut self, kind: Kind, key: &str, path: &str) -> Step {
        let status = self.status(kind);
        let path = format!("{path}/status");
        if self.rng.chance(50) {
            let mut c = self.call(Method::PATCH, path, Some(key.to_string()));
            c.content_type = Some(MERGE);
            c.body = Some(status);
            return Step::Call(c);
        }
        let mut c = self.call(Method::PUT, path, Some(key.to_string()));
        c.from_memory = Some(FromMemory {
            key: key.to_string(),
            patch: status,
            stale: self.rng.chance(20),
        });
        Step::Call(c)
    }

    fn bind_or_evict(&mut self) -> Step {
        let name = self.name(PODS);
        let key = Self::key(PODS, &name);
        let path = self.path(PODS, &name);
        if self.rng.chance(60) {
            let node = format!("{}-n{}", self.ns, self.rng.below(3));
            let mut c = self.call(Method::POST, format!("{path}/binding"), Some(key));
            c.body = Some(json!({"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name}, "target": {"apiVersion": "v1", "kind": "Node", "name": node}}));
            // The binding answers a Status; the pod is read again to compare it.
            c.key = None;
            self.queued.push_back(Step::Call(self.call(
                Method::GET,
                self.path(PODS, &name),
                Some(Self::key(PODS, &name)),
            )));
            return Step::Call(c);
        }
        let mut c = self.call(Method::POST, format!("{path}/eviction"), None);
        c.body = Some(json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": name, "namespace": self.ns},
            "deleteOptions": {"gracePeriodSeconds": 0}}));
        self.queued.push_back(Step::Settle);
        Step::Call(c)
    }

    fn watch(&mut self, kind: Kind) -> Step {
        if let Some(id) = self.open_watches.pop()
            && self.rng.chance(50)
        {
            return Step::WatchClose { id };
        }
        let id = self.next_watch;
        self.next_watch += 1;
        self.open_watches.push(id);
        let list_key = format!("list:{}", kind.id());
        let mut list = self.call(
            Method::GET,
            kind.collection(&self.ns),
            Some(list_key.clone()),
        );
        let mut query = Vec::new();
        if !kind.namespaced {
            query.push(("labelSelector".to_string(), format!("diff={}", self.seq)));
            list.query = query.clone();
        }
        if self.rng.chance(70) {
            query.push(("resourceVersion".into(), format!("{{listrv:{list_key}}}")));
        }
        self.queued.push_back(Step::WatchOpen {
            id,
            path: kind.collection(&self.ns),
            query,
        });
        Step::Call(list)
    }

    fn limited(&mut self) -> Step {
        let name = self.name(CONFIGMAPS);
        let key = Self::key(CONFIGMAPS, &name);
        let path = self.path(CONFIGMAPS, &name);
        let mut c = match self.rng.below(6) {
            0 => self.call(Method::GET, path, Some(key)),
            1 => self.call(Method::GET, CONFIGMAPS.collection(&self.ns), None),
            2 => {
                let body = self.valid(CONFIGMAPS, &name);
                self.post(CONFIGMAPS, &key, body)
            }
            3 => {
                let mut c = self.call(Method::PATCH, path, Some(key));
                c.content_type = Some(MERGE);
                c.body = Some(json!({"data": {"k": "limited"}}));
                c
            }
            4 => {
                let mut c = self.call(Method::DELETE, path, Some(key));
                self.queued.push_back(Step::Settle);
                c.body = Some(json!({"kind": "DeleteOptions", "apiVersion": "v1"}));
                c
            }
            _ => {
                // Another kind than the Role names.
                self.call(Method::GET, SECRETS.collection(&self.ns), None)
            }
        };
        c.who = Who::Limited;
        Step::Call(c)
    }

    /// An object owned by another one (maybe absent, maybe of another scope).
    fn owned(&mut self, kind: Kind, name: &str, key: &str) -> Step {
        let owner_kind = *self.rng.pick(&[
            CONFIGMAPS,
            CONFIGMAPS,
            SECRETS,
            DEPLOYMENTS,
            PODS,
            NODES,
            QUEUES,
            JOBS,
        ]);
        let owner = self.name(owner_kind);
        let owner_key = Self::key(owner_kind, &owner);
        let mut reference = json!({"apiVersion": owner_kind.api_version, "kind": owner_kind.kind,
            "name": owner, "uid": format!("{{uid:{owner_key}}}")});
        if self.rng.chance(40) {
            reference["controller"] = json!(true);
        }
        if self.rng.chance(50) {
            reference["blockOwnerDeletion"] = json!(true);
        }
        let mut body = self.valid(kind, name);
        body["metadata"]["ownerReferences"] = json!([reference]);
        self.queued.push_back(Step::Settle);
        Step::Call(self.post(kind, key, body))
    }

    /// An object held by a finalizer, or the finalizer let go. A Kubernetes PodGroup is only
    /// created: its protection controller's writes to its finalizers race with the
    /// sequence's on the real server.
    fn held(&mut self, kind: Kind, name: &str, key: &str) -> Step {
        if kind == KUBE_PODGROUPS {
            return self.create(kind, name, key);
        }
        if self.rng.chance(50) {
            let mut body = self.valid(kind, name);
            body["metadata"]["finalizers"] = json!([HOLD]);
            return Step::Call(self.post(kind, key, body));
        }
        let mut c = self.call(Method::PATCH, self.path(kind, name), Some(key.to_string()));
        c.content_type = Some(MERGE);
        c.body = Some(json!({"metadata": {"finalizers": null}}));
        self.queued.push_back(Step::Settle);
        Step::Call(c)
    }
}
