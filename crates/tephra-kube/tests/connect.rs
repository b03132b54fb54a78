//! The client tephra reaches API servers with (`tephra_kube::connect`): HTTP/2 where the
//! server offers it, as the real kube-apiserver does, and HTTP/1.1 where it does not, as the
//! devcluster does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};

/// GETs `/version` and lists namespaces with a client made by `tephra_kube::connect`; returns
/// the HTTP version the answer came in.
async fn version_spoken(config: kube::Config) -> http::Version {
    let client = tephra_kube::connect::client(config).unwrap();
    let req = http::Request::get("/version")
        .body(kube::client::Body::empty())
        .unwrap();
    let res = client.send(req).await.unwrap();
    assert_eq!(res.status(), 200);
    let version = res.version();
    // Typed requests work over it as over kube's own client.
    let namespaces: Api<Namespace> = Api::all(client);
    assert!(
        !namespaces
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    version
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_go_over_http2_on_kube_apiserver() {
    let Some(bins) = tephra_envtest::require(&tephra_envtest::Release::Oldest) else {
        return;
    };
    let env = tephra_envtest::Env::start(bins).await.unwrap();
    let cluster = env.cluster("local", Default::default()).await.unwrap();
    let yaml = cluster.kubeconfig(&tephra_envtest::User::Admin).unwrap();
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    assert_eq!(version_spoken(config).await, http::Version::HTTP_2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_devcluster_is_spoken_to_in_http1() {
    let dev = tephra_devcluster::DevCluster::start(tephra_devcluster::Options::single())
        .await
        .unwrap();
    let config = dev.config("local").await.unwrap();
    assert_eq!(version_spoken(config).await, http::Version::HTTP_11);
}
