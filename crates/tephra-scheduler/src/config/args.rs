//! Arguments of plugins and actions, as Volcano writes them: any YAML value (numbers, strings,
//! booleans, and nested lists and maps, as `resource-strategy-fit` has), and a reader that
//! checks them against what a plugin or action declares it reads ([`ArgSpec`]), reporting
//! every problem rather than the first.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// One argument value: any YAML value.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgValue {
    /// `null` or an empty value.
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
    /// A list.
    List(Vec<ArgValue>),
    /// A map (keys are taken as text).
    Map(BTreeMap<String, ArgValue>),
}

impl<'de> Deserialize<'de> for ArgValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ArgVisitor)
    }
}

struct ArgVisitor;

impl<'de> Visitor<'de> for ArgVisitor {
    type Value = ArgValue;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_unit<E>(self) -> Result<ArgValue, E> {
        Ok(ArgValue::Null)
    }
    fn visit_none<E>(self) -> Result<ArgValue, E> {
        Ok(ArgValue::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<ArgValue, D::Error> {
        ArgValue::deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<ArgValue, E> {
        Ok(ArgValue::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<ArgValue, E> {
        Ok(ArgValue::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<ArgValue, E> {
        Ok(i64::try_from(v).map_or(ArgValue::Float(v as f64), ArgValue::Int))
    }
    fn visit_f64<E>(self, v: f64) -> Result<ArgValue, E> {
        Ok(ArgValue::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<ArgValue, E> {
        Ok(ArgValue::Str(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<ArgValue, E> {
        Ok(ArgValue::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ArgValue, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element()? {
            items.push(v);
        }
        Ok(ArgValue::List(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ArgValue, A::Error> {
        let mut out = BTreeMap::new();
        while let Some(key) = map.next_key::<ArgValue>()? {
            let value = map.next_value()?;
            out.insert(key.as_string(), value);
        }
        Ok(ArgValue::Map(out))
    }
}

impl ArgValue {
    /// As a float, parsing strings.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Self::Int(i) => Some(*i as f64),
            Self::Float(f) => Some(*f),
            Self::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// As a boolean, parsing strings.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Self::Bool(b) => Some(*b),
            Self::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// As text (lists and maps in a compact YAML-like form, for messages).
    pub fn as_string(&self) -> String {
        match self {
            Self::Null => String::new(),
            Self::Bool(b) => b.to_string(),
            Self::Int(i) => i.to_string(),
            Self::Float(f) => f.to_string(),
            Self::Str(s) => s.clone(),
            Self::List(items) => format!(
                "[{}]",
                items
                    .iter()
                    .map(Self::as_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Self::Map(m) => format!(
                "{{{}}}",
                m.iter()
                    .map(|(k, v)| format!("{k}: {}", v.as_string()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// Arguments of a plugin or action.
pub type Args = BTreeMap<String, ArgValue>;

/// A bad argument: which key, and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct ArgError {
    /// The argument's key.
    pub key: String,
    /// What is wrong.
    pub reason: String,
}

impl ArgError {
    /// An error on `key`.
    pub fn new(key: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            reason: reason.into(),
        }
    }
}

/// Every bad argument of one plugin or action.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct ArgErrors(pub Vec<ArgError>);

impl From<ArgError> for ArgErrors {
    fn from(e: ArgError) -> Self {
        Self(vec![e])
    }
}

/// The arguments a plugin or action reads: exact keys, key prefixes (a prefix followed by a
/// name, such as `binpack.resources.<name>`), and keys Volcano defines that tephra accepts but
/// that have no effect here, each with the reason (a configuration that sets one gets a
/// warning, not an error, so that it migrates as it is).
#[derive(Clone, Copy, Debug)]
pub struct ArgSpec {
    /// Keys read.
    pub keys: &'static [&'static str],
    /// Key prefixes read.
    pub prefixes: &'static [&'static str],
    /// Keys (or prefixes ending in `.`) accepted without effect, with why.
    pub inert: &'static [(&'static str, &'static str)],
}

impl ArgSpec {
    /// A plugin or action that reads no arguments.
    pub const NONE: ArgSpec = ArgSpec {
        keys: &[],
        prefixes: &[],
        inert: &[],
    };

    fn inert_reason(&self, key: &str) -> Option<&'static str> {
        self.inert
            .iter()
            .find(|(k, _)| *k == key || (k.ends_with('.') && key.starts_with(k)))
            .map(|(_, why)| *why)
    }

    fn reads(&self, key: &str) -> bool {
        self.keys.contains(&key)
            || self
                .prefixes
                .iter()
                .any(|p| key.starts_with(p) && key.len() > p.len())
    }

    /// The keys of `args` that are accepted without effect, with why.
    pub fn inert_keys(&self, args: &Args) -> Vec<(String, &'static str)> {
        args.keys()
            .filter(|k| !self.reads(k))
            .filter_map(|k| self.inert_reason(k).map(|why| (k.clone(), why)))
            .collect()
    }
}

/// Reads arguments against an [`ArgSpec`], collecting every problem; [`ArgReader::finish`]
/// returns them all. A value that is wrong reads as its default meanwhile.
pub struct ArgReader<'a> {
    args: &'a Args,
    spec: &'a ArgSpec,
    errors: RefCell<Vec<ArgError>>,
}

impl<'a> ArgReader<'a> {
    /// A reader over `args`; every key the spec neither reads nor accepts is an error.
    pub fn new(args: &'a Args, spec: &'a ArgSpec) -> Self {
        let mut errors = Vec::new();
        for key in args.keys() {
            if !spec.reads(key) && spec.inert_reason(key).is_none() {
                let mut known: Vec<String> = spec.keys.iter().map(|s| s.to_string()).collect();
                known.extend(spec.prefixes.iter().map(|p| format!("{p}<name>")));
                known.extend(spec.inert.iter().map(|(k, _)| {
                    if k.ends_with('.') {
                        format!("{k}<name>")
                    } else {
                        k.to_string()
                    }
                }));
                let list = if known.is_empty() {
                    "this takes no arguments".to_string()
                } else {
                    format!("known: {}", known.join(", "))
                };
                errors.push(ArgError::new(
                    key.clone(),
                    format!("unknown argument ({list})"),
                ));
            }
        }
        Self {
            args,
            spec,
            errors: RefCell::new(errors),
        }
    }

    fn error(&self, key: &str, reason: String) {
        self.errors.borrow_mut().push(ArgError::new(key, reason));
    }

    /// A non-negative number, or `default` when the key is absent (or wrong, recorded).
    pub fn f64_or(&self, key: &str, default: f64) -> f64 {
        debug_assert!(self.spec.reads(key));
        match self.args.get(key) {
            None => default,
            Some(v) => match v.as_f64().filter(|f| f.is_finite() && *f >= 0.0) {
                Some(f) => f,
                None => {
                    self.error(
                        key,
                        format!("must be a non-negative number, got {:?}", v.as_string()),
                    );
                    default
                }
            },
        }
    }

    /// A boolean, or `default` when the key is absent (or wrong, recorded).
    pub fn bool_or(&self, key: &str, default: bool) -> bool {
        match self.args.get(key) {
            None => default,
            Some(v) => v.as_bool().unwrap_or_else(|| {
                self.error(
                    key,
                    format!("must be true or false, got {:?}", v.as_string()),
                );
                default
            }),
        }
    }

    /// The value as given.
    pub fn value(&self, key: &str) -> Option<&'a ArgValue> {
        self.args.get(key)
    }

    /// The value as text, if given.
    pub fn string(&self, key: &str) -> Option<String> {
        self.args.get(key).map(ArgValue::as_string)
    }

    /// Every argument whose key starts with `prefix`, with the rest of the key.
    pub fn with_prefix(&self, prefix: &str) -> Vec<(String, &'a ArgValue)> {
        self.args
            .iter()
            .filter_map(|(k, v)| k.strip_prefix(prefix).map(|rest| (rest.to_string(), v)))
            .collect()
    }

    /// Per-resource packing weights as Volcano's bin-packing plugins read them: `cpu` and
    /// `memory` from their keys (1 when absent), the resources `list` names (comma separated),
    /// each weighted by `<list>.<name>` (1 when absent). A weight for a resource the list does
    /// not name is refused.
    pub fn resource_weights(&self, cpu: &str, memory: &str, list: &str) -> Vec<(String, f64)> {
        let mut weights = vec![
            ("cpu".to_string(), self.f64_or(cpu, 1.0)),
            ("memory".to_string(), self.f64_or(memory, 1.0)),
        ];
        let named: Vec<String> = self
            .string(list)
            .map(|s| {
                s.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        for (name, value) in self.with_prefix(&format!("{list}.")) {
            let key = format!("{list}.{name}");
            if !named.contains(&name) {
                self.refuse(key, format!("{name} is not listed in {list}"));
                continue;
            }
            match value.as_f64().filter(|f| *f >= 0.0) {
                Some(w) => weights.push((name, w)),
                None => self.refuse(key, "must be a non-negative number"),
            }
        }
        for name in named {
            if !weights.iter().any(|(n, _)| *n == name) {
                weights.push((name, 1.0));
            }
        }
        weights
    }

    /// Records a problem found by the caller.
    pub fn refuse(&self, key: impl Into<String>, reason: impl Into<String>) {
        self.errors
            .borrow_mut()
            .push(ArgError::new(key.into(), reason.into()));
    }

    /// Every problem found, or `Ok`.
    pub fn finish(self) -> Result<(), ArgErrors> {
        let errors = self.errors.into_inner();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ArgErrors(errors))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: ArgSpec = ArgSpec {
        keys: &["a.weight", "b.weight"],
        prefixes: &["res."],
        inert: &[("old.weight", "no longer read")],
    };

    fn args(yaml: &str) -> Args {
        serde_saphyr::from_str(yaml).expect("args")
    }

    #[test]
    fn every_unknown_key_and_bad_value_is_reported() {
        let a = args("a.weight: x\nzz: 1\nyy: 2\nres.gpu: 3\nold.weight: 4\n");
        let r = ArgReader::new(&a, &SPEC);
        assert_eq!(r.f64_or("a.weight", 1.0), 1.0);
        let errs = r.finish().expect_err("three problems").0;
        let keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["yy", "zz", "a.weight"]);
        assert_eq!(
            SPEC.inert_keys(&a),
            [("old.weight".to_string(), "no longer read")]
        );
    }

    #[test]
    fn nested_values_parse() {
        let a = args("resources:\n  cpu: {type: LeastAllocated, weight: 1}\nlist: [1, two]\n");
        assert!(matches!(a.get("resources"), Some(ArgValue::Map(_))));
        assert_eq!(
            a.get("list").map(ArgValue::as_string).as_deref(),
            Some("[1, two]")
        );
    }
}
