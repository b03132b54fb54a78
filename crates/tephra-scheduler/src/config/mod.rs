//! The scheduler configuration, in Volcano's `volcano-scheduler.conf` format:
//!
//! ```yaml
//! actions: "enqueue, allocate, backfill"
//! tiers:
//! - plugins:
//!   - name: priority
//!   - name: gang
//!     enablePreemptable: false
//! configurations:
//! - name: allocate
//!   arguments: {minimumFeasibleNodes: 100}
//! ```
//!
//! Volcano's exact enable keys are accepted, including the irregular `enabledOverused`,
//! `enabledAllocatable`, `enabledVictim` and friends. An unknown action, plugin, key or argument
//! is an error that names it.
//!
//! This module only reads the format. What names and arguments are valid is the registry's to
//! say (see the crate root): [`SchedulerConfig::parse_with`] checks a configuration against any
//! [`Catalog`], and `SchedulerConfig::parse` against the built-in registry.

pub mod args;
pub mod enables;

use std::collections::BTreeMap;

use serde::Deserialize;

pub use args::{ArgError, ArgReader, ArgValue, Args};
pub use enables::{Enables, on};

/// A bad configuration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The YAML does not parse or has an unknown key.
    #[error("scheduler config: {0}")]
    Yaml(String),
    /// An action name is not known.
    #[error("scheduler config: actions: unknown action {name:?} (known: {known})")]
    UnknownAction {
        /// The name.
        name: String,
        /// The known actions, comma separated.
        known: String,
    },
    /// An action is known to Volcano but not provided by tephra yet.
    #[error("scheduler config: actions: action {0:?} is not available in this version of tephra")]
    UnavailableAction(String),
    /// A plugin name is not known.
    #[error(
        "scheduler config: tiers[{tier}].plugins[{index}].name: unknown plugin {name:?} (known: {known})"
    )]
    UnknownPlugin {
        /// Tier index.
        tier: usize,
        /// Plugin index within the tier.
        index: usize,
        /// The name.
        name: String,
        /// The known plugins, comma separated.
        known: String,
    },
    /// A plugin argument is not known or has a bad value.
    #[error(
        "scheduler config: tiers[{tier}].plugins[{index}] ({plugin}).arguments.{key}: {reason}"
    )]
    BadArgument {
        /// Tier index.
        tier: usize,
        /// Plugin index.
        index: usize,
        /// Plugin name.
        plugin: String,
        /// Argument key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// An action argument is not known or has a bad value.
    #[error("scheduler config: configurations ({action}).arguments.{key}: {reason}")]
    BadActionArgument {
        /// Action name.
        action: String,
        /// Argument key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// Two plugins both claim to order queues, which cannot be combined.
    #[error("scheduler config: {0}")]
    Conflict(String),
}

/// What a configuration is checked against: the plugins and actions a registry provides.
pub trait Catalog {
    /// Plugin names, in the order messages list them.
    fn plugin_names(&self) -> Vec<&'static str>;
    /// Action names, in the order messages list them.
    fn action_names(&self) -> Vec<&'static str>;
    /// Whether `name` is a Volcano action that is not available yet (naming one is an error,
    /// not a silent no-op).
    fn is_unavailable_action(&self, name: &str) -> bool;
    /// Checks a configured plugin's arguments; `None` when no plugin has its name.
    fn check_plugin(&self, cfg: &PluginConfig) -> Option<Result<PluginTraits, ArgError>>;
    /// Checks an action's arguments; `None` when no action has that name.
    fn check_action(&self, name: &str, args: &Args) -> Option<Result<(), ArgError>>;
}

/// What the configuration needs to know about a configured plugin to check it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PluginTraits {
    /// It orders queues (at most one plugin may).
    pub orders_queues: bool,
}

#[derive(Deserialize)]
struct RawPlugin {
    name: String,
    #[serde(default)]
    arguments: Args,
    #[serde(flatten)]
    switches: BTreeMap<String, ArgValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTier {
    #[serde(default)]
    plugins: Vec<RawPlugin>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfiguration {
    name: String,
    #[serde(default)]
    arguments: Args,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    actions: String,
    #[serde(default)]
    tiers: Vec<RawTier>,
    #[serde(default)]
    configurations: Vec<RawConfiguration>,
    /// Volcano accepts (and ignores) a `metrics` block in the same file.
    #[serde(default)]
    #[allow(dead_code)]
    metrics: Option<BTreeMap<String, ArgValue>>,
}

/// One configured plugin.
#[derive(Clone, Debug, PartialEq)]
pub struct PluginConfig {
    /// Plugin name.
    pub name: String,
    /// Enable switches.
    pub enables: Enables,
    /// Arguments.
    pub arguments: Args,
}

/// A parsed, validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct SchedulerConfig {
    /// Actions, in order.
    pub actions: Vec<String>,
    /// Tiers of plugins.
    pub tiers: Vec<Vec<PluginConfig>>,
    /// Action arguments by action name.
    pub action_args: BTreeMap<String, Args>,
}

/// Volcano's default `volcano-scheduler.conf`, as Volcano ships it, extended with tephra's GPU
/// and cluster-level plugins in a third tier.
pub const DEFAULT_CONFIG: &str = include_str!("../../../../examples/scheduler/tephra-default.conf");

impl SchedulerConfig {
    /// Parses a configuration and checks every name and argument against `catalog`.
    pub fn parse_with(text: &str, catalog: &dyn Catalog) -> Result<Self, ConfigError> {
        let raw: RawConfig =
            serde_saphyr::from_str(text).map_err(|e| ConfigError::Yaml(e.to_string()))?;
        let unknown_action = |name: String| ConfigError::UnknownAction {
            name,
            known: catalog.action_names().join(", "),
        };
        let mut actions = Vec::new();
        for name in raw
            .actions
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            if catalog.is_unavailable_action(name) {
                return Err(ConfigError::UnavailableAction(name.to_string()));
            }
            if !catalog.action_names().contains(&name) {
                return Err(unknown_action(name.to_string()));
            }
            actions.push(name.to_string());
        }
        let mut tiers = Vec::new();
        for (t, tier) in raw.tiers.into_iter().enumerate() {
            let mut plugins = Vec::new();
            for (i, p) in tier.plugins.into_iter().enumerate() {
                if !catalog.plugin_names().contains(&p.name.as_str()) {
                    return Err(ConfigError::UnknownPlugin {
                        tier: t,
                        index: i,
                        name: p.name,
                        known: catalog.plugin_names().join(", "),
                    });
                }
                let enables = enables_from(&p.switches, t, i)?;
                plugins.push(PluginConfig {
                    name: p.name,
                    enables,
                    arguments: p.arguments,
                });
            }
            tiers.push(plugins);
        }
        let mut checked = Vec::new();
        for (t, tier) in tiers.iter().enumerate() {
            for (i, cfg) in tier.iter().enumerate() {
                let Some(result) = catalog.check_plugin(cfg) else {
                    continue;
                };
                checked.push((t, i, cfg, result));
            }
        }
        let queue_orderers: Vec<&str> = checked
            .iter()
            .filter(|(_, _, cfg, r)| {
                r.as_ref().is_ok_and(|p| p.orders_queues) && on(cfg.enables.queue_order)
            })
            .map(|(_, _, cfg, _)| cfg.name.as_str())
            .collect();
        if queue_orderers.len() > 1 {
            return Err(ConfigError::Conflict(format!(
                "plugins {} all order queues; enable queue order on only one of them \
                 (set enableQueueOrder: false on the others)",
                queue_orderers.join(" and ")
            )));
        }
        for (t, i, cfg, result) in checked {
            if let Err(e) = result {
                return Err(ConfigError::BadArgument {
                    tier: t,
                    index: i,
                    plugin: cfg.name.clone(),
                    key: e.key,
                    reason: e.reason,
                });
            }
        }
        let mut action_args = BTreeMap::new();
        for c in raw.configurations {
            let Some(checked) = catalog.check_action(&c.name, &c.arguments) else {
                return Err(unknown_action(c.name));
            };
            checked.map_err(|e| ConfigError::BadActionArgument {
                action: c.name.clone(),
                key: e.key,
                reason: e.reason,
            })?;
            action_args.insert(c.name, c.arguments);
        }
        Ok(Self {
            actions,
            tiers,
            action_args,
        })
    }

    /// Arguments of an action (empty if none were configured).
    pub fn action_args(&self, action: &str) -> Args {
        self.action_args.get(action).cloned().unwrap_or_default()
    }
}

fn enables_from(
    switches: &BTreeMap<String, ArgValue>,
    tier: usize,
    index: usize,
) -> Result<Enables, ConfigError> {
    let mut enables = Enables::default();
    for (key, value) in switches {
        let Some(slot) = enables.slot(key) else {
            return Err(ConfigError::Yaml(format!(
                "tiers[{tier}].plugins[{index}]: unknown key {key:?}"
            )));
        };
        let Some(b) = value.as_bool() else {
            return Err(ConfigError::Yaml(format!(
                "tiers[{tier}].plugins[{index}].{key}: must be true or false, got {:?}",
                value.as_string()
            )));
        };
        *slot = Some(b);
    }
    Ok(enables)
}
