//! The helper most integration tests use starts a server with tephra's CRDs in well under a
//! second (after the first, which checks the CRDs' CEL rules once per process).

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

#[tokio::test]
async fn a_single_server_starts_quickly_and_speaks_kubernetes_1_32() {
    let first = std::time::Instant::now();
    drop(common::single().await);
    let first = first.elapsed();
    let t = std::time::Instant::now();
    let h = common::single().await;
    let again = t.elapsed();
    eprintln!("first start {first:?}, next start {again:?}");
    let c = common::client(&h, "local").await;
    let v = c.apiserver_version().await.expect("version");
    assert_eq!((v.major.as_str(), v.minor.as_str()), ("1", "32"));
}
