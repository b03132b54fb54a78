//! `GET pods/{name}/log`: no container here runs a process, so a container's log is what the
//! simulated kubelet did with it, with times: started (image, node), how long it is set to run
//! (`tephra.io/sim-duration`), and how it ended. The refusals are kube-apiserver's: a pod with
//! several containers needs `?container=`, a container the pod lacks is invalid, and one that
//! has not started is waiting. A pod on a node whose kubelet is served elsewhere (a virtual
//! kubelet) has its log asked of that kubelet (`kubelet_proxy.rs`).

use serde_json::Value;

use crate::api::ApiServer;
use crate::http::{Body, Req, bytes_reply};
use crate::resource::Builtin;
use crate::status::ApiError;
use crate::store::Key;

/// Serves one container's log.
pub async fn serve(
    api: &ApiServer,
    key: &Key,
    req: &Req,
) -> Result<hyper::Response<Body>, ApiError> {
    let def = api.builtin(Builtin::Pod);
    let pod = api
        .get(&def, key)
        .ok_or_else(|| ApiError::not_found("", "pods", &key.1))?;
    let container = container_of(&pod.value, &key.1, req.q("container"))?;
    let node = pod
        .value
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let elsewhere = (!node.is_empty())
        .then(|| crate::kubelet_proxy::node(api, node))
        .flatten()
        .and_then(|n| crate::kubelet_proxy::endpoint(&n));
    if let Some(at) = elsewhere {
        return crate::kubelet_proxy::log(api, at, &key.0, &key.1, &container, req).await;
    }
    let text = log_of(&pod.value, &key.1, Some(&container))?;
    Ok(bytes_reply(
        200,
        bytes::Bytes::from(text),
        "text/plain",
        &[],
    ))
}

/// The container `container` names, or the pod's only one; refused as kube-apiserver refuses.
fn container_of(pod: &Value, name: &str, container: Option<&str>) -> Result<String, ApiError> {
    let names: Vec<&str> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("name").and_then(Value::as_str))
        .collect();
    match (container.filter(|c| !c.is_empty()), names.as_slice()) {
        (Some(c), _) if names.contains(&c) => Ok(c.to_string()),
        (Some(c), _) => Err(ApiError::bad_request(format!(
            "container {c} is not valid for pod {name}"
        ))),
        (None, [only]) => Ok(only.to_string()),
        (None, _) => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            names.join(" ")
        ))),
    }
}

/// The log text of the container `container` names (or the pod's only one).
pub fn log_of(pod: &Value, name: &str, container: Option<&str>) -> Result<String, ApiError> {
    let container = container_of(pod, name, container)?;
    let container = container.as_str();
    let text = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or_default();
    if text("/spec/nodeName").is_empty() {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    let status = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|s| s.get("name").and_then(Value::as_str) == Some(container));
    let state = status.and_then(|s| s.get("state"));
    let started = state.and_then(|s| {
        s.pointer("/running/startedAt")
            .or_else(|| s.pointer("/terminated/startedAt"))
            .and_then(Value::as_str)
    });
    let Some(started) = started else {
        return Err(ApiError::bad_request(format!(
            "container \"{container}\" in pod \"{name}\" is waiting to start: ContainerCreating"
        )));
    };
    let image = status
        .and_then(|s| s.get("image"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut out = format!(
        "{started} [tephra devcluster] simulated container {container} (image {image}) started on node {}\n",
        text("/spec/nodeName")
    );
    let annotation = |k: &str| {
        pod.pointer(&format!("/metadata/annotations/{}", k.replace('/', "~1")))
            .and_then(Value::as_str)
    };
    match annotation(tephra_api::well_known::SIM_DURATION) {
        Some(d) => {
            let code = annotation(tephra_api::well_known::SIM_EXIT_CODE).unwrap_or("0");
            out += &format!(
                "{started} [tephra devcluster] it runs for {d} ({}) and then exits with code {code}\n",
                tephra_api::well_known::SIM_DURATION
            );
        }
        None => {
            out += &format!(
                "{started} [tephra devcluster] it runs until deleted (set {} to end it)\n",
                tephra_api::well_known::SIM_DURATION
            );
        }
    }
    if let Some(t) = state.and_then(|s| s.get("terminated")) {
        let finished = t
            .get("finishedAt")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let code = t
            .get("exitCode")
            .and_then(Value::as_i64)
            .unwrap_or_default();
        let reason = t.get("reason").and_then(Value::as_str).unwrap_or_default();
        out += &format!(
            "{finished} [tephra devcluster] container {container} exited with code {code} ({reason})\n"
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(containers: &[&str], node: &str, status: Value) -> Value {
        let cs: Vec<Value> = containers
            .iter()
            .map(|c| json!({"name": c, "image": "busybox"}))
            .collect();
        json!({"metadata": {"name": "p", "annotations": {"tephra.io/sim-duration": "1h"}},
               "spec": {"containers": cs, "nodeName": node}, "status": status})
    }

    #[test]
    fn a_finished_container_tells_when_it_started_and_how_it_ended() {
        let p = pod(
            &["c"],
            "n1",
            json!({"containerStatuses": [{"name": "c", "image": "busybox",
            "state": {"terminated": {"startedAt": "2026-11-25T10:00:00Z",
                "finishedAt": "2026-11-25T11:00:00Z", "exitCode": 0, "reason": "Completed"}}}]}),
        );
        let log = log_of(&p, "p", None).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines.len(), 3, "{log}");
        assert!(lines[0].starts_with("2026-11-25T10:00:00Z") && lines[0].contains("node n1"));
        assert!(lines[1].contains("runs for 1h"));
        assert!(lines[2].starts_with("2026-11-25T11:00:00Z") && lines[2].contains("code 0"));
    }

    #[test]
    fn refusals_are_the_api_servers() {
        let two = pod(&["a", "b"], "n1", json!({}));
        let e = log_of(&two, "p", None).unwrap_err();
        assert_eq!(
            e.message,
            "a container name must be specified for pod p, choose one of: [a b]"
        );
        assert_eq!(e.code, 400);
        let e = log_of(&two, "p", Some("z")).unwrap_err();
        assert_eq!(e.message, "container z is not valid for pod p");
        let unbound = pod(&["a"], "", json!({}));
        let e = log_of(&unbound, "p", None).unwrap_err();
        assert_eq!(e.message, "pod p does not have a host assigned");
        let waiting = pod(&["a"], "n1", json!({}));
        let e = log_of(&waiting, "p", None).unwrap_err();
        assert!(e.message.contains("is waiting to start"), "{}", e.message);
    }
}
