//! `--scheduler-conf` is reloaded when the file changes: a good file takes effect, a bad one
//! keeps the last good configuration and is reported by a metric; inert Volcano plugins are
//! reported by `tephra_config_inert_plugins`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;

const GOOD: &str = r#"
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: numa-aware
"#;

#[tokio::test]
async fn a_bad_config_on_reload_keeps_the_last_good_one_and_says_so() {
    logs();
    let dir = std::env::temp_dir().join(format!("tephra-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("volcano-scheduler.conf");
    std::fs::write(&path, GOOD).unwrap();
    let dev = cluster(vec![node("n0", "8", 4)]).await;
    let c = client(&dev).await;
    let sched = tephra_kube::start(
        c.clone(),
        tephra_kube::Options {
            config_path: Some(path.clone()),
            pod: Some(("default".into(), "tephra-scheduler-0".into())),
            ..scheduler_options()
        },
    )
    .await
    .unwrap();
    let m = &sched.metrics;
    assert_eq!(m.inert_plugins.with_label_values(&["numa-aware"]).get(), 1);
    std::fs::write(
        &path,
        "actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: no-such-plugin\n",
    )
    .unwrap();
    eventually(10, "the bad file refused", || async {
        (m.reload_errors.get() == 1).then_some(())
    })
    .await;
    assert_eq!(m.reload_ok.get(), 0);
    let events: kube::api::Api<k8s_openapi::api::core::v1::Event> =
        kube::api::Api::namespaced(c.clone(), "default");
    let said = eventually(10, "an Event on the scheduler's Pod", || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.involved_object.name.as_deref() == Some("tephra-scheduler-0")
                && e.reason.as_deref() == Some("ConfigRefused")
        })
    })
    .await;
    assert!(said.message.unwrap_or_default().contains("no-such-plugin"));
    // The last good configuration still schedules.
    gang(&c, "default", "after-bad", "default", 1, 1, 1).await;
    all_bound(&c, "default", "after-bad-", 1, 20).await;
    std::fs::write(&path, GOOD.replace("  - name: numa-aware\n", "")).unwrap();
    eventually(10, "the fixed file taken", || async {
        (m.reload_ok.get() == 1).then_some(())
    })
    .await;
    assert_eq!(m.inert_plugins.with_label_values(&["numa-aware"]).get(), 0);
    sched.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_bad_config_at_start_is_refused_naming_the_file() {
    let dir = std::env::temp_dir().join(format!("tephra-badconf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.conf");
    std::fs::write(&path, "actions: \"allocate, nonsense\"\n").unwrap();
    let dev = cluster(vec![]).await;
    let c = client(&dev).await;
    let err = match tephra_kube::start(
        c,
        tephra_kube::Options {
            config_path: Some(path.clone()),
            ..scheduler_options()
        },
    )
    .await
    {
        Ok(_) => panic!("a bad config must be refused"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("bad.conf") && err.contains("nonsense"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
