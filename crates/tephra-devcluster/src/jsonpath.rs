//! The small JSONPath subset that CRD printer columns use: `.a.b`, `[0]`, `[*]` and
//! `[?(@.type=="Ready")]` filters.

use serde_json::Value;

#[derive(Debug, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    Filter(String, String),
}

fn parse(path: &str) -> Option<Vec<Step>> {
    let mut steps = Vec::new();
    let s = path.trim().trim_start_matches('{').trim_end_matches('}');
    let s = s.strip_prefix('$').unwrap_or(s);
    let mut rest = s;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end > 0 {
                steps.push(Step::Field(r[..end].to_string()));
            }
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = &r[..end];
            if inner == "*" {
                steps.push(Step::All);
            } else if let Ok(i) = inner.parse() {
                steps.push(Step::Index(i));
            } else if let Some(f) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (field, value) = f.split_once("==")?;
                let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
                steps.push(Step::Filter(field.trim().to_string(), value.to_string()));
            } else {
                let name = inner.trim_matches(|c| c == '"' || c == '\'');
                steps.push(Step::Field(name.to_string()));
            }
            rest = &r[end + 1..];
        } else {
            return None;
        }
    }
    Some(steps)
}

/// Every value the path selects in `object`, in order.
pub fn select<'a>(object: &'a Value, path: &str) -> Vec<&'a Value> {
    let Some(steps) = parse(path) else {
        return Vec::new();
    };
    let mut current = vec![object];
    for step in &steps {
        let mut next = Vec::new();
        for v in current {
            match step {
                Step::Field(f) => next.extend(v.get(f)),
                Step::Index(i) => next.extend(v.get(*i)),
                Step::All => match v {
                    Value::Array(items) => next.extend(items.iter()),
                    Value::Object(map) => next.extend(map.values()),
                    _ => {}
                },
                Step::Filter(field, want) => {
                    for item in v.as_array().into_iter().flatten() {
                        let got = item.get(field).map(|g| match g {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        });
                        if got.as_deref() == Some(want.as_str()) {
                            next.push(item);
                        }
                    }
                }
            }
        }
        current = next;
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selects_fields_indexes_and_filters() {
        let obj = json!({"status": {"state": {"phase": "Running"},
            "conditions": [{"type": "A", "status": "False"}, {"type": "Scheduled", "status": "True"}]}});
        assert_eq!(select(&obj, ".status.state.phase"), vec![&json!("Running")]);
        assert_eq!(
            select(&obj, ".status.conditions[?(@.type==\"Scheduled\")].status"),
            vec![&json!("True")]
        );
        assert_eq!(
            select(&obj, ".status.conditions[0].type"),
            vec![&json!("A")]
        );
        assert_eq!(select(&obj, ".status.conditions[*].type").len(), 2);
        assert!(select(&obj, ".spec.missing").is_empty());
    }
}
