//! Server-side apply, as a field-manager-aware merge: the applied configuration is merged into
//! the live object (lists by their merge keys for built-in kinds, atomically for custom
//! resources); a field another manager owns with a different value is a conflict (409) unless
//! `force`; fields this manager applied before and no longer applies are removed unless someone
//! else owns them; and `metadata.managedFields` records each manager's fields. Ordinary writes
//! (create, update, patch) move the fields they change to their manager, with operation
//! `Update`.

use serde_json::Value;

use super::fields::{self, FieldSet};
use super::strategic::{ListStrategy, apply_list_strategy};
use crate::status::{ApiError, Cause};

/// One manager's entry, parsed.
#[derive(Clone, Debug)]
struct Managed {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    set: FieldSet,
}

/// The entries of writes through a subresource (`status`), kept as they are by writes to the
/// main resource.
fn subresource_entries(object: &Value) -> Vec<Value> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|e| e.get("subresource").is_some())
        .cloned()
        .collect()
}

fn read_managed(object: &Value) -> Vec<Managed> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|e| e.get("subresource").is_none())
        .map(|e| {
            let s = |k: &str| {
                e.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            Managed {
                manager: s("manager"),
                operation: s("operation"),
                api_version: s("apiVersion"),
                time: s("time"),
                set: e
                    .get("fieldsV1")
                    .map(fields::from_fields_v1)
                    .unwrap_or_default(),
            }
        })
        .collect()
}

fn write_managed(object: &mut Value, managed: &[Managed], kept: Vec<Value>) {
    let mut entries: Vec<Value> = managed
        .iter()
        .filter(|m| !m.set.is_empty())
        .map(|m| fields::entry(&m.manager, &m.operation, &m.api_version, &m.time, &m.set))
        .collect();
    entries.extend(kept);
    fields::sort_entries(&mut entries);
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if entries.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(entries));
        }
    }
}

/// Records an ordinary write by `manager`: the fields that changed from `old` to `new` move to
/// it (operation `Update`); fields that disappeared leave every manager.
pub fn record_update(old: Option<&Value>, new: &mut Value, manager: &str, keyed: bool, time: &str) {
    let mut managed = old.map(read_managed).unwrap_or_default();
    let (leaves, members) = fields::update_set(new, keyed);
    let changed = changed_paths(old, new, &leaves, &members);
    for m in &mut managed {
        m.set
            .retain(|p| !removed(old, new, p) && !changed.contains(p));
    }
    if !changed.is_empty() {
        let api_version = new
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        match managed
            .iter_mut()
            .find(|m| m.manager == manager && m.operation == "Update")
        {
            Some(m) => {
                m.set.extend(changed);
                m.time = time.to_string();
            }
            None => managed.push(Managed {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version,
                time: time.to_string(),
                set: changed,
            }),
        }
    }
    let kept = old.map(subresource_entries).unwrap_or_default();
    write_managed(new, &managed, kept);
}

/// Whether a path names a list item (its key or value), which is owned as a whole.
fn is_item(p: &[String]) -> bool {
    p.last()
        .is_some_and(|e| e.starts_with("k:") || e.starts_with("v:"))
}

/// Whether a write from `old` to `new` removed the field at `p`: only what was there leaves
/// its managers (a field applied but never stored, such as a Secret's `stringData`, stays).
fn removed(old: Option<&Value>, new: &Value, p: &[String]) -> bool {
    old.is_some_and(|o| fields::lookup(o, p).is_some()) && fields::lookup(new, p).is_none()
}

/// What a write from `old` to `new` changed, as server-side apply's comparison finds it: the
/// leaves whose value differs, and the list items, maps and lists `old` lacked.
fn changed_paths(
    old: Option<&Value>,
    new: &Value,
    leaves: &FieldSet,
    members: &FieldSet,
) -> FieldSet {
    let Some(o) = old else {
        return leaves.union(members).cloned().collect();
    };
    let added = |p: &&Vec<String>| fields::lookup(o, p).is_none();
    let mut changed: FieldSet = leaves
        .iter()
        .filter(|p| {
            if is_item(p) {
                added(p)
            } else {
                fields::lookup(o, p) != fields::lookup(new, p)
            }
        })
        .cloned()
        .collect();
    changed.extend(members.iter().filter(added).cloned());
    changed
}

/// Records a write through the `status` subresource by `manager`: the status fields that
/// changed move to its `status` entry (operation `Update`, `subresource: status`).
pub fn record_status_update(old: &Value, new: &mut Value, manager: &str, keyed: bool, time: &str) {
    let (leaves, members) = fields::status_update_set(new, keyed);
    let changed = changed_paths(Some(old), new, &leaves, &members);
    let main = read_managed(new);
    let mut entries: Vec<Value> = main
        .iter()
        .filter(|m| !m.set.is_empty())
        .map(|m| fields::entry(&m.manager, &m.operation, &m.api_version, &m.time, &m.set))
        .collect();
    let api_version = new
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut found = false;
    for e in subresource_entries(new) {
        let mut set: FieldSet = e
            .get("fieldsV1")
            .map(fields::from_fields_v1)
            .unwrap_or_default();
        set.retain(|p| !removed(Some(old), new, p) && !changed.contains(p));
        let text = |k: &str| {
            e.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let mine = text("manager") == manager && text("operation") == "Update";
        let mut t = text("time");
        if mine {
            found = true;
            set.extend(changed.iter().cloned());
            if !changed.is_empty() {
                t = time.to_string();
            }
        }
        if !set.is_empty() {
            let mut entry = fields::entry(
                &text("manager"),
                &text("operation"),
                &text("apiVersion"),
                &t,
                &set,
            );
            entry["subresource"] = e.get("subresource").cloned().unwrap_or(Value::Null);
            entries.push(entry);
        }
    }
    if !found && !changed.is_empty() {
        let mut entry = fields::entry(manager, "Update", &api_version, time, &changed);
        entry["subresource"] = serde_json::json!("status");
        entries.push(entry);
    }
    fields::sort_entries(&mut entries);
    if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        if entries.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(entries));
        }
    }
}

/// Whether applying `applied` changes the live value at `p`. An empty map applied where the
/// live object has a map changes nothing there (`spec: {}` merges into any spec), unless the
/// map is atomic (a selector), which the applied one replaces.
fn changes(applied: &Value, live: &Value, p: &[String], keyed: bool) -> bool {
    let atomic = p
        .last()
        .and_then(|e| e.strip_prefix("f:"))
        .is_some_and(|k| fields::atomic_field(k, keyed));
    match (fields::lookup(applied, p), fields::lookup(live, p)) {
        (Some(Value::Object(a)), Some(Value::Object(_))) if a.is_empty() && !atomic => false,
        (a, l) => a != l,
    }
}

/// Applies `applied` as `manager` to `live` (absent: the object is created from it).
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    keyed: bool,
    time: &str,
) -> Result<Value, ApiError> {
    let applied_set = fields::field_set(applied, keyed);
    let api_version = applied
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let Some(live) = live else {
        let mut obj = applied.clone();
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        write_managed(
            &mut obj,
            &[Managed {
                manager: manager.into(),
                operation: "Apply".into(),
                api_version,
                time: time.into(),
                set: applied_set,
            }],
            Vec::new(),
        );
        return Ok(obj);
    };
    let mut managed = read_managed(live);
    // Conflicts: a field someone else owns, applied with a different value.
    let mut conflicts: Vec<(String, String)> = Vec::new();
    for m in managed.iter().filter(|m| m.manager != manager) {
        for p in m.set.intersection(&applied_set) {
            // A list item is changed as a whole only when the live object lacks it (a field
            // the registry dropped after another manager applied it, say); otherwise its
            // fields are.
            if is_item(p) {
                if fields::lookup(live, p).is_none() {
                    conflicts.push((m.manager.clone(), fields::display(p)));
                }
                continue;
            }
            if changes(applied, live, p, keyed) {
                conflicts.push((m.manager.clone(), fields::display(p)));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(&conflicts));
    }
    if force {
        // Forcing takes the conflicting fields; fields applied with the value another manager
        // set stay theirs as well (shared ownership).
        for m in managed.iter_mut().filter(|m| m.manager != manager) {
            m.set.retain(|p| {
                !applied_set.contains(p) || is_item(p) || !changes(applied, live, p, keyed)
            });
        }
    }
    let mut out = live.clone();
    // Fields this manager applied before but no longer does, that nobody else owns.
    let previous: FieldSet = managed
        .iter()
        .filter(|m| m.manager == manager && m.operation == "Apply")
        .flat_map(|m| m.set.iter().cloned())
        .collect();
    let others: FieldSet = managed
        .iter()
        .filter(|m| !(m.manager == manager && m.operation == "Apply"))
        .flat_map(|m| m.set.iter().cloned())
        .collect();
    let dropped_all: FieldSet = previous
        .difference(&applied_set)
        .filter(|p| !others.contains(*p))
        .cloned()
        .collect();
    // A dropped list item goes whole: its fields are not removed one by one first (that
    // would take away the key it is found by).
    let mut dropped: Vec<_> = dropped_all
        .iter()
        .filter(|p| !(1..p.len()).any(|len| is_item(&p[..len]) && dropped_all.contains(&p[..len])))
        .cloned()
        .collect();
    dropped.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in &dropped {
        fields::remove(&mut out, p);
        // A map or list left empty by the removal goes too (`annotations: {}`).
        for len in (1..p.len()).rev() {
            let parent = &p[..len];
            let emptied = fields::lookup(&out, parent).is_some_and(|v| match v {
                Value::Object(m) => m.is_empty(),
                Value::Array(a) => a.is_empty(),
                _ => false,
            });
            if parent.last().is_some_and(|e| e.starts_with("f:")) && emptied {
                fields::remove(&mut out, parent);
            } else {
                break;
            }
        }
    }
    let mut parents = Vec::new();
    merge_applied(&mut out, applied, keyed, &mut parents);
    // An apply that changes nothing leaves its manager's time as it was (none, for a new one).
    let unchanged = without_managed_fields(&out) == without_managed_fields(live);
    let previous_time = managed
        .iter()
        .find(|m| m.manager == manager && m.operation == "Apply")
        .map(|m| m.time.clone())
        .unwrap_or_default();
    managed.retain(|m| !(m.manager == manager && m.operation == "Apply"));
    managed.push(Managed {
        manager: manager.into(),
        operation: "Apply".into(),
        api_version,
        time: if unchanged {
            previous_time
        } else {
            time.into()
        },
        set: applied_set,
    });
    write_managed(&mut out, &managed, subresource_entries(live));
    Ok(out)
}

fn without_managed_fields(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    v
}

fn conflict_error(conflicts: &[(String, String)]) -> ApiError {
    let n = conflicts.len();
    let message = if let [(mgr, path)] = conflicts {
        format!("Apply failed with 1 conflict: conflict with {mgr:?}: {path}")
    } else {
        let mut s = format!("Apply failed with {n} conflicts: ");
        let mut managers: Vec<&String> = conflicts.iter().map(|(m, _)| m).collect();
        managers.dedup();
        for mgr in managers {
            s.push_str(&format!("conflicts with {mgr:?}:"));
            for (_, p) in conflicts.iter().filter(|(m, _)| m == mgr) {
                s.push_str(&format!("\n- {p}"));
            }
            s.push('\n');
        }
        s.trim_end().to_string()
    };
    let causes = conflicts
        .iter()
        .map(|(m, p)| Cause {
            reason: "FieldManagerConflict".into(),
            message: format!("conflict with {m:?}"),
            field: p.clone(),
        })
        .collect();
    let mut e = ApiError::invalid("", "", "", causes);
    e.code = 409;
    e.reason = "Conflict";
    e.message = message;
    if let Some(d) = e.details.as_mut().and_then(Value::as_object_mut) {
        d.remove("name");
        d.remove("group");
        d.remove("kind");
    }
    e
}

fn merge_applied(live: &mut Value, applied: &Value, keyed: bool, parents: &mut Vec<String>) {
    let (Some(l), Some(a)) = (live.as_object_mut(), applied.as_object()) else {
        *live = applied.clone();
        return;
    };
    for (k, v) in a {
        if parents.is_empty() && k == "status" {
            continue;
        }
        if parents.len() == 1 && parents[0] == "metadata" && k == "managedFields" {
            continue;
        }
        match (l.get_mut(k), v) {
            (Some(lv @ Value::Object(_)), Value::Object(_)) => {
                parents.push(k.clone());
                merge_applied(lv, v, keyed, parents);
                parents.pop();
            }
            (Some(Value::Array(li)), Value::Array(ai)) => {
                let strategy = if keyed || k == "finalizers" {
                    apply_list_strategy(parents, k)
                } else {
                    ListStrategy::Atomic
                };
                match strategy {
                    ListStrategy::Key(key) => {
                        parents.push(k.clone());
                        for item in ai {
                            match item
                                .get(key)
                                .and_then(|id| li.iter_mut().find(|x| x.get(key) == Some(id)))
                            {
                                Some(existing) => merge_applied(existing, item, keyed, parents),
                                None => li.push(item.clone()),
                            }
                        }
                        parents.pop();
                    }
                    ListStrategy::Set => {
                        for item in ai {
                            if !li.contains(item) {
                                li.push(item.clone());
                            }
                        }
                    }
                    ListStrategy::Atomic => *li = ai.clone(),
                }
            }
            _ => {
                l.insert(k.clone(), v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(queue: &str) -> Value {
        json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j"}, "spec": {"queue": queue, "minAvailable": 1}})
    }

    #[test]
    fn apply_creates_merges_and_conflicts_with_other_managers() {
        let created = apply(None, &job("a"), "alice", false, false, "t").expect("created");
        assert_eq!(created["metadata"]["managedFields"][0]["manager"], "alice");
        // Same value from another manager: shared ownership, no conflict.
        let shared = apply(Some(&created), &job("a"), "bob", false, false, "t").expect("shared");
        // A different value: conflict naming the field and the manager.
        let err =
            apply(Some(&shared), &job("b"), "carol", false, false, "t").expect_err("conflict");
        assert_eq!(err.code, 409);
        assert!(err.message.contains(".spec.queue"), "{}", err.message);
        let forced = apply(Some(&shared), &job("b"), "carol", true, false, "t").expect("forced");
        assert_eq!(forced["spec"]["queue"], "b");
    }

    #[test]
    fn fields_a_manager_stops_applying_are_removed() {
        let mut first = job("a");
        first["spec"]["priorityClassName"] = json!("high");
        let live = apply(None, &first, "alice", false, false, "t").expect("created");
        let again = apply(Some(&live), &job("a"), "alice", false, false, "t").expect("applied");
        assert!(again["spec"].get("priorityClassName").is_none());
        assert_eq!(again["spec"]["minAvailable"], 1);
    }

    fn pod(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    }

    #[test]
    fn a_list_item_no_longer_applied_goes_whole() {
        let gated = pod(json!({"containers": [{"name": "c", "image": "i"}],
            "schedulingGates": [{"name": "g"}]}));
        let live = apply(None, &gated, "alice", false, true, "t").expect("created");
        let ungated = pod(json!({"containers": [{"name": "c", "image": "i"}]}));
        let again = apply(Some(&live), &ungated, "alice", false, true, "t").expect("applied");
        assert!(again["spec"].get("schedulingGates").is_none(), "{again}");
    }

    #[test]
    fn an_empty_map_applied_over_a_map_is_no_conflict_but_a_selector_is() {
        let live = apply(None, &pod(json!({})), "bob", false, true, "t").expect("created");
        let mut placed = live.clone();
        placed["spec"]["nodeName"] = json!("n");
        record_update(Some(&live), &mut placed, "carol", true, "t");
        apply(Some(&placed), &pod(json!({})), "alice", false, true, "t").expect("no conflict");
        let selecting = pod(json!({"nodeSelector": {"a": "b"}}));
        let live = apply(None, &selecting, "bob", false, true, "t").expect("created");
        let other = pod(json!({"nodeSelector": {"a": "c"}}));
        let err = apply(Some(&live), &other, "alice", false, true, "t").expect_err("conflict");
        assert!(
            err.message.contains(".spec.nodeSelector"),
            "{}",
            err.message
        );
    }

    #[test]
    fn updates_take_over_the_fields_they_change() {
        let live = apply(None, &job("a"), "alice", false, false, "t").expect("created");
        let mut new = live.clone();
        new["spec"]["queue"] = json!("z");
        record_update(Some(&live), &mut new, "kubectl-edit", false, "t");
        let err = apply(Some(&new), &job("a"), "alice", false, false, "t").expect_err("conflict");
        assert!(err.message.contains("kubectl-edit"), "{}", err.message);
    }
}
