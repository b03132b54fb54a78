//! `pods/binding` (assigns a pod to a node; 409 if it already has one) and `pods/eviction`
//! (deletes a pod unless its PodDisruptionBudget forbids it: 429).

use hyper::Response;
use serde_json::{Value, json};

use crate::api::{ApiServer, DeleteOpts, Scope, WriteOpts, pod_healthy};
use crate::conditions::set_condition;
use crate::http::{Body, Req, json_reply};
use crate::resource::Builtin;
use crate::selector::LabelSelector;
use crate::status::{self, ApiError, Cause};
use crate::store::Key;
use crate::time;
use crate::wire::delete_opts;

fn condition_true(t: &str) -> Value {
    json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": time::now_rfc3339()})
}

/// `POST pods/{name}/binding`.
pub fn bind(api: &ApiServer, key: &Key, req: &Req) -> Result<Response<Body>, ApiError> {
    let body = req.json()?;
    let name = body
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or(&key.1);
    if name != key.1 {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Binding object",
        ));
    }
    let target_kind = body
        .pointer("/target/kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let node = body
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if !(target_kind.is_empty() || target_kind == "Node") || node.is_empty() {
        let field = if node.is_empty() {
            "target.name"
        } else {
            "target.kind"
        };
        return Err(ApiError::invalid_field(
            "",
            "Binding",
            &key.1,
            field,
            if node.is_empty() {
                "Required value"
            } else {
                "Invalid value: must be empty or 'Node'"
            },
        ));
    }
    let annotations = body
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned();
    let def = api.builtin(Builtin::Pod);
    let conflict = |why: String| ApiError::conflict("", "pods/binding", &key.1, &why);
    api.update(&def, key, Scope::All, &WriteOpts::default(), &mut |cur| {
        if cur.pointer("/metadata/deletionTimestamp").is_some() {
            return Err(conflict(format!(
                "pod {} is being deleted, cannot be assigned to a host",
                key.1
            )));
        }
        if let Some(n) = cur
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            return Err(conflict(format!(
                "pod {} is already assigned to node {n:?}",
                key.1
            )));
        }
        if !crate::admit_pod::gates(cur).is_empty() {
            return Err(conflict(format!(
                "pod {} has non-empty .spec.schedulingGates",
                key.1
            )));
        }
        let mut pod = cur.clone();
        pod["spec"]["nodeName"] = json!(node);
        if let Some(a) = &annotations {
            if !pod
                .pointer("/metadata/annotations")
                .is_some_and(Value::is_object)
            {
                pod["metadata"]["annotations"] = json!({});
            }
            for (k, v) in a {
                pod["metadata"]["annotations"][k] = v.clone();
            }
        }
        set_condition(&mut pod, condition_true("PodScheduled"));
        Ok(pod)
    })?;
    Ok(json_reply(201, &status::success(Some(201), None), &[]))
}

/// `POST pods/{name}/eviction`.
pub fn evict(api: &ApiServer, key: &Key, req: &Req) -> Result<Response<Body>, ApiError> {
    let body = req.json()?;
    if let Some(name) = body.pointer("/metadata/name").and_then(Value::as_str)
        && name != key.1
    {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let options = body
        .get("deleteOptions")
        .or_else(|| body.get("delete_options"))
        .filter(|o| o.is_object());
    let mut opts: DeleteOpts = delete_opts(req).unwrap_or_default();
    if let Some(o) = options {
        if let Some(g) = o.get("gracePeriodSeconds").and_then(Value::as_i64) {
            opts.grace = Some(g);
        }
        if o.get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|d| d.iter().any(|x| x == "All"))
        {
            opts.dry_run = true;
        }
    }
    let pods = api.builtin(Builtin::Pod);
    let pod = api
        .get(&pods, key)
        .ok_or_else(|| ApiError::not_found("", "pods", &key.1))?;
    let phase = pod
        .value
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    let ignore_budget = matches!(phase, "Succeeded" | "Failed" | "Pending")
        || pod.value.pointer("/metadata/deletionTimestamp").is_some();
    if !ignore_budget {
        let pdbs = api.builtin(Builtin::Pdb);
        let (all, _) = api.store.list(&pdbs.storage_key(), Some(&key.0), None);
        let matching: Vec<_> = all
            .into_iter()
            .filter(|p| {
                LabelSelector::from_object(p.value.pointer("/spec/selector")).matches(&pod.value)
            })
            .collect();
        if matching.len() > 1 {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource \
                 does not support.",
            ));
        }
        if let Some(pdb) = matching.first() {
            let pdb_name = pdb.key().1;
            let mut refused = None;
            let counts_against = pod_healthy(&pod.value);
            api.update(
                &pdbs,
                &pdb.key(),
                Scope::Status,
                &WriteOpts::default(),
                &mut |cur| {
                    let mut next = cur.clone();
                    let mut st = api.pdb_status(cur);
                    let allowed = st["disruptionsAllowed"].as_i64().unwrap_or(0);
                    if counts_against && allowed <= 0 {
                        refused = Some((
                            st["desiredHealthy"].as_i64().unwrap_or(0),
                            st["currentHealthy"].as_i64().unwrap_or(0),
                        ));
                    } else {
                        refused = None;
                        if counts_against && !opts.dry_run {
                            st["disruptionsAllowed"] = json!(allowed - 1);
                            st["disruptedPods"] = json!({ key.1.clone(): time::now_rfc3339() });
                        }
                    }
                    next["status"] = st;
                    Ok(next)
                },
            )?;
            if let Some((desired, current)) = refused {
                return Err(ApiError::too_many_requests(
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    vec![Cause {
                        reason: "DisruptionBudget".into(),
                        message: format!(
                            "The disruption budget {pdb_name} needs {desired} healthy pods and \
                             has {current} currently"
                        ),
                        field: String::new(),
                    }],
                    0,
                ));
            }
        }
    }
    if !opts.dry_run {
        // kube-apiserver marks the pod (through its status, so no generation and no manager)
        // before it deletes it.
        api.update(
            &pods,
            key,
            Scope::Status,
            &WriteOpts::default(),
            &mut |cur| {
                let mut pod = cur.clone();
                set_condition(
                    &mut pod,
                    json!({"type": "DisruptionTarget", "status": "True", "lastProbeTime": null,
                    "lastTransitionTime": time::now_rfc3339(), "reason": "EvictionByEvictionAPI",
                    "message": "Eviction API: evicting"}),
                );
                Ok(pod)
            },
        )?;
    }
    api.delete(&pods, key, &opts)?;
    Ok(json_reply(201, &status::success(Some(201), None), &[]))
}
