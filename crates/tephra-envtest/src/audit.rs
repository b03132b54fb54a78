//! The API server's audit log (`audit.k8s.io/v1` events, one JSON object a line), read into
//! what the RBAC checks need: who asked, for what, what the authorizer and admission said,
//! and (where the policy logs request bodies) which owners a write named, which admission
//! checks beyond the request's own verb.

use std::path::Path;

use serde::Deserialize;

use crate::Error;

/// One audited request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditEvent {
    /// The authenticated user name (`system:serviceaccount:NS:NAME` for a service account).
    pub user: String,
    /// The verb as RBAC sees it (`get`, `list`, `watch`, `create`, `update`, `patch`,
    /// `delete`, `deletecollection`).
    pub verb: String,
    /// The API group ("" for the core group).
    pub group: String,
    /// The resource, plural (empty for a non-resource URL).
    pub resource: String,
    /// The subresource (`status`, `binding`, `eviction`, ...), or "".
    pub subresource: String,
    /// The namespace, or "".
    pub namespace: String,
    /// The object's name, or "".
    pub name: String,
    /// The request URI.
    pub uri: String,
    /// The response code.
    pub code: u16,
    /// The response's message (a refusal's reason).
    pub message: String,
    /// The authorizer's decision (`allow`, `forbid`), when it recorded one.
    pub decision: String,
    /// The `metadata.ownerReferences` of the request's body (a create's object, an update's,
    /// or a patch's), when the audit policy logs bodies (level `Request`) and it has any.
    pub request_owners: Vec<AuditOwner>,
}

/// An owner reference a write named.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditOwner {
    /// The owner's `apiVersion`.
    #[serde(default)]
    pub api_version: String,
    /// The owner's kind.
    #[serde(default)]
    pub kind: String,
    /// The owner's name.
    #[serde(default)]
    pub name: String,
    /// The owner's uid.
    #[serde(default)]
    pub uid: String,
    /// Whether the reference blocks the owner's deletion (which
    /// `OwnerReferencesPermissionEnforcement` lets only a user who may update the owner's
    /// `finalizers` set).
    #[serde(default)]
    pub block_owner_deletion: Option<bool>,
}

impl AuditEvent {
    /// `resource` or `resource/subresource`.
    pub fn resource_path(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }

    /// Whether the authorizer or an admission plugin refused it.
    pub fn refused(&self) -> bool {
        self.code == 403
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default)]
    stage: String,
    #[serde(default)]
    verb: String,
    #[serde(default)]
    request_u_r_i: String,
    #[serde(default)]
    user: RawUser,
    #[serde(default)]
    object_ref: Option<RawRef>,
    #[serde(default)]
    response_status: Option<RawStatus>,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    request_object: Option<RawObject>,
}

#[derive(Deserialize, Default)]
struct RawObject {
    #[serde(default)]
    metadata: RawMetadata,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawMetadata {
    #[serde(default)]
    owner_references: Vec<AuditOwner>,
}

#[derive(Deserialize, Default)]
struct RawUser {
    #[serde(default)]
    username: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawRef {
    #[serde(default)]
    resource: String,
    #[serde(default)]
    subresource: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    api_group: String,
}

#[derive(Deserialize, Default)]
struct RawStatus {
    #[serde(default)]
    code: u16,
    #[serde(default)]
    message: String,
}

/// Reads the events of an audit log (completed requests, and long-running ones such as watches
/// once their response started: one is logged again when it ends; a line that is not an event
/// is skipped).
pub fn read(path: &Path) -> Result<Vec<AuditEvent>, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        what: path.display().to_string(),
        source,
    })?;
    Ok(parse(&text))
}

/// The events of an audit log's text.
pub fn parse(text: &str) -> Vec<AuditEvent> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Raw>(l).ok())
        .filter(|r| {
            matches!(
                r.stage.as_str(),
                "ResponseStarted" | "ResponseComplete" | "Panic"
            )
        })
        .map(|r| {
            let o = r.object_ref.unwrap_or_default();
            let s = r.response_status.unwrap_or_default();
            AuditEvent {
                user: r.user.username,
                verb: r.verb,
                group: o.api_group,
                resource: o.resource,
                subresource: o.subresource,
                namespace: o.namespace,
                name: o.name,
                uri: r.request_u_r_i,
                code: s.code,
                message: s.message,
                decision: r
                    .annotations
                    .get("authorization.k8s.io/decision")
                    .cloned()
                    .unwrap_or_default(),
                request_owners: r
                    .request_object
                    .map(|o| o.metadata.owner_references)
                    .unwrap_or_default(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_refused_patch_reads_with_its_user_resource_and_reason() {
        let line = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/apis/work.tephra.io/v1alpha1/namespaces/ml/resourcebindings/a","verb":"patch","user":{"username":"system:serviceaccount:tephra-system:tephra-scheduler"},"objectRef":{"resource":"resourcebindings","namespace":"ml","name":"a","apiGroup":"work.tephra.io","apiVersion":"v1alpha1"},"responseStatus":{"metadata":{},"status":"Failure","message":"resourcebindings.work.tephra.io \"a\" is forbidden: cannot set an ownerRef on a resource you can't delete","reason":"Forbidden","code":403},"annotations":{"authorization.k8s.io/decision":"allow"}}
{"kind":"Event","stage":"RequestReceived","verb":"get"}"#;
        let events = parse(line);
        assert_eq!(events.len(), 1);
        let e = &events[0];
        assert!(e.refused());
        assert_eq!(e.resource_path(), "resourcebindings");
        assert_eq!(e.group, "work.tephra.io");
        assert_eq!(e.decision, "allow");
        assert!(e.message.contains("ownerRef"));
        assert!(e.request_owners.is_empty());
    }

    #[test]
    fn a_watch_is_read_once_its_response_started() {
        let line = r#"{"kind":"Event","stage":"ResponseStarted","verb":"watch","user":{"username":"u"},"objectRef":{"resource":"pods","apiVersion":"v1"},"responseStatus":{"code":200},"annotations":{"authorization.k8s.io/decision":"allow"}}"#;
        let e = &parse(line)[0];
        assert_eq!((e.verb.as_str(), e.code), ("watch", 200));
    }

    #[test]
    fn a_logged_request_body_gives_the_owners_the_write_named() {
        let line = r#"{"kind":"Event","stage":"ResponseComplete","verb":"create","user":{"username":"u"},"objectRef":{"resource":"pods","namespace":"ml","apiVersion":"v1"},"responseStatus":{"code":201},"requestObject":{"kind":"Pod","metadata":{"name":"p","ownerReferences":[{"apiVersion":"batch.volcano.sh/v1alpha1","kind":"Job","name":"j","uid":"1","controller":true,"blockOwnerDeletion":true}]},"spec":{}}}"#;
        let e = &parse(line)[0];
        assert_eq!(
            e.request_owners,
            vec![AuditOwner {
                api_version: "batch.volcano.sh/v1alpha1".into(),
                kind: "Job".into(),
                name: "j".into(),
                uid: "1".into(),
                block_owner_deletion: Some(true),
            }]
        );
    }
}
