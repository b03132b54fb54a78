//! How tephra reaches an API server: kube's client over a hyper client that speaks HTTP/2
//! where the server offers it (ALPN `h2`, then `http/1.1`), as client-go does. Binds, status
//! writes and watches then share one connection as concurrent streams, instead of one
//! HTTP/1.1 connection (and TLS handshake) per request in flight; a server that offers only
//! HTTP/1.1 (or plain HTTP) is spoken to in HTTP/1.1 as before. The layers are kube's own
//! (base URI, authentication, extra headers, retries of 429/503/504), minus its tracing.

use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::ConfigExt;
use kube::{Client, Config};
use tower::{BoxError, ServiceBuilder};

/// How often an HTTP/2 connection is pinged, so that a dead one is found while a watch waits
/// on it.
const PING_EVERY: Duration = Duration::from_secs(30);
/// How long a ping may go unanswered before the connection is dropped.
const PING_TIMEOUT: Duration = Duration::from_secs(15);

/// A client for `config`, over HTTP/2 where the server offers it.
pub fn client(config: Config) -> Result<Client, kube::Error> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    // Many small requests and answers share the connection: no Nagle delay on any.
    http.set_nodelay(true);
    http.set_connect_timeout(config.connect_timeout);
    let mut tls = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config.rustls_client_config()?)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = rustls::pki_types::ServerName::try_from(name.clone()).map_err(|e| {
            kube::Error::RustlsTls(kube::client::RustlsTlsError::InvalidServerName(e))
        })?;
        tls = tls.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let https = tls.enable_all_versions().wrap_connector(http);
    let hyper = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .http2_keep_alive_interval(PING_EVERY)
        .http2_keep_alive_timeout(PING_TIMEOUT)
        .http2_keep_alive_while_idle(true)
        .build(https);
    let retry = config
        .default_retry
        .then(|| tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry()));
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(retry)
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(hyper);
    Ok(Client::new(service, config.default_namespace))
}
