//! The executor against a stand-in API server (a tower service under `kube::Client`): binds
//! do not wait behind status writes, and two writes to one pod keep their planned order even
//! though they wait in different queues.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use tephra_kube::clients::Clients;
use tephra_kube::executor::{Done, Executor, Outcome, RateLimiter, Settings};
use tephra_kube::leader::Leadership;
use tephra_kube::metrics::Metrics;
use tephra_kube::writes::Write;
use tokio::sync::{mpsc, watch};

/// How the stand-in API server answers a pod's status patch.
#[derive(Clone)]
enum StatusReply {
    /// Only once the test opens the gate.
    HeldUntil(watch::Receiver<bool>),
    /// After a delay, then marks the patch done.
    After(Duration, Arc<AtomicBool>),
}

/// A kube client whose server answers binds at once (reporting, for each, whether the pod's
/// status patch was done by then) and status patches as `reply` says.
fn client(reply: StatusReply, binds: mpsc::UnboundedSender<bool>) -> kube::Client {
    let service = tower::service_fn(move |req: Request<kube::client::Body>| {
        let reply = reply.clone();
        let binds = binds.clone();
        async move {
            let path = req.uri().path().to_string();
            let body = if path.ends_with("/binding") {
                let done = match &reply {
                    StatusReply::After(_, done) => done.load(Ordering::SeqCst),
                    StatusReply::HeldUntil(_) => false,
                };
                let _ = binds.send(done);
                r#"{"kind":"Status","apiVersion":"v1","status":"Success","code":201}"#
            } else {
                match reply {
                    StatusReply::HeldUntil(mut open) => {
                        while !*open.borrow() {
                            if open.changed().await.is_err() {
                                break;
                            }
                        }
                    }
                    StatusReply::After(delay, done) => {
                        tokio::time::sleep(delay).await;
                        done.store(true, Ordering::SeqCst);
                    }
                }
                r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default"}}"#
            };
            Ok::<_, std::convert::Infallible>(
                Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from_static(body.as_bytes())))
                    .unwrap(),
            )
        }
    });
    kube::Client::new(service, "default")
}

fn executor(client: kube::Client, concurrency: usize) -> (Executor, mpsc::UnboundedReceiver<Done>) {
    let (done, results) = mpsc::unbounded_channel();
    let clients = Clients {
        control: client.clone(),
        members: Arc::new(std::sync::RwLock::new(BTreeMap::from([(
            "local".to_string(),
            client,
        )]))),
    };
    let executor = Executor::new(
        clients,
        Settings {
            concurrency,
            limiter: RateLimiter::new(0.0, 0),
            identity: "test".into(),
            volume_bind_timeout: Duration::from_secs(10),
        },
        Leadership::always(),
        Arc::new(Metrics::new().unwrap()),
        done,
    );
    (executor, results)
}

fn condition(pod: &str) -> Write {
    Write::PodCondition {
        cluster: "local".into(),
        namespace: "default".into(),
        name: pod.into(),
        reason: "Unschedulable".into(),
        message: "0/1 nodes are available".into(),
    }
}

fn bind(pod: &str) -> Write {
    Write::Bind {
        cluster: "local".into(),
        namespace: "default".into(),
        name: pod.into(),
        node: "n1".into(),
        job: "default/g".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bind_does_not_wait_behind_status_writes() {
    let (open, gate) = watch::channel(false);
    let (binds, mut bound) = mpsc::unbounded_channel();
    let (executor, mut results) = executor(client(StatusReply::HeldUntil(gate), binds), 4);
    // More status writes than there are workers in all, every one held by the server, then a
    // bind planned after them.
    let mut batch: Vec<Write> = (0..16)
        .map(|i| condition(&format!("waiting-{i}")))
        .collect();
    batch.push(bind("placed"));
    executor.submit(batch);
    // The bind reaches the server and completes while every status write is still held.
    tokio::time::timeout(Duration::from_secs(60), bound.recv())
        .await
        .expect("the bind waited behind the status writes")
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(60), results.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(first.write, Write::Bind { .. }) && first.outcome == Outcome::Ok,
        "the first write done is the bind: {first:?}"
    );
    // The status writes still complete once the server answers them.
    open.send(true).unwrap();
    for _ in 0..16 {
        let d = tokio::time::timeout(Duration::from_secs(60), results.recv())
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(d.write, Write::PodCondition { .. }));
        assert_eq!(d.outcome, Outcome::Ok);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_to_one_pod_keep_their_order_across_queues() {
    let done = Arc::new(AtomicBool::new(false));
    let (binds, mut bound) = mpsc::unbounded_channel();
    let reply = StatusReply::After(Duration::from_millis(300), Arc::clone(&done));
    let (executor, mut results) = executor(client(reply, binds), 4);
    // The pod's condition was planned before its bind (an earlier session said it waits): the
    // bind, in the binds' queue, must not overtake it.
    executor.submit(vec![condition("p"), bind("p")]);
    let status_done_first = tokio::time::timeout(Duration::from_secs(60), bound.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        status_done_first,
        "the bind reached the server before the pod's earlier status write was done"
    );
    for _ in 0..2 {
        let d = results.recv().await.unwrap();
        assert_eq!(d.outcome, Outcome::Ok, "{d:?}");
    }
}
