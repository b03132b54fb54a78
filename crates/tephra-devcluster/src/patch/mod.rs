//! The PATCH content types: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge
//! patch for the built-in kinds, and server-side apply.

pub mod apply;
pub mod fields;
pub mod strategic;

use serde_json::Value;

use crate::status::ApiError;

/// A PATCH request's kind, from its `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

const CR_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];
const BUILTIN_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

impl PatchKind {
    /// The patch kind of a `Content-Type`; custom resources take no strategic merge patch
    /// (415, as the real server answers).
    pub fn from_content_type(content_type: &str, custom: bool) -> Result<Self, ApiError> {
        let media = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        let accepted = if custom { CR_TYPES } else { BUILTIN_TYPES };
        let kind = match media.as_str() {
            "application/merge-patch+json" => Self::Merge,
            "application/json-patch+json" => Self::Json,
            "application/strategic-merge-patch+json" if !custom => Self::Strategic,
            "application/apply-patch+yaml" | "application/apply-patch+json" => Self::Apply,
            _ => return Err(ApiError::unsupported_media_type(&media, accepted)),
        };
        Ok(kind)
    }
}

/// Parses a patch body: JSON, or YAML for server-side apply.
pub fn parse_body(kind: PatchKind, body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    if kind == PatchKind::Apply {
        let text = std::str::from_utf8(body)
            .map_err(|_| ApiError::bad_request("the patch is not UTF-8"))?;
        return serde_saphyr::from_str::<Value>(text)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")));
    }
    Err(ApiError::bad_request(
        "the body of the request was not valid JSON",
    ))
}

/// Applies a JSON merge patch or JSON patch to `target`.
pub fn apply_simple(kind: PatchKind, target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    match kind {
        PatchKind::Merge => {
            if !patch.is_object() {
                return Err(ApiError::bad_request("merge patch must be a JSON object"));
            }
            json_patch::merge(target, patch);
            Ok(())
        }
        PatchKind::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            json_patch::patch(target, &ops).map_err(|e| ApiError::unprocessable(e.to_string()))
        }
        PatchKind::Strategic => {
            if !patch.is_object() {
                return Err(ApiError::bad_request(
                    "strategic merge patch must be a JSON object",
                ));
            }
            strategic::merge(target, patch);
            Ok(())
        }
        PatchKind::Apply => Err(ApiError::internal("apply is not a simple patch")),
    }
}
