//! Streaming lists (`sendInitialEvents`): the scheduler asks for its initial state as a stream
//! of watch events, which Kubernetes serves by default from 1.34; a server that refuses them
//! (an older one, or one with the `WatchList` feature gate off) is listed in pages instead,
//! and gangs bind as before. The devcluster refuses them, when told to, as kube-apiserver
//! does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;

/// A watch of pods asking for its initial state as a stream, as kube-runtime's streaming
/// lists ask: the status the server answers with.
async fn streaming_watch_status(client: &kube::Client) -> http::StatusCode {
    let request = http::Request::get(
        "/api/v1/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan\
         &allowWatchBookmarks=true&timeoutSeconds=1",
    )
    .body(Vec::new())
    .unwrap();
    match client.send(request.map(Into::into)).await {
        Ok(response) => response.status(),
        Err(kube::Error::Api(s)) => http::StatusCode::from_u16(s.code).unwrap(),
        Err(e) => panic!("the watch request failed: {e}"),
    }
}

on_both!(
    a_server_without_streaming_lists_is_listed_in_pages_and_gangs_bind,
    a_server_without_streaming_lists_is_listed_in_pages_and_gangs_bind
);
async fn a_server_without_streaming_lists_is_listed_in_pages_and_gangs_bind(backend: Backend) {
    logs();
    let nodes = vec![node("n0", "8", 4), node("n1", "8", 4)];
    let (client, _dev, _real) = match backend {
        Backend::Devcluster => {
            let mut options = tephra_devcluster::Options::single();
            options.members[0].nodes = nodes;
            options.kubelet = fast_kubelet();
            options.queues = vec![queue_json("default", 1)];
            options.server.watch_lists = false;
            let dev = tephra_devcluster::DevCluster::start(options).await.unwrap();
            (client(&dev).await, Some(dev), None)
        }
        Backend::KubeApiserver => {
            let options = tephra_envtest::ClusterOptions {
                apiserver_args: vec!["--feature-gates=WatchList=false".into()],
                ..Default::default()
            };
            let Some(cl) = cluster_on_with(backend, nodes, options).await else {
                return;
            };
            (cl.client.clone(), None, Some(cl))
        }
    };
    let status = streaming_watch_status(&client).await;
    assert_eq!(
        status,
        http::StatusCode::UNPROCESSABLE_ENTITY,
        "a streaming list is refused as invalid"
    );
    let sched = tephra_kube::start(client.clone(), scheduler_options())
        .await
        .unwrap();
    gang(&client, "default", "a", "default", 2, 2, 3).await;
    all_bound(&client, "default", "a-", 2, 30).await;
    sched.stop().await;
}

on_both!(
    streaming_lists_are_served_and_gangs_bind,
    streaming_lists_are_served_and_gangs_bind
);
async fn streaming_lists_are_served_and_gangs_bind(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 4)]).await else {
        return;
    };
    assert_eq!(
        streaming_watch_status(&cl.client).await,
        http::StatusCode::OK
    );
    let sched = tephra_kube::start(cl.client.clone(), scheduler_options())
        .await
        .unwrap();
    gang(&cl.client, "default", "a", "default", 2, 2, 2).await;
    all_bound(&cl.client, "default", "a-", 2, 30).await;
    sched.stop().await;
}
