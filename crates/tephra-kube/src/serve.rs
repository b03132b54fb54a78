//! The scheduler's own HTTP endpoints: `/metrics` (Prometheus text), `/healthz` (the process
//! serves), `/readyz` (every watcher has delivered its first list) and the web UI under `/ui/`
//! ([`crate::ui`]).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// What the endpoints report.
#[derive(Clone)]
pub struct Health {
    /// Set once every watcher has synced.
    pub ready: Arc<AtomicBool>,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// The web UI, where this process serves one (the scheduler).
    pub ui: Option<crate::ui::Ui>,
}

fn reply(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

fn route(h: &Health, path: &str, peer: Option<SocketAddr>) -> Response<Full<Bytes>> {
    if let Some((status, kind, body)) =
        h.ui.as_ref()
            .and_then(|ui| crate::ui::route(ui, path, peer))
    {
        let mut r = Response::new(Full::new(body));
        *r.status_mut() = status;
        if let Ok(v) = kind.parse() {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        return r;
    }
    match path {
        "/metrics" => reply(
            StatusCode::OK,
            "text/plain; version=0.0.4",
            h.metrics.render(),
        ),
        "/healthz" | "/livez" => reply(StatusCode::OK, "text/plain", "ok".into()),
        "/readyz" if h.ready.load(Ordering::SeqCst) => {
            reply(StatusCode::OK, "text/plain", "ok".into())
        }
        "/readyz" => reply(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "watchers have not synced yet".into(),
        ),
        _ => reply(StatusCode::NOT_FOUND, "text/plain", "not found".into()),
    }
}

/// Binds `addr` and serves the endpoints until the task is dropped. Returns the bound address
/// (a port of 0 picks a free one) and the server task.
pub async fn start(
    addr: SocketAddr,
    h: Health,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, peer)) = listener.accept().await else {
                continue;
            };
            let h = h.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let r = route(&h, req.uri().path(), Some(peer));
                    async move { Ok::<_, Infallible>(r) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok((local, task))
}
