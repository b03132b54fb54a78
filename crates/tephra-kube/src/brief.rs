//! Errors as one readable line for the log: an API server's answer as its code, reason and
//! message, never the client's debug dump of the whole `Status`; anything else as it displays.

use kube::runtime::watcher;

/// An API server's refusal: `403 Forbidden: pods is forbidden: ...`.
pub fn status(s: &kube::core::Status) -> String {
    match (s.reason.is_empty(), s.message.is_empty()) {
        (false, false) => format!("{} {}: {}", s.code, s.reason, s.message),
        (true, false) => format!("{}: {}", s.code, s.message),
        (false, true) => format!("{} {}", s.code, s.reason),
        (true, true) => format!("HTTP {}", s.code),
    }
}

/// A client error.
pub fn kube(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => status(s),
        other => other.to_string(),
    }
}

/// A watcher's error, saying at which step it failed.
pub fn watch(e: &watcher::Error) -> String {
    match e {
        watcher::Error::InitialListFailed(k) => format!("list failed: {}", kube(k)),
        watcher::Error::WatchStartFailed(k) => format!("watch could not start: {}", kube(k)),
        watcher::Error::WatchError(s) => format!("watch ended by the server: {}", status(s)),
        watcher::Error::WatchFailed(k) => format!("watch broke: {}", kube(k)),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused() -> kube::core::Status {
        kube::core::Status::failure("pods is forbidden: User \"x\" cannot list", "Forbidden")
            .with_code(403)
    }

    #[test]
    fn a_refusal_reads_as_code_reason_and_message_without_the_status_dump() {
        let e = watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(refused())));
        let line = watch(&e);
        assert_eq!(
            line,
            "watch could not start: 403 Forbidden: pods is forbidden: User \"x\" cannot list"
        );
        assert!(!e.to_string().is_empty() && !line.contains("Status {"));
    }
}
