//! An object's `status.conditions`, as the devcluster's controllers and subresources set them:
//! one condition per type, replaced only when its status changes (so that its transition time
//! stays that of the last change).

use serde_json::{Value, json};

/// Sets (or replaces) a condition in `status.conditions`.
pub fn set_condition(obj: &mut Value, condition: Value) {
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    let t = condition.get("type").cloned();
    let list = obj["status"]
        .as_object_mut()
        .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
    if let Some(Value::Array(items)) = list {
        match items.iter_mut().find(|c| c.get("type") == t.as_ref()) {
            Some(existing) => {
                if existing.get("status") != condition.get("status") {
                    *existing = condition;
                }
            }
            None => items.push(condition),
        }
    }
}
