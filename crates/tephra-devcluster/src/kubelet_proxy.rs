//! Reaching a kubelet served elsewhere: a Node whose `status.daemonEndpoints.kubeletEndpoint`
//! names a port (a virtual kubelet's) is not one of the simulated kubelets', and a pod's log
//! on it is asked of that endpoint, as kube-apiserver asks: HTTPS to the node's first address
//! of the preferred types (Hostname, InternalDNS, InternalIP, ExternalDNS, ExternalIP), the
//! kubelet client certificate presented, `GET /containerLogs/{namespace}/{pod}/{container}`
//! with the log options. The kubelet's error replies become the API server's: 400 a
//! BadRequest, 500 an InternalError, any other code a Status of that code, each with the
//! kubelet's text as its message; a kubelet that cannot be reached is an InternalError.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::Response;
use hyper_util::rt::TokioIo;
use serde_json::Value;

use crate::api::ApiServer;
use crate::http::{Body, ChannelBody, Req};
use crate::resource::Builtin;
use crate::status::ApiError;

/// The order kube-apiserver's `--kubelet-preferred-address-types` gives by default.
const PREFERRED: [&str; 5] = [
    "Hostname",
    "InternalDNS",
    "InternalIP",
    "ExternalDNS",
    "ExternalIP",
];

/// The log options passed on to the kubelet, in kube-apiserver's names.
const LOG_OPTIONS: [&str; 7] = [
    "follow",
    "previous",
    "timestamps",
    "sinceSeconds",
    "sinceTime",
    "tailLines",
    "limitBytes",
];

/// The host and port of the kubelet serving `node`, when one serves it elsewhere.
pub fn endpoint(node: &Value) -> Option<(String, u16)> {
    let port = node
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)?;
    let addresses = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)?;
    let host = PREFERRED.iter().find_map(|kind| {
        addresses
            .iter()
            .find(|a| a.get("type").and_then(Value::as_str) == Some(kind))
            .and_then(|a| a.get("address").and_then(Value::as_str))
            .filter(|a| !a.is_empty())
    })?;
    Some((host.to_string(), port))
}

fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Asks the kubelet at `host:port` for the log of `container` of pod `namespace/name`.
pub async fn log(
    api: &ApiServer,
    (host, port): (String, u16),
    namespace: &str,
    name: &str,
    container: &str,
    req: &Req,
) -> Result<Response<Body>, ApiError> {
    let query: Vec<String> = LOG_OPTIONS
        .iter()
        .filter_map(|k| req.q(k).map(|v| format!("{k}={}", encode(v))))
        .collect();
    let path = format!(
        "/containerLogs/{namespace}/{name}/{container}{}{}",
        if query.is_empty() { "" } else { "?" },
        query.join("&")
    );
    let url = format!("https://{host}:{port}{path}");
    let failed = |e: String| ApiError::internal(format!("Get \"{url}\": {e}"));
    let config = api
        .kubelet_client
        .get()
        .cloned()
        .ok_or_else(|| failed("no kubelet client certificate".into()))?;
    let server_name =
        rustls::pki_types::ServerName::try_from(host.clone()).map_err(|e| failed(e.to_string()))?;
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| failed(e.to_string()))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::clone(&config))
        .connect(server_name, tcp)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| failed(e.to_string()))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let request = hyper::Request::get(path)
        .header(hyper::header::HOST, format!("{host}:{port}"))
        .body(http_body_util::Empty::<Bytes>::new())
        .map_err(|e| failed(e.to_string()))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let status = response.status().as_u16();
    if !(200..=206).contains(&status) {
        let body = response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&body).into_owned();
        return Err(match status {
            400 => ApiError::bad_request(text),
            500 => ApiError::internal(text),
            404 => ApiError {
                code: 404,
                reason: "NotFound",
                message: text,
                details: None,
            },
            code => ApiError {
                code,
                reason: "",
                message: text,
                details: None,
            },
        });
    }
    let content_type = response
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("text/plain")
        .to_string();
    let (tx, body) = ChannelBody::new(16);
    let mut incoming = response.into_body();
    tokio::spawn(async move {
        while let Some(Ok(frame)) = incoming.frame().await {
            if let Ok(data) = frame.into_data()
                && tx.send(data).await.is_err()
            {
                return;
            }
        }
    });
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, content_type)
        .body(body.boxed())
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// The Node `name` stores, if any.
pub fn node(api: &ApiServer, name: &str) -> Option<Value> {
    let def = api.builtin(Builtin::Node);
    api.get(&def, &(String::new(), name.to_string()))
        .map(|o| o.value.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_node_served_elsewhere_names_its_preferred_address_and_port() {
        let n = json!({"status": {
            "addresses": [{"type": "InternalIP", "address": "10.0.0.2"},
                          {"type": "Hostname", "address": "vk"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}});
        assert_eq!(endpoint(&n), Some(("vk".into(), 10250)));
        let simulated = json!({"status": {"addresses": [{"type": "InternalIP", "address": "x"}]}});
        assert_eq!(endpoint(&simulated), None);
        let zero = json!({"status": {"addresses": [{"type": "InternalIP", "address": "x"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}}}});
        assert_eq!(endpoint(&zero), None);
    }

    #[test]
    fn log_options_are_encoded_for_the_kubelet() {
        assert_eq!(encode("2026-11-30T10:00:00Z"), "2026-11-30T10%3A00%3A00Z");
        assert_eq!(encode("10"), "10");
    }
}
