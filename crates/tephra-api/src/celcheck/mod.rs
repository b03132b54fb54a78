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
    /// The API server's refusals, in its words: rules that do not compile, rules over the
    /// per-rule budget, and a schema over its total budget.
    pub fn problems(&self, schema_path: &str) -> Vec<String> {
        let mut out = Vec::new();
        for r in &self.rules {
            if let Some(err) = &r.error {
                out.push(format!(
                    "{}: Invalid value: {:?}: compilation failed: {err}",
                    r.path, r.rule
                ));
            } else if r.total > RULE_COST_LIMIT {
                out.push(format!(
                    "{}: Forbidden: {}",
                    r.path,
                    cost_message("estimated rule cost", r.total, RULE_COST_LIMIT)
                ));
            }
        }
        if self.total > SCHEMA_COST_LIMIT {
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
        .rules
        .iter()
        .fold(0u64, |t, r| t.saturating_add(r.total));
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
        .map_err(|e| format!("ERROR: <input>: {e}"))?;
    let checked = checker::check(&expr, decl).map_err(|e| format!("ERROR: <input>: {e}"))?;
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
            if let Some(fp) = r.get("fieldPath").and_then(Value::as_str)
                && !field_path_valid(node, fp)
            {
                error = Some(format!("fieldPath {fp:?} must be a valid path"));
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
            report.rules.push(RuleReport {
                path: rule_path,
                rule: rule.to_string(),
                cost,
                cardinality,
                total,
                error,
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
