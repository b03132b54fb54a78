//! Watches and streaming lists: resumed from a resourceVersion without gaps or repeats, a 410
//! for a compacted one and a relist that recovers, bookmarks, and the initial-events bookmark.

use super::*;

#[tokio::test]
async fn a_watch_resumes_from_a_resource_version_without_gaps_or_repeats() {
    let h = common::single().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(common::client(&h, "local").await);
    cms.create(&PostParams::default(), &cm("w0", json!({})))
        .await
        .unwrap();
    let list = cms.list(&ListParams::default()).await.unwrap();
    let start = list.metadata.resource_version.unwrap();
    for i in 1..=3 {
        cms.create(&PostParams::default(), &cm(&format!("w{i}"), json!({})))
            .await
            .unwrap();
    }
    let wp = WatchParams::default().timeout(2);
    let mut stream = cms.watch(&wp, &start).await.unwrap().boxed();
    let mut seen = Vec::new();
    while let Some(ev) = stream.try_next().await.unwrap() {
        if let WatchEvent::Added(c) = ev {
            seen.push(c.metadata.name.unwrap());
            if seen.len() == 2 {
                break;
            }
        }
    }
    assert_eq!(seen, vec!["w1", "w2"]);
    // Resume after w2: exactly w3, then a change made now.
    let w2_rv = cms
        .get("w2")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    cms.delete("w1", &DeleteParams::default()).await.unwrap();
    let mut resumed = cms.watch(&wp, &w2_rv).await.unwrap().boxed();
    let mut events = Vec::new();
    while let Some(ev) = resumed.try_next().await.unwrap() {
        match ev {
            WatchEvent::Added(c) => events.push(format!("ADDED {}", c.metadata.name.unwrap())),
            WatchEvent::Deleted(c) => events.push(format!("DELETED {}", c.metadata.name.unwrap())),
            _ => {}
        }
        if events.len() == 2 {
            break;
        }
    }
    assert_eq!(events, vec!["ADDED w3", "DELETED w1"]);
}

#[tokio::test]
async fn a_too_old_resource_version_gets_410_and_a_relist_recovers() {
    let mut options = Options::single();
    options.server = ServerOptions {
        history_limit: 5,
        ..ServerOptions::default()
    };
    let h = DevCluster::start(options).await.unwrap();
    let client = common::client(&h, "local").await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let first = cms
        .create(&PostParams::default(), &cm("old", json!({})))
        .await
        .unwrap();
    for i in 0..10 {
        cms.create(&PostParams::default(), &cm(&format!("n{i}"), json!({})))
            .await
            .unwrap();
    }
    let old_rv = first.metadata.resource_version.unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().timeout(2), &old_rv)
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Error(e)) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
            assert!(
                e.message.starts_with("too old resource version"),
                "{}",
                e.message
            );
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    // kube-rs's watcher re-lists on the 410 and ends up with every object.
    let relist = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(relist.items.len(), 11);
    let watcher = kube::runtime::watcher(cms.clone(), kube::runtime::watcher::Config::default());
    let objects = kube::runtime::reflector::store::<ConfigMap>();
    let (reader, writer) = objects;
    let reflector = kube::runtime::reflector(writer, watcher);
    let task = tokio::spawn(reflector.for_each(|_| async {}));
    cms.create(&PostParams::default(), &cm("late", json!({})))
        .await
        .unwrap();
    common::eventually(10, "the reflector sees every object", || {
        let n = reader.state().len();
        async move { (n == 12).then_some(()) }
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn bookmarks_carry_a_resource_version_to_resume_from() {
    let mut options = Options::single();
    options.server = ServerOptions {
        bookmark_interval: Duration::from_millis(100),
        ..ServerOptions::default()
    };
    let h = DevCluster::start(options).await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(common::client(&h, "local").await);
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().timeout(5), &rv)
        .await
        .unwrap()
        .boxed();
    let nodes: Api<Node> = Api::all(common::client(&h, "local").await);
    let _ = nodes.list(&ListParams::default()).await.unwrap();
    loop {
        if let Some(WatchEvent::Bookmark(b)) = stream.try_next().await.unwrap() {
            assert!(
                b.metadata.resource_version.parse::<u64>().unwrap() >= rv.parse::<u64>().unwrap()
            );
            break;
        }
    }
}

#[tokio::test]
async fn health_checks_answer_and_streaming_lists_end_with_the_initial_events_bookmark() {
    let h = common::single().await;
    let client = common::client(&h, "local").await;
    for path in ["/healthz", "/readyz", "/livez"] {
        let req = http::Request::get(path).body(Vec::new()).unwrap();
        assert_eq!(client.request_text(req).await.unwrap(), "ok");
    }
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    for i in 0..3 {
        cms.create(&PostParams::default(), &cm(&format!("s{i}"), json!({})))
            .await
            .unwrap();
    }
    let config = kube::runtime::watcher::Config::default().streaming_lists();
    let mut events = kube::runtime::watcher(cms, config).boxed();
    let mut initial = 0;
    loop {
        match events.try_next().await.unwrap().unwrap() {
            kube::runtime::watcher::Event::InitApply(_) => initial += 1,
            kube::runtime::watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(initial, 3);
}
