//! Waiting in tests for what the devcluster's controllers and a scheduler do in the
//! background: poll a check until it holds, or fail the test with what was awaited.

use std::future::Future;
use std::time::Duration;

/// Polls `check` every 50 ms until it returns `Some`, and returns that value; panics (failing
/// the calling test) after `secs` seconds, naming `what`.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {secs} s waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
