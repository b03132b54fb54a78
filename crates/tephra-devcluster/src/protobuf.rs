//! Request bodies in Kubernetes' protobuf encoding, as kubectl sends the built-in kinds its
//! `create` subcommands write (`kubectl create namespace`, `configmap`, `secret`,
//! `priorityclass`, `serviceaccount`, `service`, `role`, `rolebinding`, `clusterrole`,
//! `clusterrolebinding`, `poddisruptionbudget`): the `k8s\0` envelope (a `runtime.Unknown` holding the
//! type and the raw message), decoded to the object's JSON by the field numbers of the
//! Kubernetes API's `generated.proto`. Answers stay JSON (kubectl accepts both).
//!
//! Only those kinds are known here; any other protobuf body is refused with 415 naming the kind,
//! where a real kube-apiserver would decode it.

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::status::ApiError;

/// The envelope's magic prefix.
const MAGIC: &[u8] = b"k8s\0";

/// How one field of a message maps to JSON.
#[derive(Clone, Copy)]
enum Field {
    /// A string.
    Str(&'static str),
    /// A varint integer.
    Int(&'static str),
    /// A varint boolean.
    Bool(&'static str),
    /// A nested message.
    Msg(&'static str, &'static [(u64, Field)]),
    /// A repeated nested message.
    RepMsg(&'static str, &'static [(u64, Field)]),
    /// A repeated string.
    RepStr(&'static str),
    /// `map<string, string>`.
    MapStr(&'static str),
    /// `map<string, bytes>` (base64 in JSON).
    MapBytes(&'static str),
    /// `meta.v1.Time` (seconds and nanos), as RFC 3339.
    Time(&'static str),
    /// `intstr.IntOrString` (type = 1, intVal = 2, strVal = 3), as a JSON number or string.
    IntOrStr(&'static str),
}

use Field::{Bool, Int, IntOrStr, MapBytes, MapStr, Msg, RepMsg, RepStr, Str, Time};

const OWNER_REFERENCE: &[(u64, Field)] = &[
    (1, Str("kind")),
    (3, Str("name")),
    (4, Str("uid")),
    (5, Str("apiVersion")),
    (6, Bool("controller")),
    (7, Bool("blockOwnerDeletion")),
];

const OBJECT_META: &[(u64, Field)] = &[
    (1, Str("name")),
    (2, Str("generateName")),
    (3, Str("namespace")),
    (5, Str("uid")),
    (6, Str("resourceVersion")),
    (7, Int("generation")),
    (8, Time("creationTimestamp")),
    (11, MapStr("labels")),
    (12, MapStr("annotations")),
    (13, RepMsg("ownerReferences", OWNER_REFERENCE)),
    (14, RepStr("finalizers")),
];

const NAMESPACE_SPEC: &[(u64, Field)] = &[(1, RepStr("finalizers"))];

const NAMESPACE: &[(u64, Field)] = &[
    (1, Msg("metadata", OBJECT_META)),
    (2, Msg("spec", NAMESPACE_SPEC)),
];

const CONFIG_MAP: &[(u64, Field)] = &[
    (1, Msg("metadata", OBJECT_META)),
    (2, MapStr("data")),
    (3, MapBytes("binaryData")),
    (4, Bool("immutable")),
];

const SECRET: &[(u64, Field)] = &[
    (1, Msg("metadata", OBJECT_META)),
    (2, MapBytes("data")),
    (3, Str("type")),
    (4, MapStr("stringData")),
    (5, Bool("immutable")),
];

const PRIORITY_CLASS: &[(u64, Field)] = &[
    (1, Msg("metadata", OBJECT_META)),
    (2, Int("value")),
    (3, Bool("globalDefault")),
    (4, Str("description")),
    (5, Str("preemptionPolicy")),
];

const LOCAL_OBJECT_REFERENCE: &[(u64, Field)] = &[(1, Str("name"))];

const OBJECT_REFERENCE: &[(u64, Field)] = &[
    (1, Str("kind")),
    (2, Str("namespace")),
    (3, Str("name")),
    (4, Str("uid")),
    (5, Str("apiVersion")),
    (6, Str("resourceVersion")),
    (7, Str("fieldPath")),
];

const SERVICE_ACCOUNT: &[(u64, Field)] = &[
    (1, Msg("metadata", OBJECT_META)),
    (2, RepMsg("secrets", OBJECT_REFERENCE)),
    (3, RepMsg("imagePullSecrets", LOCAL_OBJECT_REFERENCE)),
    (4, Bool("automountServiceAccountToken")),
];

const LABEL_SELECTOR_REQUIREMENT: &[(u64, Field)] =
    &[(1, Str("key")), (2, Str("operator")), (3, RepStr("values"))];

const LABEL_SELECTOR: &[(u64, Field)] = &[
    (1, MapStr("matchLabels")),
    (2, RepMsg("matchExpressions", LABEL_SELECTOR_REQUIREMENT)),
];

const SERVICE_PORT: &[(u64, Field)] = &[
    (1, Str("name")),
    (2, Str("protocol")),
    (3, Int("port")),
    (4, IntOrStr("targetPort")),
    (5, Int("nodePort")),
    (6, Str("appProtocol")),
];

const CLIENT_IP_CONFIG: &[(u64, Field)] = &[(1, Int("timeoutSeconds"))];

const SESSION_AFFINITY_CONFIG: &[(u64, Field)] = &[(1, Msg("clientIP", CLIENT_IP_CONFIG))];

const SERVICE_SPEC: &[(u64, Field)] = &[
    (1, RepMsg("ports", SERVICE_PORT)),
    (2, MapStr("selector")),
    (3, Str("clusterIP")),
    (4, Str("type")),
    (5, RepStr("externalIPs")),
    (7, Str("sessionAffinity")),
    (8, Str("loadBalancerIP")),
    (9, RepStr("loadBalancerSourceRanges")),
    (10, Str("externalName")),
    (11, Str("externalTrafficPolicy")),
    (12, Int("healthCheckNodePort")),
    (13, Bool("publishNotReadyAddresses")),
    (14, Msg("sessionAffinityConfig", SESSION_AFFINITY_CONFIG)),
    (17, Str("ipFamilyPolicy")),
    (18, RepStr("clusterIPs")),
    (19, RepStr("ipFamilies")),
    (20, Bool("allocateLoadBalancerNodePorts")),
    (21, Str("loadBalancerClass")),
    (22, Str("internalTrafficPolicy")),
    (23, Str("trafficDistribution")),
];

const SERVICE: &[(u64, Field)] = &[
    (1, Msg("metadata", OBJECT_META)),
    (2, Msg("spec", SERVICE_SPEC)),
];

const POLICY_RULE: &[(u64, Field)] = &[
    (1, RepStr("verbs")),
    (2, RepStr("apiGroups")),
    (3, RepStr("resources")),
    (4, RepStr("resourceNames")),
    (5, RepStr("nonResourceURLs")),
];

const AGGREGATION_RULE: &[(u64, Field)] = &[(1, RepMsg("clusterRoleSelectors", LABEL_SELECTOR))];

/// Role, and ClusterRole (whose aggregationRule a Role never carries).
const ROLE: &[(u64, Field)] = &[
    (1, Msg("metadata", OBJECT_META)),
    (2, RepMsg("rules", POLICY_RULE)),
    (3, Msg("aggregationRule", AGGREGATION_RULE)),
];

const SUBJECT: &[(u64, Field)] = &[
    (1, Str("kind")),
    (2, Str("apiGroup")),
    (3, Str("name")),
    (4, Str("namespace")),
];

const ROLE_REF: &[(u64, Field)] = &[(1, Str("apiGroup")), (2, Str("kind")), (3, Str("name"))];

/// RoleBinding and ClusterRoleBinding.
const ROLE_BINDING: &[(u64, Field)] = &[
    (1, Msg("metadata", OBJECT_META)),
    (2, RepMsg("subjects", SUBJECT)),
    (3, Msg("roleRef", ROLE_REF)),
];

const POD_DISRUPTION_BUDGET_SPEC: &[(u64, Field)] = &[
    (1, IntOrStr("minAvailable")),
    (2, Msg("selector", LABEL_SELECTOR)),
    (3, IntOrStr("maxUnavailable")),
    (4, Str("unhealthyPodEvictionPolicy")),
];

const POD_DISRUPTION_BUDGET: &[(u64, Field)] = &[
    (1, Msg("metadata", OBJECT_META)),
    (2, Msg("spec", POD_DISRUPTION_BUDGET_SPEC)),
];

/// The message layout of a kind this decoder knows.
fn layout(api_version: &str, kind: &str) -> Option<&'static [(u64, Field)]> {
    Some(match (api_version, kind) {
        ("v1", "Namespace") => NAMESPACE,
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "Secret") => SECRET,
        ("v1", "ServiceAccount") => SERVICE_ACCOUNT,
        ("scheduling.k8s.io/v1", "PriorityClass") => PRIORITY_CLASS,
        ("v1", "Service") => SERVICE,
        ("rbac.authorization.k8s.io/v1", "Role" | "ClusterRole") => ROLE,
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => ROLE_BINDING,
        ("policy/v1", "PodDisruptionBudget") => POD_DISRUPTION_BUDGET,
        _ => return None,
    })
}

/// Decodes a protobuf request body to the object's JSON.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let bad = |why: &str| {
        ApiError::bad_request(format!(
            "the body of the request is not a valid protobuf object: {why}"
        ))
    };
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("no k8s envelope"))?;
    // runtime.Unknown: typeMeta = 1 {apiVersion = 1, kind = 2}, raw = 2.
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for f in fields(rest).map_err(|e| bad(&e))? {
        match (f.number, f.value) {
            (1, Wire::Len(type_meta)) => {
                for t in fields(type_meta).map_err(|e| bad(&e))? {
                    match (t.number, t.value) {
                        (1, Wire::Len(b)) => api_version = text(b),
                        (2, Wire::Len(b)) => kind = text(b),
                        _ => {}
                    }
                }
            }
            (2, Wire::Len(b)) => raw = b,
            _ => {}
        }
    }
    let Some(layout) = layout(&api_version, &kind) else {
        let mut e = ApiError::unsupported_media_type(
            "application/vnd.kubernetes.protobuf",
            &["application/json", "application/yaml"],
        );
        e.message = format!(
            "this server decodes protobuf only for Namespace, ConfigMap, Secret, ServiceAccount, \
             PriorityClass, Service, Role, ClusterRole, RoleBinding, ClusterRoleBinding and \
             PodDisruptionBudget, not {api_version} {kind}: send it as JSON (kubectl apply -f, or \
             kubectl create ... --dry-run=client -o yaml | kubectl apply -f -)"
        );
        return Err(e);
    };
    let mut obj = message(raw, layout).map_err(|e| bad(&e))?;
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    Ok(Value::Object(obj))
}

/// One field on the wire.
struct WireField<'a> {
    number: u64,
    value: Wire<'a>,
}

enum Wire<'a> {
    Varint(u64),
    Len(&'a [u8]),
    Fixed,
}

fn varint(b: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at).ok_or("truncated varint")?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint too long".into())
}

fn fields(b: &[u8]) -> Result<Vec<WireField<'_>>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < b.len() {
        let key = varint(b, &mut at)?;
        let number = key >> 3;
        let value = match key & 7 {
            0 => Wire::Varint(varint(b, &mut at)?),
            2 => {
                let len = usize::try_from(varint(b, &mut at)?).map_err(|e| e.to_string())?;
                let end = at
                    .checked_add(len)
                    .filter(|e| *e <= b.len())
                    .ok_or("truncated field")?;
                let v = &b[at..end];
                at = end;
                Wire::Len(v)
            }
            1 => {
                at += 8;
                Wire::Fixed
            }
            5 => {
                at += 4;
                Wire::Fixed
            }
            other => return Err(format!("wire type {other} of field {number}")),
        };
        if at > b.len() {
            return Err("truncated field".into());
        }
        out.push(WireField { number, value });
    }
    Ok(out)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A map entry: key = 1, value = 2.
fn entry(b: &[u8]) -> Result<(String, &[u8]), String> {
    let mut key = String::new();
    let mut value: &[u8] = &[];
    for f in fields(b)? {
        match (f.number, f.value) {
            (1, Wire::Len(k)) => key = text(k),
            (2, Wire::Len(v)) => value = v,
            _ => {}
        }
    }
    Ok((key, value))
}

fn message(b: &[u8], layout: &[(u64, Field)]) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for f in fields(b)? {
        let Some((_, field)) = layout.iter().find(|(n, _)| *n == f.number) else {
            continue;
        };
        match (*field, f.value) {
            // Go writes an unset optional string as ""; its JSON leaves it out (omitempty).
            (Str(_), Wire::Len([])) => {}
            (Str(name), Wire::Len(v)) => {
                out.insert(name.into(), json!(text(v)));
            }
            (Int(name), Wire::Varint(v)) => {
                // int32 and int64 travel as two's complement in 64 bits.
                out.insert(name.into(), json!(v as i64));
            }
            (Bool(name), Wire::Varint(v)) => {
                out.insert(name.into(), json!(v != 0));
            }
            (Msg(name, inner), Wire::Len(v)) => {
                out.insert(name.into(), Value::Object(message(v, inner)?));
            }
            (RepMsg(name, inner), Wire::Len(v)) => {
                let item = Value::Object(message(v, inner)?);
                push(&mut out, name, item);
            }
            (RepStr(name), Wire::Len(v)) => push(&mut out, name, json!(text(v))),
            (MapStr(name), Wire::Len(v)) => {
                let (k, val) = entry(v)?;
                insert(&mut out, name, k, json!(text(val)));
            }
            (MapBytes(name), Wire::Len(v)) => {
                let (k, val) = entry(v)?;
                let b64 = base64::engine::general_purpose::STANDARD.encode(val);
                insert(&mut out, name, k, json!(b64));
            }
            (Time(name), Wire::Len(v)) => {
                let mut secs = 0i64;
                for t in fields(v)? {
                    if let (1, Wire::Varint(s)) = (t.number, t.value) {
                        secs = s as i64;
                    }
                }
                out.insert(name.into(), json!(crate::time::format_rfc3339(secs)));
            }
            (IntOrStr(name), Wire::Len(v)) => {
                let (mut is_string, mut int, mut string) = (false, 0i64, String::new());
                for t in fields(v)? {
                    match (t.number, t.value) {
                        (1, Wire::Varint(k)) => is_string = k == 1,
                        (2, Wire::Varint(i)) => int = i as i64,
                        (3, Wire::Len(s)) => string = text(s),
                        _ => {}
                    }
                }
                let value = if is_string { json!(string) } else { json!(int) };
                out.insert(name.into(), value);
            }
            (field, _) => return Err(format!("field {} has the wrong wire type", name_of(field))),
        }
    }
    Ok(out)
}

fn name_of(f: Field) -> &'static str {
    match f {
        Str(n)
        | Int(n)
        | Bool(n)
        | Msg(n, _)
        | RepMsg(n, _)
        | RepStr(n)
        | MapStr(n)
        | MapBytes(n)
        | Time(n)
        | IntOrStr(n) => n,
    }
}

fn push(out: &mut Map<String, Value>, name: &str, item: Value) {
    let list = out.entry(name).or_insert_with(|| json!([]));
    if let Some(a) = list.as_array_mut() {
        a.push(item);
    }
}

fn insert(out: &mut Map<String, Value>, name: &str, key: String, value: Value) {
    let map = out.entry(name).or_insert_with(|| json!({}));
    if let Some(m) = map.as_object_mut() {
        m.insert(key, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(number: u64, wire: u64) -> Vec<u8> {
        varint_bytes((number << 3) | wire)
    }

    fn varint_bytes(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    fn len(number: u64, body: &[u8]) -> Vec<u8> {
        let mut out = key(number, 2);
        out.extend(varint_bytes(body.len() as u64));
        out.extend_from_slice(body);
        out
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut type_meta = len(1, api_version.as_bytes());
        type_meta.extend(len(2, kind.as_bytes()));
        let mut out = MAGIC.to_vec();
        out.extend(len(1, &type_meta));
        out.extend(len(2, raw));
        out
    }

    #[test]
    fn a_priority_class_with_a_negative_value_and_an_unknown_field_decodes() {
        let mut meta = len(1, b"low");
        let mut label = len(1, b"tier");
        label.extend(len(2, b"batch"));
        meta.extend(len(11, &label));
        let mut raw = len(1, &meta);
        raw.extend(key(2, 0));
        raw.extend(varint_bytes((-5i64) as u64));
        raw.extend(len(99, b"a field this server does not know"));
        let obj = decode(&envelope("scheduling.k8s.io/v1", "PriorityClass", &raw)).unwrap();
        assert_eq!(
            obj,
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                   "metadata": {"name": "low", "labels": {"tier": "batch"}}, "value": -5})
        );
    }

    #[test]
    fn int_or_string_fields_decode_to_numbers_or_strings_and_empty_strings_are_left_out() {
        let int_or_str = |text: Option<&str>, int: u64| {
            let mut b = key(1, 0);
            b.extend(varint_bytes(u64::from(text.is_some())));
            b.extend(key(2, 0));
            b.extend(varint_bytes(int));
            b.extend(len(3, text.unwrap_or_default().as_bytes()));
            b
        };
        let mut spec = len(1, &int_or_str(Some("50%"), 0));
        spec.extend(len(3, &int_or_str(None, 2)));
        spec.extend(len(4, b""));
        let mut raw = len(1, &len(1, b"budget"));
        raw.extend(len(2, &spec));
        let obj = decode(&envelope("policy/v1", "PodDisruptionBudget", &raw)).unwrap();
        assert_eq!(
            obj["spec"],
            json!({"minAvailable": "50%", "maxUnavailable": 2}),
            "an empty unhealthyPodEvictionPolicy is not set"
        );
    }

    #[test]
    fn a_truncated_body_is_a_bad_request_and_an_unknown_kind_a_415() {
        let raw = len(1, &len(1, b"x"));
        let mut cut = envelope("v1", "ConfigMap", &raw);
        cut.truncate(cut.len() - 2);
        assert_eq!(decode(&cut).unwrap_err().code, 400);
        assert_eq!(decode(b"{}").unwrap_err().code, 400);
        let e = decode(&envelope("apps/v1", "Deployment", &raw)).unwrap_err();
        assert_eq!(e.code, 415);
        assert!(e.message.contains("apps/v1 Deployment"), "{}", e.message);
    }
}
