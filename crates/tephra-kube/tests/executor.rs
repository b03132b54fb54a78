//! The executor against a stand-in API server (a tower service under `kube::Client`): binds
//! do not wait behind status writes, reports (and the pods' `Scheduled` Events) wait while
//! binds are waiting but evictions do not, and two writes to one pod keep their planned order even though they wait in
//! different queues.

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
            ok(body)
        }
    });
    kube::Client::new(service, "default")
}

/// A 200 answer with `body`.
fn ok(body: &'static str) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    Ok(Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap())
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
            virtual_node: None,
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
        annotations: Default::default(),
        gpu_lock: false,
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

/// A kube client whose server holds binds until `gate` opens and answers everything else at
/// once, sending each request's method and path to `seen`.
fn held_binds(gate: watch::Receiver<bool>, seen: mpsc::UnboundedSender<String>) -> kube::Client {
    let service = tower::service_fn(move |req: Request<kube::client::Body>| {
        let mut gate = gate.clone();
        let seen = seen.clone();
        async move {
            let path = req.uri().path().to_string();
            if path.ends_with("/binding") {
                while !*gate.borrow() {
                    if gate.changed().await.is_err() {
                        break;
                    }
                }
            }
            let _ = seen.send(format!("{} {path}", req.method()));
            let body = if path.ends_with("/binding") || path.ends_with("/eviction") {
                r#"{"kind":"Status","apiVersion":"v1","status":"Success","code":201}"#
            } else {
                r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default"}}"#
            };
            ok(body)
        }
    });
    kube::Client::new(service, "default")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_wait_while_binds_are_waiting_and_evictions_do_not() {
    let (open, gate) = watch::channel(false);
    let (seen, mut requests) = mpsc::unbounded_channel();
    let (executor, mut results) = executor(held_binds(gate, seen), 2);
    // Two binds in flight (held by the server) and four waiting, then a pod's condition (a
    // report), another pod's condition with its bind planned behind it (so it waits no
    // longer: the bind must not wait behind the backlog twice) and an eviction.
    let mut batch: Vec<Write> = (0..6).map(|i| bind(&format!("placed-{i}"))).collect();
    batch.push(condition("waiting"));
    batch.push(condition("next"));
    batch.push(bind("next"));
    batch.push(Write::Evict {
        cluster: "local".into(),
        namespace: "default".into(),
        name: "victim".into(),
        reason: "preempted".into(),
    });
    executor.submit(batch);
    let mut before = Vec::new();
    let evicted = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let r = requests.recv().await.unwrap();
            let done = r.contains("/victim/eviction");
            before.push(r);
            if done {
                return;
            }
        }
    })
    .await;
    assert!(
        evicted.is_ok(),
        "the eviction waited behind binds: {before:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    while let Ok(r) = requests.try_recv() {
        before.push(r);
    }
    assert!(
        !before.iter().any(|r| r.contains("/waiting")),
        "the report went out while binds were waiting: {before:?}"
    );
    assert!(
        before.iter().any(|r| r.contains("/next/status")),
        "the report a bind waits behind was held: {before:?}"
    );
    // Once the binds are done the report goes out.
    open.send(true).unwrap();
    let reported = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            if requests.recv().await.unwrap().contains("/waiting") {
                return;
            }
        }
    })
    .await;
    assert!(reported.is_ok(), "the report never went out");
    for _ in 0..10 {
        tokio::time::timeout(Duration::from_secs(60), results.recv())
            .await
            .unwrap()
            .unwrap();
    }
}

/// Whether `requests` receives one naming `needle` within `wait`.
async fn until_seen(
    requests: &mut mpsc::UnboundedReceiver<String>,
    needle: &str,
    wait: Duration,
) -> bool {
    tokio::time::timeout(wait, async {
        while let Some(r) = requests.recv().await {
            if r.contains(needle) {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false)
}

/// The requests `requests` receives within `wait`.
async fn seen_within(
    requests: &mut mpsc::UnboundedReceiver<String>,
    wait: Duration,
) -> Vec<String> {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(wait, async {
        while let Some(r) = requests.recv().await {
            out.push(r);
        }
    })
    .await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_wait_while_the_last_binds_are_in_flight() {
    let (open, gate) = watch::channel(false);
    let (seen, mut requests) = mpsc::unbounded_channel();
    let (executor, mut results) = executor(held_binds(gate, seen), 2);
    // Two workers take both binds: none waits in the queue, both are in flight.
    executor.submit(vec![bind("a"), bind("b"), condition("waiting")]);
    let before = seen_within(&mut requests, Duration::from_millis(700)).await;
    assert!(
        !before.iter().any(|r| r.contains("/waiting")),
        "the report went out while binds were in flight: {before:?}"
    );
    open.send(true).unwrap();
    assert!(
        until_seen(&mut requests, "/waiting", Duration::from_secs(30)).await,
        "the report never went out"
    );
    for _ in 0..3 {
        tokio::time::timeout(Duration::from_secs(60), results.recv())
            .await
            .unwrap()
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_held_for_a_backlog_go_once_it_is_worked_off() {
    let (_open, gate) = watch::channel(false);
    let (seen, mut requests) = mpsc::unbounded_channel();
    let (executor, mut results) = executor(held_binds(gate, seen), 2);
    // Between two sessions of a backlog no bind waits, but more are coming.
    executor.hold_reports(true);
    executor.submit(vec![condition("waiting")]);
    let held = seen_within(&mut requests, Duration::from_millis(700)).await;
    assert!(
        held.is_empty(),
        "a report went out during the backlog: {held:?}"
    );
    executor.hold_reports(false);
    assert!(
        until_seen(&mut requests, "/waiting", Duration::from_secs(30)).await,
        "the report never went out"
    );
    tokio::time::timeout(Duration::from_secs(60), results.recv())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_pods_event_waits_until_no_bind_is_waiting() {
    let (seen, mut requests) = mpsc::unbounded_channel::<String>();
    // Each request is seen as it arrives; a bind takes 150 ms.
    let service = tower::service_fn(move |req: Request<kube::client::Body>| {
        let seen = seen.clone();
        async move {
            let path = req.uri().path().to_string();
            let _ = seen.send(format!("{} {path}", req.method()));
            if path.ends_with("/binding") {
                tokio::time::sleep(Duration::from_millis(150)).await;
                ok(r#"{"kind":"Status","apiVersion":"v1","status":"Success","code":201}"#)
            } else {
                ok(
                    r#"{"apiVersion":"v1","kind":"Event","metadata":{"name":"e","namespace":"default"}}"#,
                )
            }
        }
    });
    // One bind worker: the first bind's Event is due while three binds still wait.
    let (executor, mut results) = executor(kube::Client::new(service, "default"), 1);
    executor.submit((0..4).map(|i| bind(&format!("p{i}"))).collect());
    for _ in 0..4 {
        tokio::time::timeout(Duration::from_secs(60), results.recv())
            .await
            .unwrap()
            .unwrap();
    }
    let mut log = Vec::new();
    let events = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let r = requests.recv().await.unwrap();
            log.push(r);
            if log.iter().filter(|r| r.contains("/events")).count() == 4 {
                return;
            }
        }
    })
    .await;
    assert!(events.is_ok(), "not every Event was sent: {log:?}");
    // The last bind leaves the queue once p2's is done (at 300 ms): no Event before that
    // (without waiting, p0's went out at 150 ms, beside p1's bind).
    let first_event = log.iter().position(|r| r.contains("/events")).unwrap();
    let third_bind = log.iter().position(|r| r.ends_with("/p2/binding")).unwrap();
    assert!(
        first_event > third_bind,
        "an Event went out while binds were waiting: {log:?}"
    );
}
