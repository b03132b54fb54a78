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

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

/// A bad configuration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The YAML does not parse or has an unknown key.
    #[error("scheduler config: {0}")]
    Yaml(String),
    /// An action name is not known.
    #[error("scheduler config: actions: unknown action {0:?} (known: {known})", known = crate::actions::KNOWN.join(", "))]
    UnknownAction(String),
    /// An action is known to Volcano but not provided by tephra yet.
    #[error("scheduler config: actions: action {0:?} is not available in this version of tephra")]
    UnavailableAction(String),
    /// A plugin name is not known.
    #[error("scheduler config: tiers[{tier}].plugins[{index}].name: unknown plugin {name:?} (known: {known})", known = crate::plugins::KNOWN.join(", "))]
    UnknownPlugin {
        /// Tier index.
        tier: usize,
        /// Plugin index within the tier.
        index: usize,
        /// The name.
        name: String,
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

/// The enable switches of a plugin. `None` means enabled (Volcano's default).
#[derive(Clone, Debug, Default, PartialEq)]
#[allow(missing_docs)]
pub struct Enables {
    pub job_order: Option<bool>,
    pub hierarchy: Option<bool>,
    pub job_ready: Option<bool>,
    pub job_pipelined: Option<bool>,
    pub task_order: Option<bool>,
    pub preemptable: Option<bool>,
    pub reclaimable: Option<bool>,
    pub preemptive: Option<bool>,
    pub queue_order: Option<bool>,
    pub cluster_order: Option<bool>,
    pub predicate: Option<bool>,
    pub best_node: Option<bool>,
    pub node_order: Option<bool>,
    pub target_job: Option<bool>,
    pub reserved_nodes: Option<bool>,
    pub job_enqueued: Option<bool>,
    pub victim: Option<bool>,
    pub job_starving: Option<bool>,
    pub overused: Option<bool>,
    pub allocatable: Option<bool>,
    pub hyper_node_order: Option<bool>,
    pub sub_job_ready: Option<bool>,
    pub sub_job_pipelined: Option<bool>,
    pub sub_job_order: Option<bool>,
    pub hyper_node_gradient: Option<bool>,
    pub job_valid: Option<bool>,
    pub job_enqueueable: Option<bool>,
    pub cluster_filter: Option<bool>,
    pub cluster_score: Option<bool>,
}

impl Enables {
    /// The switch behind a Volcano key, spelled exactly as Volcano spells it.
    fn slot(&mut self, key: &str) -> Option<&mut Option<bool>> {
        Some(match key {
            "enableJobOrder" => &mut self.job_order,
            "enableHierarchy" => &mut self.hierarchy,
            "enableJobReady" => &mut self.job_ready,
            "enableJobPipelined" => &mut self.job_pipelined,
            "enableTaskOrder" => &mut self.task_order,
            "enablePreemptable" => &mut self.preemptable,
            "enableReclaimable" => &mut self.reclaimable,
            "enablePreemptive" => &mut self.preemptive,
            "enableQueueOrder" => &mut self.queue_order,
            "enabledClusterOrder" => &mut self.cluster_order,
            "enablePredicate" => &mut self.predicate,
            "enableBestNode" => &mut self.best_node,
            "enableNodeOrder" => &mut self.node_order,
            "enableTargetJob" => &mut self.target_job,
            "enableReservedNodes" => &mut self.reserved_nodes,
            "enableJobEnqueued" => &mut self.job_enqueued,
            "enabledVictim" => &mut self.victim,
            "enableJobStarving" => &mut self.job_starving,
            "enabledOverused" => &mut self.overused,
            "enabledAllocatable" => &mut self.allocatable,
            "enabledHyperNodeOrder" => &mut self.hyper_node_order,
            "enabledSubJobReady" => &mut self.sub_job_ready,
            "enabledSubJobPipelined" => &mut self.sub_job_pipelined,
            "enabledSubJobOrder" => &mut self.sub_job_order,
            "enabledHyperNodeGradient" => &mut self.hyper_node_gradient,
            // tephra's own hooks
            "enableJobValid" => &mut self.job_valid,
            "enableJobEnqueueable" => &mut self.job_enqueueable,
            "enableClusterFilter" => &mut self.cluster_filter,
            "enableClusterScore" => &mut self.cluster_score,
            _ => return None,
        })
    }
}

/// Whether an optional switch is on (absent means on).
pub fn on(switch: Option<bool>) -> bool {
    switch.unwrap_or(true)
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
pub const DEFAULT_CONFIG: &str = include_str!("../../../examples/scheduler/tephra-default.conf");

impl SchedulerConfig {
    /// Parses and validates a configuration.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let raw: RawConfig =
            serde_saphyr::from_str(text).map_err(|e| ConfigError::Yaml(e.to_string()))?;
        let mut actions = Vec::new();
        for name in raw
            .actions
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            if crate::actions::UNAVAILABLE.contains(&name) {
                return Err(ConfigError::UnavailableAction(name.to_string()));
            }
            if !crate::actions::KNOWN.contains(&name) {
                return Err(ConfigError::UnknownAction(name.to_string()));
            }
            actions.push(name.to_string());
        }
        let mut tiers = Vec::new();
        for (t, tier) in raw.tiers.into_iter().enumerate() {
            let mut plugins = Vec::new();
            for (i, p) in tier.plugins.into_iter().enumerate() {
                if !crate::plugins::KNOWN.contains(&p.name.as_str()) {
                    return Err(ConfigError::UnknownPlugin {
                        tier: t,
                        index: i,
                        name: p.name,
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
        check_queue_order_conflict(&tiers)?;
        for (t, tier) in tiers.iter().enumerate() {
            for (i, cfg) in tier.iter().enumerate() {
                // Build once to validate arguments (each session builds fresh instances).
                crate::plugins::build(cfg).map_err(|(key, reason)| ConfigError::BadArgument {
                    tier: t,
                    index: i,
                    plugin: cfg.name.clone(),
                    key,
                    reason,
                })?;
            }
        }
        let mut action_args = BTreeMap::new();
        for c in raw.configurations {
            if !crate::actions::KNOWN.contains(&c.name.as_str()) {
                return Err(ConfigError::UnknownAction(c.name));
            }
            crate::actions::validate_args(&c.name, &c.arguments).map_err(|(key, reason)| {
                ConfigError::BadActionArgument {
                    action: c.name.clone(),
                    key,
                    reason,
                }
            })?;
            action_args.insert(c.name, c.arguments);
        }
        Ok(Self {
            actions,
            tiers,
            action_args,
        })
    }

    /// Tephra's default configuration.
    pub fn default_config() -> Self {
        match Self::parse(DEFAULT_CONFIG) {
            Ok(c) => c,
            // The default is a constant covered by tests; an empty config is the safe fallback.
            Err(_) => Self {
                actions: vec![],
                tiers: vec![],
                action_args: BTreeMap::new(),
            },
        }
    }

    /// Arguments of an action (empty if none were configured).
    pub fn action_args(&self, action: &str) -> Args {
        self.action_args.get(action).cloned().unwrap_or_default()
    }
}

fn check_queue_order_conflict(tiers: &[Vec<PluginConfig>]) -> Result<(), ConfigError> {
    let queue_orderers: Vec<&str> = tiers
        .iter()
        .flatten()
        .filter(|p| {
            (p.name == "proportion"
                || p.name == "capacity"
                || (p.name == "drf" && p.enables.hierarchy == Some(true)))
                && on(p.enables.queue_order)
        })
        .map(|p| p.name.as_str())
        .collect();
    if queue_orderers.len() > 1 {
        return Err(ConfigError::Conflict(format!(
            "plugins {} all order queues; enable queue order on only one of them \
             (set enableQueueOrder: false on the others)",
            queue_orderers.join(" and ")
        )));
    }
    Ok(())
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

/// Holds the configuration in force and swaps in a new one on reload, keeping the last good
/// configuration when the new text is bad.
#[derive(Clone, Debug)]
pub struct ConfigHolder {
    current: Arc<SchedulerConfig>,
    last_error: Option<ConfigError>,
}

impl ConfigHolder {
    /// Starts with `config`.
    pub fn new(config: SchedulerConfig) -> Self {
        Self {
            current: Arc::new(config),
            last_error: None,
        }
    }

    /// The configuration in force.
    pub fn current(&self) -> Arc<SchedulerConfig> {
        Arc::clone(&self.current)
    }

    /// Why the last reload was refused, if it was.
    pub fn last_error(&self) -> Option<&ConfigError> {
        self.last_error.as_ref()
    }

    /// Parses `text`; on success it takes effect, on error the last good config stays.
    pub fn reload(&mut self, text: &str) -> Result<(), ConfigError> {
        match SchedulerConfig::parse(text) {
            Ok(c) => {
                self.current = Arc::new(c);
                self.last_error = None;
                Ok(())
            }
            Err(e) => {
                self.last_error = Some(e.clone());
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Volcano's default config, byte for byte as the Volcano chart ships it.
    const VOLCANO_DEFAULT: &str = r#"actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"#;

    #[test]
    fn volcano_default_config_loads_as_it_is() {
        let c = SchedulerConfig::parse(VOLCANO_DEFAULT).unwrap();
        assert_eq!(c.actions, ["enqueue", "allocate", "backfill"]);
        assert_eq!(c.tiers.len(), 2);
        assert_eq!(c.tiers[0][1].enables.preemptable, Some(false));
    }

    #[test]
    fn tephra_default_config_loads() {
        let c = SchedulerConfig::parse(DEFAULT_CONFIG).unwrap();
        assert_eq!(c, SchedulerConfig::default_config());
        assert_eq!(c.tiers.len(), 3);
    }

    #[test]
    fn irregular_volcano_enable_keys_are_accepted() {
        let text = r#"actions: "allocate"
tiers:
- plugins:
  - name: proportion
    enabledOverused: false
    enabledAllocatable: true
    enableQueueOrder: true
  - name: gang
    enabledVictim: false
    enableJobStarving: false
"#;
        let c = SchedulerConfig::parse(text).unwrap();
        assert_eq!(c.tiers[0][0].enables.overused, Some(false));
        assert_eq!(c.tiers[0][1].enables.victim, Some(false));
    }

    #[test]
    fn unknown_names_are_errors_that_name_them() {
        let e = SchedulerConfig::parse("actions: \"enqueue, alocate\"").unwrap_err();
        assert!(e.to_string().contains("unknown action \"alocate\""), "{e}");
        let e = SchedulerConfig::parse("actions: allocate\ntiers:\n- plugins:\n  - name: gangg\n")
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("tiers[0].plugins[0].name: unknown plugin \"gangg\""),
            "{e}"
        );
        let e = SchedulerConfig::parse(
            "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n    enableJobOrdr: true\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("enableJobOrdr"), "{e}");
        let e = SchedulerConfig::parse("actions: allocate\ntiers:\n- plugins:\n  - name: binpack\n    arguments:\n      binpack.cpuu: 2\n").unwrap_err();
        assert!(
            e.to_string().contains("(binpack).arguments.binpack.cpuu"),
            "{e}"
        );
        let e = SchedulerConfig::parse("actoins: allocate\n").unwrap_err();
        assert!(e.to_string().contains("actoins"), "{e}");
    }

    #[test]
    fn drf_hierarchy_and_proportion_cannot_both_order_queues() {
        let text = "actions: allocate\ntiers:\n- plugins:\n  - name: drf\n    enableHierarchy: true\n  - name: proportion\n";
        let e = SchedulerConfig::parse(text).unwrap_err();
        assert!(
            e.to_string()
                .contains("drf and proportion all order queues"),
            "{e}"
        );
    }

    #[test]
    fn hot_reload_keeps_the_last_good_config() {
        let mut h = ConfigHolder::new(SchedulerConfig::parse(VOLCANO_DEFAULT).unwrap());
        assert!(h.reload("actions: \"enqueue, bogus\"").is_err());
        assert_eq!(h.current().actions, ["enqueue", "allocate", "backfill"]);
        assert!(h.last_error().is_some());
        h.reload("actions: \"allocate\"").unwrap();
        assert_eq!(h.current().actions, ["allocate"]);
        assert!(h.last_error().is_none());
    }
}
