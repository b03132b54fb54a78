//! The static checks kube-apiserver (1.34) makes of a CRD's `x-kubernetes-validations` rules
//! before it accepts the CRD: every rule must compile in Kubernetes' CRD environment, with its
//! functions declared exactly as the API server declares them (`sign(quantity(x))` is global,
//! for instance), and its estimated cost, times the number of times the rule can run, must stay
//! within 10,000,000 per rule and 100,000,000 for the whole schema.
//!
//! kube-cel evaluates rules but accepts calls the API server refuses and estimates cost
//! differently; this module follows the API server (cel-go's estimator and Kubernetes' cost and
//! size hooks), so that a CRD that passes here installs on a real cluster.
//!
//! - `types`: CEL types and the declared types of schema nodes;
//! - `decl`: schema node → declared type with its size bounds;
//! - `env`: the function declarations of the environment;
//! - `checker`: type checking and overload resolution;
//! - `cost`: the cost estimator (the walk over an expression; `cost/calls.rs`: what each
//!   function call costs).

mod checker;
mod cost;
mod decl;
mod env;
mod types;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

pub use cost::Range;

/// The most a single rule may cost, times the number of times it can run.
pub const RULE_COST_LIMIT: u64 = 10_000_000;
/// The most all the rules of one schema may cost together.
pub const SCHEMA_COST_LIMIT: u64 = 100_000_000;

/// What the API server would say of one rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleReport {
    /// The field path of the rule, as the API server names it.
    pub path: String,
    /// The rule.
    pub rule: String,
    /// Estimated cost of one evaluation (the upper bound).
    pub cost: u64,
    /// How many times the rule can run for one object.
    pub cardinality: u64,
    /// `cost × cardinality` (saturating): what counts against the budgets.
    pub total: u64,
    /// Why the rule does not compile, if it does not.
    pub error: Option<String>,
    /// The refusal of a `fieldPath` that names no field (then nothing else is said of the rule).
    pub field_path_error: Option<String>,
    /// The whole validation rule as the API server prints it in a refusal (Go's JSON of its
    /// `ValidationRule` struct).
    pub printed: String,
    /// The rule's `messageExpression`, when it has one and the rule compiles.
    pub message: Option<MessageReport>,
}

/// What the API server would say of a rule's `messageExpression`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageReport {
    /// Its field path (`...x-kubernetes-validations[i].messageExpression`).
    pub path: String,
    /// Estimated cost of one evaluation (the upper bound; not multiplied by the cardinality,
    /// as the API server counts it).
    pub cost: u64,
    /// Why it does not compile, or does not evaluate to a string.
    pub error: Option<String>,
}

/// The checks of one schema.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchemaReport {
    /// Every rule, in schema order.
    pub rules: Vec<RuleReport>,
    /// The sum of every rule's total.
    pub total: u64,
}

impl SchemaReport {
    /// The API server's refusals, in its words: rules that do not compile, rules and message
    /// expressions over the per-expression budget, and a schema over its total budget (naming
    /// the four costliest expressions that contributed, each over 1% of it).
    pub fn problems(&self, schema_path: &str) -> Vec<String> {
        let mut out = Vec::new();
        for r in &self.rules {
            if let Some(e) = &r.field_path_error {
                out.push(e.clone());
                continue;
            }
            if r.total > RULE_COST_LIMIT {
                out.push(format!(
                    "{}: Forbidden: {}",
                    r.path,
                    cost_message("estimated rule cost", r.total, RULE_COST_LIMIT)
                ));
            }
            if let Some(err) = &r.error {
                out.push(format!(
                    "{}: Invalid value: {}: compilation failed: {err}",
                    r.path, r.printed
                ));
            }
            if let Some(m) = &r.message {
                if let Some(err) = &m.error {
                    out.push(format!("{}: Invalid value: {}: {err}", m.path, r.printed));
                } else if m.cost > RULE_COST_LIMIT {
                    out.push(format!(
                        "{}: Forbidden: {}",
                        m.path,
                        cost_message("estimated messageExpression cost", m.cost, RULE_COST_LIMIT)
                    ));
                }
            }
        }
        if self.total > SCHEMA_COST_LIMIT {
            for path in self.most_expensive() {
                out.push(format!(
                    "{path}: Forbidden: contributed to estimated rule cost total exceeding cost \
                     limit for entire OpenAPIv3 schema"
                ));
            }
            out.push(format!(
                "{schema_path}: Forbidden: {}",
                cost_message(
                    "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                    self.total,
                    SCHEMA_COST_LIMIT
                )
            ));
        }
        out
    }

    /// Every expression's contribution to the total, in schema order: `(path, cost)`.
    fn contributions(&self) -> impl Iterator<Item = (&str, u64)> {
        self.rules.iter().flat_map(|r| {
            let rule = (r.error.is_none()).then_some((r.path.as_str(), r.total));
            let message = r
                .message
                .as_ref()
                .filter(|m| m.error.is_none())
                .map(|m| (m.path.as_str(), m.cost));
            rule.into_iter().chain(message)
        })
    }

    /// The four costliest expressions, each at least 1% of the schema's budget, costliest first.
    fn most_expensive(&self) -> Vec<&str> {
        let mut top: Vec<(&str, u64)> = self
            .contributions()
            .filter(|(_, c)| *c >= SCHEMA_COST_LIMIT / 100)
            .collect();
        top.sort_by_key(|t| std::cmp::Reverse(t.1));
        top.truncate(4);
        top.into_iter().map(|(p, _)| p).collect()
    }
}

/// The API server's wording of a cost over budget.
pub fn cost_message(what: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding \
         maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// Checks every version's schema of a CRD. Each item is `(schema path, report)`.
pub fn check_crd(crd: &CustomResourceDefinition) -> Vec<(String, SchemaReport)> {
    crd.spec
        .versions
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            let schema = v.schema.as_ref()?.open_api_v3_schema.as_ref()?;
            let value = serde_json::to_value(schema).ok()?;
            let path = if crd.spec.versions.len() == 1 {
                "spec.validation.openAPIV3Schema".to_string()
            } else {
                format!("spec.versions[{i}].schema.openAPIV3Schema")
            };
            let report = check_schema(&value, &path);
            Some((path, report))
        })
        .collect()
}

/// Checks the rules of one OpenAPI v3 schema (the root of a custom resource) at `path`.
pub fn check_schema(schema: &Value, path: &str) -> SchemaReport {
    let mut report = SchemaReport::default();
    walk(schema, path, Some(1), true, &mut report);
    report.total = report
        .contributions()
        .fold(0u64, |t, (_, c)| t.saturating_add(c));
    report
}

/// Checks one rule on a schema node that is not a resource root and runs once; for tests and
/// for measuring what a rule costs.
pub fn rule_cost(node: &Value, rule: &str) -> Result<u64, String> {
    let decl = decl::decl_type(node, "self", false).ok_or("the node is not visible to CEL")?;
    compile(rule, &decl)
}

/// Parses, type-checks and costs one rule with `self` of type `decl`.
fn compile(rule: &str, decl: &std::sync::Arc<types::DeclType>) -> Result<u64, String> {
    let expr = ::cel::parser::Parser::new()
        .parse(rule)
        .map_err(|e| parse_error(&e.to_string()))?;
    let checked = checker::check(&expr, decl).map_err(|e| format!("ERROR: <input>: {e}"))?;
    Ok(cost::estimate(&expr, &checked, decl).max)
}

/// A parse error as cel-go words it: located (`ERROR: <input>:1:12: ...`), with the source
/// line and a caret under it, each indented by a space.
fn parse_error(text: &str) -> String {
    let text = if text.starts_with("ERROR: ") {
        text.to_string()
    } else {
        format!("ERROR: <input>: {text}")
    };
    text.replace("\n| ", "\n | ")
}

/// A validation rule as Go prints its `ValidationRule` struct in JSON: every field, in
/// declaration order, `null` for an unset pointer, and `<`, `>` and `&` escaped.
fn printed_rule(r: &Value) -> String {
    let text = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
    let printed = serde_json::json!({
        "Rule": text("rule"),
        "Message": text("message"),
        "MessageExpression": text("messageExpression"),
        "Reason": r.get("reason").cloned().unwrap_or(Value::Null),
        "FieldPath": text("fieldPath"),
        "OptionalOldSelf": r.get("optionalOldSelf").cloned().unwrap_or(Value::Null),
    });
    // serde_json keeps the order written only with `preserve_order`; write the fields by hand.
    let field = |k: &str| format!("{:?}:{}", k, printed[k]);
    let body = [
        "Rule",
        "Message",
        "MessageExpression",
        "Reason",
        "FieldPath",
        "OptionalOldSelf",
    ]
    .map(field)
    .join(",");
    format!("{{{body}}}")
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// Parses, type-checks and costs a `messageExpression` with `self` of type `decl`: it must
/// evaluate to a string.
fn compile_message(text: &str, decl: &std::sync::Arc<types::DeclType>) -> Result<u64, String> {
    let expr = ::cel::parser::Parser::new().parse(text).map_err(|e| {
        format!(
            "messageExpression compilation failed: {}",
            parse_error(&e.to_string())
        )
    })?;
    let (checked, ty) = checker::check_any(&expr, decl)
        .map_err(|e| format!("messageExpression compilation failed: ERROR: <input>: {e}"))?;
    if !matches!(ty, types::CelType::String | types::CelType::Dyn) {
        return Err("messageExpression must evaluate to a string".into());
    }
    Ok(cost::estimate(&expr, &checked, decl).max)
}

fn walk(node: &Value, path: &str, card: Option<u64>, root: bool, report: &mut SchemaReport) {
    if let Some(rules) = node
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        let embedded = node
            .get("x-kubernetes-embedded-resource")
            .and_then(Value::as_bool)
            == Some(true);
        let decl = decl::decl_type(node, "self", root || embedded);
        for (i, r) in rules.iter().enumerate() {
            let rule = r.get("rule").and_then(Value::as_str).unwrap_or_default();
            let rule_path = format!("{path}.x-kubernetes-validations[{i}].rule");
            let (cost, mut error) = match &decl {
                None => (0, Some("the node is not visible to CEL".to_string())),
                Some(d) => match compile(rule, d) {
                    Ok(c) => (c, None),
                    Err(e) => (0, Some(e)),
                },
            };
            let mut field_path_error = None;
            if let Some(fp) = r.get("fieldPath").and_then(Value::as_str)
                && !field_path_valid(node, fp)
            {
                // A schema error: the API server names the field and checks no CEL here.
                error = Some(format!("fieldPath {fp:?} must be a valid path"));
                field_path_error = Some(format!(
                    "{path}.x-kubernetes-validations[{i}].fieldPath: Invalid value: {fp:?}: \
                     must be a valid path"
                ));
            }
            let cardinality = card.unwrap_or_else(|| {
                let min = decl.as_ref().map_or(0, |d| d.min_serialized_size);
                (decl::MAX_REQUEST_SIZE_BYTES / (min + 1)) as u64
            });
            let total = if cost == 0 {
                0
            } else if u64::MAX / cost < cardinality {
                u64::MAX
            } else {
                cost * cardinality
            };
            let message = r
                .get("messageExpression")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty() && error.is_none())
                .zip(decl.as_ref())
                .map(|(m, d)| {
                    let path = format!("{path}.x-kubernetes-validations[{i}].messageExpression");
                    match compile_message(m, d) {
                        Ok(cost) => MessageReport {
                            path,
                            cost,
                            error: None,
                        },
                        Err(e) => MessageReport {
                            path,
                            cost: 0,
                            error: Some(e),
                        },
                    }
                });
            report.rules.push(RuleReport {
                field_path_error,
                printed: printed_rule(r),
                path: rule_path,
                rule: rule.to_string(),
                cost,
                cardinality,
                total,
                error,
                message,
            });
        }
    }
    let child_card =
        card.and_then(|c| decl::max_elements_factor(node).map(|f| c.saturating_mul(f)));
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            walk(
                prop,
                &format!("{path}.properties[{name}]"),
                child_card,
                false,
                report,
            );
        }
    }
    if let Some(items) = node.get("items").filter(|i| i.is_object()) {
        walk(items, &format!("{path}.items"), child_card, false, report);
    }
    if let Some(add) = node.get("additionalProperties").filter(|a| a.is_object()) {
        walk(
            add,
            &format!("{path}.additionalProperties"),
            child_card,
            false,
            report,
        );
    }
}

/// Whether a rule's `fieldPath` names a field under `schema`: `.name` steps into a property,
/// `['key']` into a map's values (array items cannot be named).
fn field_path_valid(schema: &Value, path: &str) -> bool {
    let mut cur = schema;
    let mut rest = path.trim();
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("['") {
            let Some(end) = after.find("']") else {
                return false;
            };
            let Some(values) = cur.get("additionalProperties").filter(|a| a.is_object()) else {
                return false;
            };
            cur = values;
            rest = &after[end + 2..];
        } else if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let Some(next) = cur.get("properties").and_then(|p| p.get(&after[..end])) else {
                return false;
            };
            cur = next;
            rest = &after[end..];
        } else {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests;
