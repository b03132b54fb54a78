//! `bus.volcano.sh/v1alpha1`: the Command, as `vcctl job suspend|resume` and `vcctl queue
//! operate` create it. Unlike the other kinds, its fields sit at the top level (no `spec`): an
//! `action` for the controller that owns the `target`, with an optional reason and message.
//! The controller carries the action out and deletes the Command.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// The fields of a Command. Used to derive the CustomResourceDefinition, whose `spec` is then
/// hoisted to the top level ([`crate::crd::hoist_spec`]); [`Command`] is the type to use.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "bus.volcano.sh",
    version = "v1alpha1",
    kind = "Command",
    plural = "commands",
    singular = "command",
    namespaced,
    root = "CommandCrd",
    printcolumn(name = "ACTION", type_ = "string", json_path = ".action"),
    printcolumn(name = "TARGET", type_ = "string", json_path = ".target.name"),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct CommandFields {
    /// The action: `AbortJob`, `ResumeJob`, `RestartJob`, `TerminateJob`, `CompleteJob` for a
    /// Job; `OpenQueue`, `CloseQueue` for a Queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The object the action is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<OwnerReference>,
    /// One-word CamelCase reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A Command: `metadata` plus the fields at the top level, as Volcano serves it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Command {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The action and its target.
    #[serde(flatten)]
    pub fields: CommandFields,
}

impl Serialize for Command {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire<'a> {
            api_version: &'a str,
            kind: &'a str,
            metadata: &'a ObjectMeta,
            #[serde(flatten)]
            fields: &'a CommandFields,
        }
        Wire {
            api_version: "bus.volcano.sh/v1alpha1",
            kind: "Command",
            metadata: &self.metadata,
            fields: &self.fields,
        }
        .serialize(ser)
    }
}

impl kube::core::Resource for Command {
    type DynamicType = ();
    type Scope = <CommandCrd as kube::core::Resource>::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        CommandCrd::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        CommandCrd::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        CommandCrd::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        CommandCrd::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vcctl_command_reads_with_its_fields_at_the_top() {
        let c: Command = serde_json::from_value(serde_json::json!({
            "apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
            "metadata": {"name": "tf-abortjob-x", "namespace": "ml"},
            "action": "AbortJob",
            "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                       "name": "tf", "uid": "u1", "controller": true}
        }))
        .expect("a command");
        assert_eq!(c.fields.action.as_deref(), Some("AbortJob"));
        assert_eq!(c.fields.target.expect("target").name, "tf");
        let back = serde_json::to_value(Command {
            metadata: ObjectMeta::default(),
            fields: CommandFields {
                action: Some("ResumeJob".into()),
                ..CommandFields::default()
            },
        })
        .expect("serializes");
        assert_eq!(back["action"], "ResumeJob");
        assert_eq!(back["kind"], "Command");
    }
}
