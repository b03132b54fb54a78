//! Kubernetes Events (`core/v1`) as tephra records them: on the object a decision concerns,
//! with the reporting component and this replica's identity.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};

/// The object an Event is about.
#[derive(Clone, Debug)]
pub struct EventFor<'a> {
    /// Namespace (Events live in their object's namespace).
    pub namespace: &'a str,
    /// `apiVersion` of the object.
    pub api_version: &'a str,
    /// Kind.
    pub kind: &'a str,
    /// Name.
    pub name: &'a str,
    /// Uid, if known.
    pub uid: Option<String>,
}

/// An Event about `on`, stamped now, from `component` (`volcano` for the scheduler,
/// `vc-controller-manager` for the controllers, as Volcano's are) and replica `identity`.
pub fn event(
    on: &EventFor<'_>,
    reason: &str,
    message: &str,
    warning: bool,
    component: &str,
    identity: &str,
) -> Event {
    let now = k8s_openapi::jiff::Timestamp::now();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{}.{:x}", on.name, now.as_nanosecond())),
            namespace: Some(on.namespace.to_string()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some(on.api_version.to_string()),
            kind: Some(on.kind.to_string()),
            name: Some(on.name.to_string()),
            namespace: Some(on.namespace.to_string()),
            uid: on.uid.clone(),
            ..ObjectReference::default()
        },
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        type_: Some(if warning { "Warning" } else { "Normal" }.into()),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        action: Some(reason.to_string()),
        reporting_component: Some(component.to_string()),
        reporting_instance: Some(identity.to_string()),
        source: Some(EventSource {
            component: Some(component.to_string()),
            host: None,
        }),
        ..Event::default()
    }
}

/// Records an Event about `on` from the controllers (`vc-controller-manager`); a failure to
/// record is logged, never fatal.
pub async fn record(
    client: &kube::Client,
    on: &EventFor<'_>,
    reason: &str,
    message: &str,
    warning: bool,
    identity: &str,
) {
    let ev = event(on, reason, message, warning, CONTROLLERS, identity);
    let api: kube::Api<Event> = kube::Api::namespaced(client.clone(), on.namespace);
    if let Err(e) = api.create(&kube::api::PostParams::default(), &ev).await {
        tracing::warn!(namespace = %on.namespace, kind = %on.kind, name = %on.name, error = %crate::brief::kube(&e),
            "recording an event failed");
    }
}

/// The component the controllers' Events come from (Volcano's name for its controllers).
pub const CONTROLLERS: &str = "vc-controller-manager";
