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

pub use args::{ArgError, ArgErrors, ArgReader, ArgSpec, ArgValue, Args};
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
    /// A Volcano plugin tephra does not implement, refused because the configuration is checked
    /// strictly (`--strict-config`).
    #[error(
        "scheduler config: tiers[{tier}].plugins[{index}].name: {name:?} is a Volcano plugin that tephra does not implement (refused under --strict-config; without it, it loads with a warning and has no effect)"
    )]
    InertPlugin {
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
    /// Several of the above.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Several(Vec<ConfigError>),
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
    /// Whether `name` is a Volcano plugin this catalog does not implement: a configuration that
    /// names one loads with a warning (or is refused when checked strictly).
    fn is_inert_plugin(&self, name: &str) -> bool;
    /// Checks a configured plugin's arguments; `None` when no plugin has its name.
    fn check_plugin(&self, cfg: &PluginConfig) -> Option<Result<PluginTraits, ArgErrors>>;
    /// Checks an action's arguments; `None` when no action has that name. `Ok` carries the
    /// arguments accepted without effect, with why.
    #[allow(clippy::type_complexity)]
    fn check_action(
        &self,
        name: &str,
        args: &Args,
    ) -> Option<Result<Vec<(String, &'static str)>, ArgErrors>>;
}

/// What the configuration needs to know about a configured plugin to check it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PluginTraits {
    /// It orders queues (at most one plugin may).
    pub orders_queues: bool,
    /// Arguments accepted without effect, with why.
    pub inert_args: Vec<(String, &'static str)>,
}

/// How strictly a configuration is checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParseOptions {
    /// Refuse Volcano plugins tephra does not implement, instead of loading them with a
    /// warning (`--strict-config`).
    pub strict: bool,
}

#[derive(Deserialize)]
struct RawPlugin {
    name: String,
    #[serde(default)]
    arguments: Option<Args>,
    #[serde(flatten)]
    switches: BTreeMap<String, ArgValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTier {
    #[serde(default)]
    plugins: Option<Vec<RawPlugin>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfiguration {
    name: String,
    #[serde(default)]
    arguments: Option<Args>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    actions: Option<String>,
    #[serde(default)]
    tiers: Option<Vec<RawTier>>,
    #[serde(default)]
    configurations: Option<Vec<RawConfiguration>>,
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
    /// Tiers of plugins (the plugins tephra runs).
    pub tiers: Vec<Vec<PluginConfig>>,
    /// Action arguments by action name.
    pub action_args: BTreeMap<String, Args>,
    /// Volcano plugins the configuration names that tephra does not implement: loaded, with
    /// no effect.
    pub inert_plugins: Vec<String>,
    /// What loading the configuration has to say: inert plugins, arguments with no effect.
    pub warnings: Vec<String>,
}

/// Volcano's default `volcano-scheduler.conf`, as Volcano ships it, extended with tephra's GPU
/// and cluster-level plugins in a third tier.
pub const DEFAULT_CONFIG: &str = include_str!("../../../../examples/scheduler/tephra-default.conf");

/// Reads the YAML of a configuration. Like Volcano (which reads the file with yaml.v2's
/// `Unmarshal`), only the first document of a file counts; a YAML error names its line and
/// column.
fn read_raw(text: &str, warnings: &mut Vec<String>) -> Result<RawConfig, ConfigError> {
    match serde_saphyr::from_str::<RawConfig>(text) {
        Ok(raw) => Ok(raw),
        Err(first) => {
            let head = first_document(text).ok_or_else(|| ConfigError::Yaml(first.to_string()))?;
            let raw = serde_saphyr::from_str::<RawConfig>(head)
                .map_err(|_| ConfigError::Yaml(first.to_string()))?;
            warnings.push(
                "the file holds more than one YAML document; only the first is read, as Volcano does"
                    .into(),
            );
            Ok(raw)
        }
    }
}

/// The text of the first YAML document when another follows it (after a `---` or `...` line).
fn first_document(text: &str) -> Option<&str> {
    let mut offset = 0;
    let mut content = false;
    for line in text.split_inclusive('\n') {
        let l = line.trim_end();
        if content && (l == "---" || l == "...") {
            return Some(&text[..offset]);
        }
        let body = l.trim_start();
        if !body.is_empty() && !body.starts_with('#') && l != "---" {
            content = true;
        }
        offset += line.len();
    }
    None
}

impl SchedulerConfig {
    /// Parses a configuration and checks every name and argument against `catalog`. Every
    /// problem is reported, not only the first.
    pub fn parse_with(
        text: &str,
        catalog: &dyn Catalog,
        options: ParseOptions,
    ) -> Result<Self, ConfigError> {
        let mut warnings = Vec::new();
        let raw = read_raw(text, &mut warnings)?;
        let mut errors = Vec::new();
        let mut actions = Vec::new();
        for name in raw
            .actions
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            if catalog.is_unavailable_action(name) {
                errors.push(ConfigError::UnavailableAction(name.to_string()));
            } else if !catalog.action_names().contains(&name) {
                errors.push(ConfigError::UnknownAction {
                    name: name.to_string(),
                    known: catalog.action_names().join(", "),
                });
            } else {
                actions.push(name.to_string());
            }
        }
        let mut tiers = Vec::new();
        let mut inert_plugins = Vec::new();
        for (t, tier) in raw.tiers.unwrap_or_default().into_iter().enumerate() {
            let mut plugins = Vec::new();
            for (i, p) in tier.plugins.unwrap_or_default().into_iter().enumerate() {
                if catalog.is_inert_plugin(&p.name) {
                    if options.strict {
                        errors.push(ConfigError::InertPlugin {
                            tier: t,
                            index: i,
                            name: p.name,
                        });
                    } else {
                        warnings.push(format!(
                            "tiers[{t}].plugins[{i}]: {:?} is a Volcano plugin that tephra does not implement; it is loaded and has no effect",
                            p.name
                        ));
                        inert_plugins.push(p.name);
                    }
                    continue;
                }
                if !catalog.plugin_names().contains(&p.name.as_str()) {
                    errors.push(ConfigError::UnknownPlugin {
                        tier: t,
                        index: i,
                        name: p.name,
                        known: catalog.plugin_names().join(", "),
                    });
                    continue;
                }
                match enables_from(&p.switches, t, i) {
                    Ok((enables, obsolete)) => {
                        warnings.extend(obsolete);
                        plugins.push((
                            i,
                            PluginConfig {
                                name: p.name,
                                enables,
                                arguments: p.arguments.unwrap_or_default(),
                            },
                        ));
                    }
                    Err(e) => errors.extend(e),
                }
            }
            tiers.push(plugins);
        }
        let mut queue_orderers = Vec::new();
        for (t, tier) in tiers.iter().enumerate() {
            for (i, cfg) in tier {
                match catalog.check_plugin(cfg) {
                    None => {}
                    Some(Ok(traits)) => {
                        if traits.orders_queues && on(cfg.enables.queue_order) {
                            queue_orderers.push(cfg.name.clone());
                        }
                        for (key, why) in traits.inert_args {
                            warnings.push(format!(
                                "tiers[{t}].plugins[{i}] ({}).arguments.{key}: accepted, no effect in tephra ({why})",
                                cfg.name
                            ));
                        }
                    }
                    Some(Err(ArgErrors(list))) => {
                        errors.extend(list.into_iter().map(|e| ConfigError::BadArgument {
                            tier: t,
                            index: *i,
                            plugin: cfg.name.clone(),
                            key: e.key,
                            reason: e.reason,
                        }))
                    }
                }
            }
        }
        if queue_orderers.len() > 1 {
            errors.push(ConfigError::Conflict(format!(
                "plugins {} all order queues; enable queue order on only one of them \
                 (set enableQueueOrder: false on the others)",
                queue_orderers.join(" and ")
            )));
        }
        let mut action_args = BTreeMap::new();
        for c in raw.configurations.unwrap_or_default() {
            let args = c.arguments.unwrap_or_default();
            match catalog.check_action(&c.name, &args) {
                None => errors.push(ConfigError::UnknownAction {
                    name: c.name,
                    known: catalog.action_names().join(", "),
                }),
                Some(Err(ArgErrors(list))) => {
                    errors.extend(list.into_iter().map(|e| ConfigError::BadActionArgument {
                        action: c.name.clone(),
                        key: e.key,
                        reason: e.reason,
                    }))
                }
                Some(Ok(inert)) => {
                    for (key, why) in inert {
                        warnings.push(format!(
                            "configurations ({}).arguments.{key}: accepted, no effect in tephra ({why})",
                            c.name
                        ));
                    }
                    action_args.insert(c.name, args);
                }
            }
        }
        match errors.len() {
            0 => Ok(Self {
                actions,
                tiers: tiers
                    .into_iter()
                    .map(|tier| tier.into_iter().map(|(_, p)| p).collect())
                    .collect(),
                action_args,
                inert_plugins,
                warnings,
            }),
            1 => Err(errors.remove(0)),
            _ => Err(ConfigError::Several(errors)),
        }
    }

    /// Arguments of an action (empty if none were configured).
    pub fn action_args(&self, action: &str) -> Args {
        self.action_args.get(action).cloned().unwrap_or_default()
    }
}

/// The enable switches of a plugin, and warnings for switches Volcano no longer reads.
fn enables_from(
    switches: &BTreeMap<String, ArgValue>,
    tier: usize,
    index: usize,
) -> Result<(Enables, Vec<String>), Vec<ConfigError>> {
    let mut enables = Enables::default();
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    for (key, value) in switches {
        if enables::OBSOLETE.contains(&key.as_str()) {
            warnings.push(format!(
                "tiers[{tier}].plugins[{index}].{key}: Volcano no longer reads this switch; it has no effect"
            ));
            continue;
        }
        let Some(slot) = enables.slot(key) else {
            errors.push(ConfigError::Yaml(format!(
                "tiers[{tier}].plugins[{index}]: unknown key {key:?}"
            )));
            continue;
        };
        match value.as_bool() {
            Some(b) => *slot = Some(b),
            None => errors.push(ConfigError::Yaml(format!(
                "tiers[{tier}].plugins[{index}].{key}: must be true or false, got {:?}",
                value.as_string()
            ))),
        }
    }
    if errors.is_empty() {
        Ok((enables, warnings))
    } else {
        Err(errors)
    }
}
