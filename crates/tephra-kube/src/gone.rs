//! What a write means when the API server finds its object absent or present already: a
//! delete, patch or status write whose object is gone (404) has nothing left to do, and a
//! create whose object exists (409) is done. One home for the rule, for the executor, the
//! dependency copies and the controllers.

/// Whether the API server answered 404 NotFound.
pub fn is_gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Whether the API server answered 409 (AlreadyExists, or a precondition that no longer holds).
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// A write whose object is gone (404) is done.
pub fn done_if_gone<T>(r: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match r {
        Err(e) if !is_gone(&e) => Err(e),
        _ => Ok(()),
    }
}

/// A create whose object exists already (409) is done.
pub fn done_if_exists<T>(r: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match r {
        Err(e) if !is_conflict(&e) => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("x", "Reason")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn gone_and_existing_objects_are_done_and_other_errors_stay() {
        assert!(done_if_gone::<()>(Err(api(404))).is_ok());
        assert!(done_if_gone::<()>(Err(api(409))).is_err());
        assert!(done_if_exists::<()>(Err(api(409))).is_ok());
        assert!(done_if_exists::<()>(Err(api(404))).is_err());
        assert!(done_if_gone(Ok::<u8, kube::Error>(1)).is_ok());
    }
}
