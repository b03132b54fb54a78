//! The estimator against Kubernetes' own expected costs (`TestCostEstimation` in
//! apiextensions-apiserver `pkg/apiserver/schema/cel/compilation_test.go`) and against what a real
//! kube-apiserver 1.34 reported for tephra's earlier CRDs.

use serde_json::{Value, json};

use super::*;

fn array(item: Value, max: Option<i64>) -> Value {
    let mut s = json!({"type": "array", "items": item});
    if let Some(m) = max {
        s["maxItems"] = json!(m);
    }
    s
}

fn map_of(value: Value, max: Option<i64>) -> Value {
    let mut s = json!({"type": "object", "additionalProperties": value});
    if let Some(m) = max {
        s["maxProperties"] = json!(m);
    }
    s
}

fn string(max: Option<i64>) -> Value {
    let mut s = json!({"type": "string"});
    if let Some(m) = max {
        s["maxLength"] = json!(m);
    }
    s
}

fn cost(node: &Value, rule: &str) -> u64 {
    rule_cost(node, rule).unwrap_or_else(|e| panic!("{rule}: {e}"))
}

#[test]
fn upstream_cost_vectors_for_lists_and_maps() {
    let number = json!({"type": "number"});
    let boolean = json!({"type": "boolean"});
    let s = json!({"type": "string"});
    let all = "self.all(x, true)";
    assert_eq!(cost(&array(number.clone(), None), all), 4_718_591);
    assert_eq!(cost(&array(number.clone(), Some(10)), all), 32);
    assert_eq!(cost(&array(s.clone(), None), all), 3_145_727);
    assert_eq!(cost(&array(s.clone(), Some(20)), all), 62);
    assert_eq!(cost(&array(boolean.clone(), None), all), 1_887_437);
    assert_eq!(cost(&array(boolean.clone(), Some(5)), all), 17);
    assert_eq!(cost(&map_of(number.clone(), None), all), 1_348_169);
    assert_eq!(cost(&map_of(number.clone(), Some(10)), all), 32);
    assert_eq!(cost(&map_of(s.clone(), None), all), 1_179_647);
    assert_eq!(cost(&map_of(s.clone(), Some(3)), all), 11);
    assert_eq!(cost(&map_of(boolean, None), all), 943_718);
    assert_eq!(
        cost(
            &array(number.clone(), Some(10)),
            "self.all(x, self.all(y, true))"
        ),
        352
    );
    assert_eq!(
        cost(
            &array(number.clone(), Some(10)),
            "self.all(x, self.all(y, self.all(z, true)))"
        ),
        3552
    );
    assert_eq!(cost(&array(number, None), "self[1] == 0.0"), 2);
    assert_eq!(
        cost(&array(s.clone(), Some(8)), "self[1] == self[1]"),
        314_577
    );
}

#[test]
fn upstream_cost_vectors_for_strings() {
    assert_eq!(cost(&string(None), "self.contains('test')"), 314_574);
    assert_eq!(cost(&string(Some(10)), "self.contains('test')"), 5);
    assert_eq!(cost(&string(None), "self.startsWith('test')"), 2);
    assert_eq!(
        cost(&string(None), r#"size(self + "hello") > size("hello")"#),
        314_578
    );
    assert_eq!(
        cost(&string(Some(4)), r#"size(self + "hello") > size("hello")"#),
        7
    );
    assert_eq!(cost(&string(None), r#"self.matches("x")"#), 314_574);
    assert_eq!(cost(&string(Some(50)), r#"self.matches("x")"#), 22);
    assert_eq!(cost(&string(None), r#"self.matches("")"#), 1);
    assert_eq!(cost(&string(None), r#"self == "x""#), 2);
    assert_eq!(cost(&string(Some(0)), r#"self == "x""#), 1);
    assert_eq!(cost(&string(None), "self.find('[0-9]+') == ''"), 629_147);
    assert_eq!(
        cost(&string(None), "self.lowerAscii() == 'lower!'"),
        314_575
    );
    let ios = json!({"x-kubernetes-int-or-string": true});
    assert_eq!(cost(&ios, "isQuantity(self)"), 314_574);
    let mut bounded = ios.clone();
    bounded["maxLength"] = json!(20);
    assert_eq!(cost(&bounded, "isQuantity(self)"), 9);
}

#[test]
fn upstream_cost_vector_for_map_keys_of_size_zero() {
    let spec = map_of(json!({"type": "string"}), None);
    assert_eq!(cost(&spec, "self.all(x, x.contains(self[x]))"), 2_752_507);
    let mut bounded = map_of(string(Some(10)), Some(10));
    bounded["additionalProperties"]["maxLength"] = json!(10);
    assert_eq!(cost(&bounded, "self.all(x, x.contains(self[x]))"), 72);
}

fn quantity_map(max: Option<i64>) -> Value {
    map_of(
        json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}),
        max,
    )
}

/// The Queue rule a real kube-apiserver 1.34 refused with "estimated rule cost exceeds budget
/// by factor of 8.1x".
#[test]
fn the_refused_queue_rule_costs_what_the_api_server_said() {
    let root = json!({"type": "object", "properties": {
        "capability": quantity_map(Some(64)),
        "deserved": quantity_map(Some(64)),
    }});
    let rule = "!has(self.capability) || !has(self.deserved) || self.deserved.all(r, !(r in self.capability) || quantity(string(self.deserved[r])).compareTo(quantity(string(self.capability[r]))) <= 0)";
    let c = cost(&root, rule);
    assert_eq!(c, 80_531_847);
    assert!(cost_message("estimated rule cost", c, RULE_COST_LIMIT).contains("factor of 8.1x"));
}

/// The ResourceBinding rule refused at 46x: a rule on items of a 128-item list, over a map of
/// integers with no maxProperties.
#[test]
fn the_refused_binding_rule_costs_what_the_api_server_said() {
    let item = json!({"type": "object", "properties": {
        "tasks": {"type": "object", "additionalProperties": {"type": "integer", "format": "int32"}}
    }, "x-kubernetes-validations": [{"rule": "!has(self.tasks) || self.tasks.all(k, self.tasks[k] >= 0)"}]});
    let root = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "clusters": {"type": "array", "maxItems": 128, "items": item}
    }}}});
    let report = check_schema(&root, "spec.validation.openAPIV3Schema");
    assert_eq!(report.rules.len(), 1);
    assert_eq!(report.rules[0].cost, 3_595_117);
    assert_eq!(report.rules[0].cardinality, 128);
    assert_eq!(report.rules[0].total, 460_174_976);
    let problems = report.problems("spec.validation.openAPIV3Schema");
    assert!(problems[0].contains("factor of 46.0x"), "{problems:?}");
    assert_eq!(
        problems[1],
        "spec.validation.openAPIV3Schema.properties[spec].properties[clusters].items.\
         x-kubernetes-validations[0].rule: Forbidden: contributed to estimated rule cost total \
         exceeding cost limit for entire OpenAPIv3 schema"
    );
    assert!(
        problems[2].contains("entire OpenAPIv3 schema exceeds budget"),
        "{problems:?}"
    );
}

/// kube-apiserver 1.34 refused a CRD whose rule's `messageExpression` concatenates
/// `string(self.size)` (a string of unknown length), with these three causes, and took it with
/// a constant message.
#[test]
fn a_message_expression_is_costed_and_must_be_a_string() {
    let schema = |message: &str| {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "size": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.size < 10", "messageExpression": message}]}}})
    };
    let path = "spec.validation.openAPIV3Schema";
    let at = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].messageExpression";
    let problems = check_schema(&schema("'too big: ' + string(self.size)"), path).problems(path);
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(
        problems[0].starts_with(&format!(
            "{at}: Forbidden: estimated messageExpression cost exceeds budget by factor of more than 100x"
        )),
        "{problems:?}"
    );
    assert_eq!(
        problems[1],
        format!(
            "{at}: Forbidden: contributed to estimated rule cost total exceeding cost limit for \
             entire OpenAPIv3 schema"
        )
    );
    assert!(problems[2].starts_with(&format!("{path}: Forbidden: x-kubernetes-validations")));
    assert!(
        check_schema(&schema("'too big'"), path)
            .problems(path)
            .is_empty()
    );
    let not_a_string = check_schema(&schema("self.size"), path).problems(path);
    assert_eq!(
        not_a_string,
        vec![format!(
            "{at}: Invalid value: {{\"Rule\":\"self.size \\u003c 10\",\"Message\":\"\",\
             \"MessageExpression\":\"self.size\",\"Reason\":null,\"FieldPath\":\"\",\
             \"OptionalOldSelf\":null}}: messageExpression must evaluate to a string"
        )]
    );
}

#[test]
fn sign_is_a_global_function_as_the_api_server_declares_it() {
    let node = quantity_map(Some(8));
    let member = rule_cost(&node, "self.all(r, quantity(string(self[r])).sign() >= 0)");
    let err = member.expect_err("the member form does not compile");
    assert!(
        err.contains("found no matching overload for 'sign' applied to 'kubernetes.Quantity.()'"),
        "{err}"
    );
    rule_cost(&node, "self.all(r, sign(quantity(string(self[r]))) >= 0)")
        .expect("the global form compiles");
}

#[test]
fn unknown_fields_and_functions_do_not_compile() {
    let node = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    let err = rule_cost(&node, "self.b > 0").expect_err("no field b");
    assert!(err.contains("undefined field 'b'"), "{err}");
    let err = rule_cost(&node, "frobnicate(self.a)").expect_err("no such function");
    assert!(
        err.contains("undeclared reference to 'frobnicate'"),
        "{err}"
    );
    let err = rule_cost(&node, "self.a").expect_err("not a bool");
    assert!(err.contains("must evaluate to a bool"), "{err}");
}

#[test]
fn factors_are_printed_as_the_api_server_prints_them() {
    assert!(cost_message("x", 12_345_678, 10_000_000).contains("factor of 1.234568x"));
    assert!(cost_message("x", 24_160_000, 10_000_000).contains("factor of 2.4x"));
    assert!(cost_message("x", u64::MAX, 10_000_000).contains("factor of more than 100x"));
}
