//! The HTTPS listener of one API server: TLS on loopback, bearer-token auth (anything else gets
//! 401; `/version` and the health checks are public, as on a real server; service accounts'
//! tokens are authorized by RBAC, see `authz`), routing to discovery, openapi and resource
//! handlers, and the member-level faults (stop answering: connection refused; answer every
//! request with a 5xx).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::api::ApiServer;
use crate::authz;
use crate::discovery;
use crate::error::Error;
use crate::http::{self, Body, Req, bytes_reply, error_reply, json_reply};
use crate::kubeconfig::Entry;
use crate::openapi;
use crate::router::{self, Route};
use crate::status::ApiError;
use crate::tls::Certs;

const MAX_BODY: usize = 64 << 20;

/// A running API server.
pub struct Server {
    /// The server's state.
    pub api: Arc<ApiServer>,
    addr: SocketAddr,
    token: Arc<std::sync::RwLock<String>>,
    ca_pem: String,
    acceptor: TlsAcceptor,
    openapi: Arc<openapi::Cache>,
    listener: Mutex<Option<JoinHandle<()>>>,
    connections: watch::Sender<u64>,
}

fn bind(addr: SocketAddr) -> Result<TcpListener, Error> {
    let err = |source| Error::Bind {
        addr: addr.to_string(),
        source,
    };
    let socket = TcpSocket::new_v4().map_err(err)?;
    socket.set_reuseaddr(true).map_err(err)?;
    socket.bind(addr).map_err(err)?;
    socket.listen(1024).map_err(err)
}

impl Server {
    /// Binds `addr` (port 0 picks a free port) and starts serving `api`.
    pub fn start(
        api: Arc<ApiServer>,
        addr: SocketAddr,
        certs: &Certs,
        token: String,
    ) -> Result<Arc<Self>, Error> {
        let listener = bind(addr)?;
        let addr = listener.local_addr().map_err(|source| Error::Bind {
            addr: addr.to_string(),
            source,
        })?;
        let (connections, _) = watch::channel(0);
        let _ = api.kubelet_client.set(certs.kubelet_client()?);
        let server = Arc::new(Self {
            api,
            addr,
            token: Arc::new(std::sync::RwLock::new(token)),
            ca_pem: certs.ca_pem.clone(),
            acceptor: certs.acceptor()?,
            openapi: Arc::new(openapi::Cache::default()),
            listener: Mutex::new(None),
            connections,
        });
        server.spawn_listener(listener);
        tracing::info!(server = %server.api.name, %addr, "API server listening");
        Ok(server)
    }

    fn spawn_listener(self: &Arc<Self>, listener: TcpListener) {
        let me = self.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let acceptor = me.acceptor.clone();
                let api = me.api.clone();
                let token = Arc::clone(&me.token);
                let docs = me.openapi.clone();
                let mut kill = me.connections.subscribe();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = service_fn(move |req| {
                        let api = api.clone();
                        let token = token.read().unwrap_or_else(|e| e.into_inner()).clone();
                        let docs = docs.clone();
                        async move { Ok::<_, Infallible>(dispatch(&api, &token, &docs, req).await) }
                    });
                    let conn = http1::Builder::new().serve_connection(TokioIo::new(tls), service);
                    tokio::select! {
                        _ = conn => {}
                        _ = kill.changed() => {}
                    }
                });
            }
        });
        let mut slot = self.listener.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = slot.replace(task) {
            old.abort();
        }
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Its bearer token.
    pub fn token(&self) -> String {
        self.token.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A new bearer token, as when a cluster is rebuilt: the old one, and every service account
    /// token issued before, get 401 from now on, and open connections (watches) are closed.
    /// Returns the new token.
    pub fn rotate_token(&self) -> String {
        let fresh = crate::kubeconfig::token();
        self.api.users.revoke_all();
        *self.token.write().unwrap_or_else(|e| e.into_inner()) = fresh.clone();
        self.connections.send_modify(|g| *g += 1);
        fresh
    }

    /// A kubeconfig entry for a service account of this server: its own token, authorized by
    /// the RBAC objects stored here.
    pub fn service_account_entry(&self, namespace: &str, name: &str) -> Entry {
        Entry {
            token: self.api.users.service_account(namespace, name),
            ..self.entry()
        }
    }

    /// Its kubeconfig entry.
    pub fn entry(&self) -> Entry {
        Entry {
            name: self.api.name.clone(),
            server: self.url(),
            token: self.token(),
            ca_pem: self.ca_pem.clone(),
        }
    }

    /// Stops answering: the port is closed (connection refused) and open connections drop.
    pub async fn stop(&self) {
        let task = self
            .listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        self.connections.send_modify(|g| *g += 1);
        if let Some(task) = task {
            task.abort();
            // Returns once the accept loop, and with it the listening socket, is dropped.
            let _ = task.await;
        }
    }

    /// Like [`Server::stop`], without waiting for the socket to close.
    pub fn stop_now(&self) {
        if let Some(task) = self
            .listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            task.abort();
        }
        self.connections.send_modify(|g| *g += 1);
    }

    /// Whether it is listening.
    pub fn is_listening(&self) -> bool {
        self.listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Listens again on the same port after [`Server::stop`].
    pub async fn resume(self: &Arc<Self>) -> Result<(), Error> {
        if self.is_listening() {
            return Ok(());
        }
        // The aborted accept loop releases the port once it has been dropped.
        let mut last = None;
        for _ in 0..50 {
            match bind(self.addr) {
                Ok(l) => {
                    self.spawn_listener(l);
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        Err(last.unwrap_or_else(|| Error::Bind {
            addr: self.addr.to_string(),
            source: std::io::Error::other("the port stayed busy"),
        }))
    }

    /// Answers every request with `code` (a 5xx) until [`Server::clear_failure`].
    pub fn fail_with(&self, code: u16) {
        self.api.fault.store(code, Ordering::SeqCst);
    }

    /// Answers normally again.
    pub fn clear_failure(&self) {
        self.api.fault.store(0, Ordering::SeqCst);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(task) = self
            .listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            task.abort();
        }
        self.connections.send_modify(|g| *g += 1);
    }
}

fn header(req: &Request<Incoming>, name: &str) -> String {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

async fn dispatch(
    api: &Arc<ApiServer>,
    token: &str,
    docs: &openapi::Cache,
    req: Request<Incoming>,
) -> Response<Body> {
    api.count_request();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let route = router::route(&path);
    let public = matches!(route, Route::Version | Route::Health);
    // A public path needs no credentials, but bad ones are refused there too, as
    // kube-apiserver's authentication does before any authorization.
    let presented = !header(&req, "authorization").is_empty();
    let user = if public && !presented {
        Ok(None)
    } else {
        authorize(api, token, &req, &route)
    };
    let resp = match user {
        Err(denied) => error_reply(&denied),
        Ok(_) if api.fault.load(Ordering::SeqCst) != 0 => {
            error_reply(&ApiError::injected(api.fault.load(Ordering::SeqCst)))
        }
        Ok(user) => route_request(api, docs, route, req, user).await,
    };
    tracing::debug!(server = %api.name, %method, %path, status = resp.status().as_u16(), "request");
    resp
}

/// 401 for a request without a known token; 403 for a resource request RBAC does not allow.
/// The user RBAC judged, for the checks admission makes on their behalf (None: a master).
fn authorize(
    api: &ApiServer,
    admin_token: &str,
    req: &Request<Incoming>,
    route: &Route,
) -> Result<Option<authz::User>, ApiError> {
    let auth = header(req, "authorization");
    let Some(bearer) = auth.strip_prefix("Bearer ") else {
        return Err(ApiError::unauthorized());
    };
    if bearer == admin_token {
        return Ok(None);
    }
    let user = api.users.get(bearer).ok_or_else(ApiError::unauthorized)?;
    let Route::Resource(path) = route else {
        return Ok(None);
    };
    if user.is_master() {
        return Ok(None);
    }
    let query = http::parse_query(req.uri().query().unwrap_or_default());
    let watch = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
    let fields = query.get("fieldSelector").map(String::as_str);
    let Some(attrs) = authz::Attributes::of(req.method(), path, watch, fields) else {
        // No RBAC verb: refused rather than let through unchecked.
        return Err(ApiError::method_not_allowed());
    };
    let allowed = authz::allowed(&api.store, &user, &attrs);
    api.access.record(&user, &attrs, allowed);
    if allowed {
        Ok(Some(user))
    } else {
        Err(ApiError::forbidden(
            &attrs.group,
            &attrs.resource,
            attrs.name.as_deref().unwrap_or_default(),
            &attrs.denial(&user),
        ))
    }
}

async fn route_request(
    api: &Arc<ApiServer>,
    docs: &openapi::Cache,
    route: Route,
    req: Request<Incoming>,
    user: Option<authz::User>,
) -> Response<Body> {
    let aggregated = header(&req, "accept").contains("as=APIGroupDiscoveryList");
    let reg = api.registry();
    match route {
        Route::Version => json_reply(200, &discovery::version(), &[]),
        Route::Health => bytes_reply(
            200,
            Bytes::from_static(b"ok"),
            "text/plain; charset=utf-8",
            &[],
        ),
        Route::Api if aggregated => {
            json_bytes_reply(&discovery::aggregated(&reg, true), discovery::AGGREGATED)
        }
        Route::Api => json_reply(200, &discovery::legacy_api(), &[]),
        Route::Apis if aggregated => {
            json_bytes_reply(&discovery::aggregated(&reg, false), discovery::AGGREGATED)
        }
        Route::Apis => json_reply(200, &discovery::legacy_apis(&reg), &[]),
        Route::Group(g) => match discovery::legacy_group(&reg, &g) {
            Some(v) => json_reply(200, &v, &[]),
            None => error_reply(&ApiError::no_route()),
        },
        Route::GroupVersion(g, v) => match discovery::resource_list(&reg, &g, &v) {
            Some(v) => json_reply(200, &v, &[]),
            None => error_reply(&ApiError::no_route()),
        },
        Route::OpenApiIndex => {
            bytes_reply(200, docs.get(&reg).index.clone(), "application/json", &[])
        }
        Route::OpenApiDoc(p) => match docs.get(&reg).docs.get(&p) {
            Some(b) => bytes_reply(200, b.clone(), "application/json", &[]),
            None => error_reply(&ApiError::no_route()),
        },
        Route::OpenApiV2 => {
            bytes_reply(200, openapi::v2_document(), "application/octet-stream", &[])
        }
        Route::Unknown => error_reply(&ApiError::no_route()),
        Route::Resource(path) => {
            let query = http::parse_query(req.uri().query().unwrap_or_default());
            let accept = header(&req, "accept");
            let content_type = header(&req, "content-type");
            let user_agent = header(&req, "user-agent");
            let method = req.method().clone();
            let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
                Ok(b) => b.to_bytes(),
                Err(e) => {
                    return error_reply(&ApiError::bad_request(format!("reading the body: {e}")));
                }
            };
            let r = Req {
                method,
                query,
                accept,
                content_type,
                user_agent,
                body,
                user,
            };
            crate::handlers::resource(api, path, r).await
        }
    }
}

fn json_bytes_reply(value: &serde_json::Value, content_type: &str) -> Response<Body> {
    bytes_reply(
        200,
        Bytes::from(serde_json::to_vec(value).unwrap_or_default()),
        content_type,
        &[],
    )
}
