//! The extender tests' kube-scheduler stand-in: it calls the extender's verbs over HTTP as
//! kube-scheduler's extender client does (`filter`, `prioritize`, then `bind`).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod fleet;

use std::net::SocketAddr;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};
use tephra_extender::wire::{ExtenderBindingResult, ExtenderFilterResult, HostPriorityList};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// POSTs raw bytes to the extender; the status line and the body.
pub async fn post_raw(addr: SocketAddr, verb: &str, body: &[u8]) -> (String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /{verb} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (
        head.lines().next().unwrap_or_default().to_string(),
        body.to_string(),
    )
}

/// POSTs `body` to the extender, as kube-scheduler's HTTP client does, and decodes the answer.
pub async fn post<T: serde::de::DeserializeOwned>(addr: SocketAddr, verb: &str, body: &Value) -> T {
    let body = serde_json::to_vec(body).unwrap();
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /{verb} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&body).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{verb}: {e}: {body}"))
}

/// One scheduling cycle of kube-scheduler for `pod` with the extender, then its bind; returns
/// the bind's error ("" when bound). `cache` picks `nodeCacheCapable`.
pub async fn schedule(
    addr: SocketAddr,
    names: &[&str],
    nodes: &[Node],
    pod: &Pod,
    cache: bool,
) -> Result<String, String> {
    let args = if cache {
        json!({"Pod": pod, "Nodes": null, "NodeNames": names})
    } else {
        json!({"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": null})
    };
    let filtered: ExtenderFilterResult = post(addr, "filter", &args).await;
    if !filtered.error.is_empty() {
        return Err(filtered.error);
    }
    let passed: Vec<String> = if cache {
        filtered.node_names.unwrap_or_default()
    } else {
        filtered
            .nodes
            .map(|l| {
                l.items
                    .into_iter()
                    .filter_map(|n| n.metadata.name)
                    .collect()
            })
            .unwrap_or_default()
    };
    if passed.is_empty() {
        return Err(format!(
            "unschedulable: {:?}",
            filtered.failed_and_unresolvable_nodes
        ));
    }
    let mut prio_args = args.clone();
    if cache {
        prio_args["NodeNames"] = json!(passed);
    }
    let scores: HostPriorityList = post(addr, "prioritize", &prio_args).await;
    let best = scores
        .iter()
        .filter(|h| passed.contains(&h.host))
        .max_by_key(|h| h.score)
        .map(|h| h.host.clone())
        .unwrap();
    let bound: ExtenderBindingResult = post(
        addr,
        "bind",
        &json!({
            "PodName": pod.metadata.name, "PodNamespace": pod.metadata.namespace,
            "PodUID": pod.metadata.uid, "Node": best
        }),
    )
    .await;
    Ok(bound.error)
}
