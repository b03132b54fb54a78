//! `continue` tokens for chunked lists: opaque base64url of `{"v","rv","start"}` as the real
//! API server writes them, where `start` is the key of the last item returned.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::status::ApiError;

/// A store key: `(namespace, name)`; the namespace is empty for cluster-scoped kinds.
pub type Key = (String, String);

/// Encodes a token that resumes after `last` for a list taken at `rv`.
pub fn encode(rv: u64, last: &Key) -> String {
    let body = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{}/{}", last.0, last.1)});
    URL_SAFE_NO_PAD.encode(body.to_string())
}

/// Decodes a token into the list RV it started at and the key to resume after.
pub fn decode(token: &str) -> Result<(u64, Key), ApiError> {
    let bad = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
    let bytes = URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| bad("not base64"))?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| bad("not JSON"))?;
    if value.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err(bad("unknown version"));
    }
    let rv = value
        .get("rv")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("no resource version"))?;
    let start = value
        .get("start")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no start key"))?;
    let (ns, name) = start.split_once('/').ok_or_else(|| bad("bad start key"))?;
    Ok((rv, (ns.to_string(), name.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_garbage_is_a_bad_request() {
        let key = ("default".to_string(), "p-17".to_string());
        assert_eq!(decode(&encode(42, &key)).expect("decodes"), (42, key));
        assert_eq!(decode("!!").expect_err("refused").code, 400);
    }
}
