//! Arguments of plugins and actions, as Volcano writes them (strings, numbers or booleans), and
//! a reader that refuses keys a plugin does not know.

use std::collections::BTreeMap;

use serde::Deserialize;

/// One argument value: Volcano accepts strings, numbers and booleans.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum ArgValue {
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
}

impl ArgValue {
    /// As a float, parsing strings.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Self::Int(i) => Some(*i as f64),
            Self::Float(f) => Some(*f),
            Self::Str(s) => s.trim().parse().ok(),
            Self::Bool(_) => None,
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

    /// As text.
    pub fn as_string(&self) -> String {
        match self {
            Self::Bool(b) => b.to_string(),
            Self::Int(i) => i.to_string(),
            Self::Float(f) => f.to_string(),
            Self::Str(s) => s.clone(),
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

/// Reads a plugin's arguments, refusing unknown keys.
pub struct ArgReader<'a> {
    args: &'a Args,
    allowed: &'a [&'a str],
    prefixes: &'a [&'a str],
}

impl<'a> ArgReader<'a> {
    /// A reader that accepts the keys in `allowed` and any key that starts with one of
    /// `prefixes` (and goes on after it).
    pub fn new(
        args: &'a Args,
        allowed: &'a [&'a str],
        prefixes: &'a [&'a str],
    ) -> Result<Self, ArgError> {
        for key in args.keys() {
            let ok = allowed.contains(&key.as_str())
                || prefixes
                    .iter()
                    .any(|p| key.starts_with(p) && key.len() > p.len());
            if !ok {
                let mut known: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
                known.extend(prefixes.iter().map(|p| format!("{p}<name>")));
                let list = if known.is_empty() {
                    "this plugin takes no arguments".to_string()
                } else {
                    format!("known: {}", known.join(", "))
                };
                return Err(ArgError::new(
                    key.clone(),
                    format!("unknown argument ({list})"),
                ));
            }
        }
        Ok(Self {
            args,
            allowed,
            prefixes,
        })
    }

    /// A non-negative number, or `default` when the key is absent.
    pub fn f64_or(&self, key: &str, default: f64) -> Result<f64, ArgError> {
        debug_assert!(self.allowed.contains(&key) || !self.prefixes.is_empty());
        match self.args.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .filter(|f| f.is_finite() && *f >= 0.0)
                .ok_or_else(|| {
                    ArgError::new(
                        key,
                        format!("must be a non-negative number, got {:?}", v.as_string()),
                    )
                }),
        }
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
}
