//! The virtual node's kubelet endpoint: HTTPS, the API server's client certificate required
//! (chained to the client CA, common name on the allowed list). `GET
//! /containerLogs/{namespace}/{pod}/{container}` is what the API server asks for `kubectl logs`:
//! the declared pod's `tephra.io/member` label names the member that runs its copy, whose log
//! is streamed back with the same options (`follow`, `previous`, `timestamps`, `sinceSeconds`,
//! `sinceTime`, `tailLines`, `limitBytes`). When there is no copy yet, or the member cannot
//! answer, the reply is an error whose text the API server hands to kubectl (400 as
//! BadRequest): what is wrong and the `kubectl --context <member>` command that reads the log
//! there. Exec, attach and port-forward are answered with the command for the member too.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use futures::{AsyncReadExt, StreamExt};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::clients::Clients;

/// What the endpoint needs: the clusters, the node's name, the client names allowed.
pub(super) struct Endpoint {
    pub(super) clients: Clients,
    pub(super) node: String,
    pub(super) allowed: Vec<String>,
}

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never: Infallible| match never {})
            .boxed_unsync(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Accepts connections until the listener fails.
pub(super) async fn serve(listener: TcpListener, acceptor: TlsAcceptor, endpoint: Arc<Endpoint>) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "virtual kubelet: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let endpoint = Arc::clone(&endpoint);
        tokio::spawn(async move {
            let tls = match acceptor.accept(stream).await {
                Ok(t) => t,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "virtual kubelet: TLS handshake refused");
                    return;
                }
            };
            let who = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(|c| super::tls::common_name(c))
                .unwrap_or_default();
            let service = service_fn(move |req| {
                let endpoint = Arc::clone(&endpoint);
                let who = who.clone();
                async move { Ok::<_, Infallible>(endpoint.answer(&who, req).await) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}

/// What a kubelet path asks about: the verb, the pod, the container.
#[derive(Debug, PartialEq)]
struct Target<'a> {
    verb: &'a str,
    namespace: &'a str,
    pod: &'a str,
    container: Option<&'a str>,
}

fn target(path: &str) -> Option<Target<'_>> {
    let mut parts = path.trim_start_matches('/').split('/');
    let verb = parts.next()?;
    let namespace = parts.next().filter(|s| !s.is_empty())?;
    let pod = parts.next().filter(|s| !s.is_empty())?;
    let container = parts.next().filter(|s| !s.is_empty());
    matches!(verb, "containerLogs" | "exec" | "attach" | "portForward").then_some(Target {
        verb,
        namespace,
        pod,
        container,
    })
}

/// The log options of a kubelet query.
fn log_params(query: &str, container: Option<&str>) -> Result<LogParams, String> {
    let mut lp = LogParams {
        container: container.map(str::to_string),
        ..LogParams::default()
    };
    let number = |k: &str, v: &str| {
        v.parse::<i64>()
            .map_err(|_| format!("{k}: {v:?} is not an integer"))
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let yes = matches!(v, "true" | "1");
        match k {
            "follow" => lp.follow = yes,
            "previous" => lp.previous = yes,
            "timestamps" => lp.timestamps = yes,
            "sinceSeconds" => lp.since_seconds = Some(number(k, v)?),
            "tailLines" => lp.tail_lines = Some(number(k, v)?),
            "limitBytes" => lp.limit_bytes = Some(number(k, v)?),
            "sinceTime" => {
                let decoded = v.replace("%3A", ":").replace("%3a", ":");
                lp.since_time = Some(
                    decoded
                        .parse()
                        .map_err(|_| format!("sinceTime: {v:?} is not an RFC 3339 time"))?,
                );
            }
            _ => {}
        }
    }
    Ok(lp)
}

/// The command that does the same on the member itself.
fn there(member: &str, t: &Target<'_>) -> String {
    let container = t.container.map(|c| format!(" -c {c}")).unwrap_or_default();
    let verb = match t.verb {
        "containerLogs" => "logs",
        "portForward" => "port-forward",
        other => other,
    };
    format!(
        "kubectl --context {member} {verb} -n {} {}{container}",
        t.namespace, t.pod
    )
}

impl Endpoint {
    async fn answer(&self, who: &str, req: Request<hyper::body::Incoming>) -> Response<Body> {
        if !self.allowed.iter().any(|a| a == who) {
            tracing::info!(user = %who, "virtual kubelet: refused a client not on the allowed list");
            return text(
                StatusCode::FORBIDDEN,
                format!(
                    "Forbidden (user={who}, verb=get, resource=nodes, subresource=proxy): tephra's virtual node {} answers only the API server's kubelet client certificate",
                    self.node
                ),
            );
        }
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or_default().to_string();
        let Some(t) = target(&path) else {
            return text(
                StatusCode::NOT_FOUND,
                format!(
                    "{path}: tephra's virtual node {} serves containerLogs only",
                    self.node
                ),
            );
        };
        let declared: Api<Pod> = Api::namespaced(self.clients.control.clone(), t.namespace);
        let pod = match declared.get_opt(t.pod).await {
            Ok(Some(p)) => p,
            Ok(None) => {
                return text(
                    StatusCode::NOT_FOUND,
                    format!("pod {}/{} not found", t.namespace, t.pod),
                );
            }
            Err(e) => {
                return text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("reading pod {}/{}: {e}", t.namespace, t.pod),
                );
            }
        };
        let Some(member) = super::member_of(&pod).map(str::to_string) else {
            return text(
                StatusCode::BAD_REQUEST,
                format!(
                    "pod {}/{} waits to be placed: no member cluster runs it yet",
                    t.namespace, t.pod
                ),
            );
        };
        if t.verb != "containerLogs" || req.method() != Method::GET {
            return text(
                StatusCode::BAD_REQUEST,
                format!(
                    "pod {}/{} runs in member cluster {member}; tephra serves only its logs here. Use: {}",
                    t.namespace,
                    t.pod,
                    there(&member, &t)
                ),
            );
        }
        let lp = match log_params(&query, t.container) {
            Ok(lp) => lp,
            Err(e) => return text(StatusCode::BAD_REQUEST, e),
        };
        let Some(client) = self.clients.member(&member) else {
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "pod {}/{} runs in member cluster {member}, which tephra cannot reach now; read its log there: {}",
                    t.namespace,
                    t.pod,
                    there(&member, &t)
                ),
            );
        };
        let copies: Api<Pod> = Api::namespaced(client, t.namespace);
        match copies.log_stream(t.pod, &lp).await {
            Ok(reader) => {
                let chunks = futures::stream::unfold(Box::pin(reader), |mut r| async move {
                    let mut buf = vec![0u8; 16 * 1024];
                    match r.read(&mut buf).await {
                        Ok(0) => None,
                        Ok(n) => {
                            buf.truncate(n);
                            Some((Ok(Frame::data(Bytes::from(buf))), r))
                        }
                        Err(e) => Some((Err(e), r)),
                    }
                });
                let mut r = Response::new(BodyExt::boxed_unsync(StreamBody::new(chunks.boxed())));
                r.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static("text/plain"),
                );
                r
            }
            Err(kube::Error::Api(s)) => {
                let status = StatusCode::from_u16(s.code).unwrap_or(StatusCode::BAD_GATEWAY);
                text(
                    status,
                    format!(
                        "member cluster {member}: {}; read it there: {}",
                        s.message,
                        there(&member, &t)
                    ),
                )
            }
            Err(e) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "member cluster {member} did not answer ({e}); read the log there: {}",
                    there(&member, &t)
                ),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};

    /// A CA, the endpoint's serving certificate (PEM) and a client certificate factory.
    struct Pki {
        ca: rcgen::Certificate,
        ca_params: CertificateParams,
        ca_key: KeyPair,
    }

    impl Pki {
        fn new() -> Self {
            let ca_key = KeyPair::generate().unwrap();
            let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
            ca_params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            ca_params
                .distinguished_name
                .push(DnType::CommonName, "test-ca");
            let ca = ca_params.self_signed(&ca_key).unwrap();
            Self {
                ca,
                ca_params,
                ca_key,
            }
        }

        fn signed(&self, cn: &str, server: bool) -> (rcgen::Certificate, KeyPair) {
            let key = KeyPair::generate().unwrap();
            let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
            p.distinguished_name.push(DnType::CommonName, cn);
            if server {
                p.subject_alt_names
                    .push(SanType::IpAddress([127, 0, 0, 1].into()));
            }
            let issuer = Issuer::new(self.ca_params.clone(), &self.ca_key);
            (p.signed_by(&key, &issuer).unwrap(), key)
        }
    }

    /// One GET of `path` as the holder of a certificate named `cn` that `signer` signed
    /// (none: no certificate), trusting `pki`'s CA; the status, or `None` when the TLS
    /// handshake or the request failed.
    async fn get(
        pki: &Pki,
        signer: &Pki,
        addr: std::net::SocketAddr,
        cn: Option<&str>,
        path: &str,
    ) -> Option<u16> {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.ca.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match cn {
            Some(cn) => {
                let (cert, key) = signer.signed(cn, false);
                let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
                builder
                    .with_client_auth_cert(vec![CertificateDer::from(cert.der().to_vec())], key)
                    .unwrap()
            }
            None => builder.with_no_client_auth(),
        };
        let tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .ok()?;
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .ok()?;
        tokio::spawn(conn);
        let req = Request::get(path)
            .header(hyper::header::HOST, "127.0.0.1")
            .body(http_body_util::Empty::<Bytes>::new())
            .unwrap();
        Some(send.send_request(req).await.ok()?.status().as_u16())
    }

    #[tokio::test]
    async fn only_the_api_servers_client_certificate_is_answered() {
        let pki = Pki::new();
        let (leaf, key) = pki.signed("tephra", true);
        let serving = super::super::tls::Serving::from_pem(
            leaf.pem().as_bytes(),
            key.serialize_pem().as_bytes(),
        )
        .unwrap();
        let acceptor = super::super::tls::acceptor(serving, &[pki.ca.der().to_vec()]).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let control =
            kube::Client::try_from(kube::Config::new("https://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let endpoint = Endpoint {
            clients: Clients {
                control,
                members: Default::default(),
            },
            node: "tephra".into(),
            allowed: vec!["kube-apiserver-kubelet-client".into()],
        };
        tokio::spawn(serve(listener, acceptor, Arc::new(endpoint)));
        // The API server's certificate gets past the door (a path it does not serve: 404).
        let api = Some("kube-apiserver-kubelet-client");
        assert_eq!(
            get(&pki, &pki, addr, api, "/stats/summary").await,
            Some(404)
        );
        // Another certificate of the same CA is refused.
        let other_name = get(&pki, &pki, addr, Some("mallory"), "/stats/summary").await;
        assert_eq!(other_name, Some(403));
        // No certificate: no answer.
        assert_eq!(get(&pki, &pki, addr, None, "/stats/summary").await, None);
        // The right name from another CA neither.
        let other = Pki::new();
        assert_eq!(get(&pki, &other, addr, api, "/stats/summary").await, None);
    }

    #[test]
    fn kubelet_paths_name_verb_pod_and_container() {
        assert_eq!(
            target("/containerLogs/ml/train-0/main"),
            Some(Target {
                verb: "containerLogs",
                namespace: "ml",
                pod: "train-0",
                container: Some("main")
            })
        );
        assert_eq!(target("/portForward/ml/p").map(|t| t.container), Some(None));
        assert_eq!(target("/stats/summary"), None);
        assert_eq!(target("/containerLogs/ml"), None);
    }

    #[test]
    fn log_options_pass_through_and_bad_numbers_are_named() {
        let lp = log_params(
            "follow=true&tailLines=10&timestamps=true&sinceSeconds=5&limitBytes=99&previous=false",
            Some("c"),
        )
        .unwrap();
        assert!(lp.follow && lp.timestamps && !lp.previous);
        assert_eq!(
            (lp.tail_lines, lp.since_seconds, lp.limit_bytes),
            (Some(10), Some(5), Some(99))
        );
        assert_eq!(lp.container.as_deref(), Some("c"));
        assert!(
            log_params("sinceTime=2026-11-30T10%3A00%3A00Z", None)
                .unwrap()
                .since_time
                .is_some()
        );
        let err = log_params("tailLines=ten", None).err().unwrap();
        assert!(err.contains("tailLines"), "{err}");
    }

    #[test]
    fn the_member_command_says_what_to_run() {
        let t = target("/containerLogs/ml/train-0/main").unwrap();
        assert_eq!(
            there("gpu-east", &t),
            "kubectl --context gpu-east logs -n ml train-0 -c main"
        );
        let t = target("/exec/ml/train-0/main").unwrap();
        assert!(there("m", &t).contains(" exec -n ml train-0"));
    }
}
