//! tephra's scheduler core. Pure: no IO, no async runtime, no clock; time comes in as a value.
//!
//! Feed a [`Cache`] with [`Event`]s, take a [`Snapshot`], and [`schedule`] it with a
//! [`SchedulerConfig`]: a session opens, runs every configured action, and closes into
//! [`Decisions`].
//!
//! Layers, each depending only on those below it:
//!
//! | layer | modules |
//! | --- | --- |
//! | registry | this file: the built-in [`PLUGINS`] and [`ACTIONS`] by name, [`schedule`] |
//! | plugins, actions | [`plugins`] (one file each), [`actions`] (one file each); never each other |
//! | placement | [`placement`]: node classes, the resumable scan, gang fitting, candidate clusters, making room |
//! | framework | [`framework`]: session, state, statements, hook dispatch, the view plugins read |
//! | bottom | [`model`], [`resources`], [`quantity`], [`duration`], [`cache`], [`config`], [`decisions`] |
//!
//! To add a plugin: write `plugins/<name>.rs` with a `build` function and the hooks it
//! implements ([`framework::plugin`]), and add it to [`PLUGINS`]. To add an action: write
//! `actions/<name>.rs` with `check` and `execute`, and add it to [`ACTIONS`].

pub mod actions;
pub mod cache;
pub mod config;
pub mod decisions;
pub mod duration;
pub mod eta;
pub mod framework;
pub mod hash;
pub mod model;
pub mod placement;
pub mod plugins;
pub mod quantity;
pub mod resources;
#[cfg(feature = "testing")]
pub mod testing;

#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use cache::{Cache, Event, Snapshot};
pub use config::SchedulerConfig;
pub use decisions::Decisions;
pub use framework::session::Session;

use config::{
    ArgErrors, ArgSpec, Args, Catalog, ConfigError, ParseOptions, PluginConfig, PluginTraits,
};
use framework::hooks::Hooks;
use framework::plugin::Plugin;
use placement::Placer;

/// A built-in plugin: its name and how to build it from its configuration.
pub struct PluginEntry {
    /// The name a configuration gives it.
    pub name: &'static str,
    /// Builds an instance (one per session), checking its arguments.
    pub build: fn(&PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors>,
    /// The arguments it reads (and those it accepts without effect).
    pub args: &'static ArgSpec,
}

/// A built-in action: its name, how to check its arguments, and how to run it.
pub struct ActionEntry {
    /// The name a configuration gives it.
    pub name: &'static str,
    /// Checks its arguments.
    pub check: fn(&Args) -> Result<(), ArgErrors>,
    /// The arguments it reads (and those it accepts without effect).
    pub args: &'static ArgSpec,
    /// Runs it on a session.
    pub execute: fn(&mut Session, &mut Placer, &Args),
}

/// The plugins tephra provides, in the order messages list them.
pub const PLUGINS: &[PluginEntry] = &[
    PluginEntry {
        name: "gang",
        build: plugins::gang::build,
        args: &plugins::gang::ARGS,
    },
    PluginEntry {
        name: "priority",
        build: plugins::priority::build,
        args: &plugins::priority::ARGS,
    },
    PluginEntry {
        name: "conformance",
        build: plugins::conformance::build,
        args: &plugins::conformance::ARGS,
    },
    PluginEntry {
        name: "predicates",
        build: plugins::predicates::build,
        args: &plugins::predicates::ARGS,
    },
    PluginEntry {
        name: "nodeorder",
        build: plugins::nodeorder::build,
        args: &plugins::nodeorder::ARGS,
    },
    PluginEntry {
        name: "binpack",
        build: plugins::binpack::build,
        args: &plugins::binpack::ARGS,
    },
    PluginEntry {
        name: "network-topology-aware",
        build: plugins::network_topology::build,
        args: &plugins::network_topology::ARGS,
    },
    PluginEntry {
        name: "drf",
        build: plugins::drf::build,
        args: &plugins::drf::ARGS,
    },
    PluginEntry {
        name: "proportion",
        build: plugins::proportion::build,
        args: &plugins::proportion::ARGS,
    },
    PluginEntry {
        name: "capacity",
        build: plugins::capacity::build,
        args: &plugins::capacity::ARGS,
    },
    PluginEntry {
        name: "overcommit",
        build: plugins::overcommit::build,
        args: &plugins::overcommit::ARGS,
    },
    PluginEntry {
        name: "sla",
        build: plugins::sla::build,
        args: &plugins::sla::ARGS,
    },
    PluginEntry {
        name: "nodegroup",
        build: plugins::nodegroup::build,
        args: &plugins::nodegroup::ARGS,
    },
    PluginEntry {
        name: "pdb",
        build: plugins::pdb::build,
        args: &plugins::pdb::ARGS,
    },
    PluginEntry {
        name: "deviceshare",
        build: plugins::deviceshare::build,
        args: &plugins::deviceshare::ARGS,
    },
    PluginEntry {
        name: "gpupack",
        build: plugins::gpupack::build,
        args: &plugins::gpupack::ARGS,
    },
    PluginEntry {
        name: "clusteraffinity",
        build: plugins::clusteraffinity::build,
        args: &plugins::clusteraffinity::ARGS,
    },
    PluginEntry {
        name: "clustertaint",
        build: plugins::clustertaint::build,
        args: &plugins::clustertaint::ARGS,
    },
    PluginEntry {
        name: "spread",
        build: plugins::spread::build,
        args: &plugins::spread::ARGS,
    },
    PluginEntry {
        name: "clusterresource",
        build: plugins::clusterresource::build,
        args: &plugins::clusterresource::ARGS,
    },
    PluginEntry {
        name: "cost",
        build: plugins::cost::build,
        args: &plugins::cost::ARGS,
    },
];

/// The actions tephra provides.
pub const ACTIONS: &[ActionEntry] = &[
    ActionEntry {
        name: "enqueue",
        check: actions::enqueue::check,
        execute: actions::enqueue::execute,
        args: &actions::enqueue::ARGS,
    },
    ActionEntry {
        name: "allocate",
        check: actions::allocate::check,
        execute: actions::allocate::execute,
        args: &actions::allocate::ARGS,
    },
    ActionEntry {
        name: "backfill",
        check: actions::backfill::check,
        execute: actions::backfill::execute,
        args: &actions::backfill::ARGS,
    },
    ActionEntry {
        name: "preempt",
        check: actions::preempt::check,
        execute: actions::preempt::execute,
        args: &actions::preempt::ARGS,
    },
    ActionEntry {
        name: "reclaim",
        check: actions::reclaim::check,
        execute: actions::reclaim::execute,
        args: &actions::reclaim::ARGS,
    },
    ActionEntry {
        name: "gangpreempt",
        check: actions::gang::check,
        execute: actions::gang::preempt,
        args: &actions::gang::ARGS,
    },
    ActionEntry {
        name: "gangreclaim",
        check: actions::gang::check,
        execute: actions::gang::reclaim,
        args: &actions::gang::ARGS,
    },
];

/// Makes `search` the node search of every action that searches nodes, for each key the
/// configuration's own arguments of that action leave unset. `vc-scheduler` takes these from
/// its flags (`--minimum-feasible-nodes`, `--minimum-percentage-nodes-to-find`,
/// `--percentage-nodes-to-find`); a configuration's action arguments still win, so one file can
/// tune one action.
pub fn default_node_search(config: &mut SchedulerConfig, search: &placement::SearchArgs) {
    let values = [
        ("minimumFeasibleNodes", search.min_feasible_nodes),
        ("minimumPercentageNodesToFind", search.min_percentage),
        ("percentageNodesToFind", search.percentage),
    ];
    for a in ACTIONS {
        let args = config.action_args.entry(a.name.to_string()).or_default();
        for (key, value) in values {
            if a.args.keys.contains(&key) && !args.contains_key(key) {
                let value = i64::try_from(value).unwrap_or(i64::MAX);
                args.insert(key.to_string(), config::ArgValue::Int(value));
            }
        }
    }
    config.action_args.retain(|_, args| !args.is_empty());
}

/// Volcano actions that tephra does not provide yet. Naming one is an explicit error rather
/// than a silent no-op.
pub const UNAVAILABLE_ACTIONS: &[&str] = &["shuffle"];

/// Volcano plugins that tephra does not implement. A configuration that names one loads, with a
/// warning and a `tephra_config_inert_plugins` metric, so that a Volcano configuration migrates
/// as it is; the plugin has no effect. `--strict-config` refuses them instead.
pub const INERT_PLUGINS: &[&str] = &[
    "numa-aware",
    "task-topology",
    "tdm",
    "rescheduling",
    "usage",
    "resource-strategy-fit",
    "extender",
    "cdp",
    "resourcequota",
];

fn plugin(name: &str) -> Option<&'static PluginEntry> {
    PLUGINS.iter().find(|p| p.name == name)
}

fn action(name: &str) -> Option<&'static ActionEntry> {
    ACTIONS.iter().find(|a| a.name == name)
}

/// The built-in registry, as a [`Catalog`] that configurations are checked against.
#[derive(Clone, Copy, Debug, Default)]
pub struct Registry;

impl Catalog for Registry {
    fn plugin_names(&self) -> Vec<&'static str> {
        PLUGINS.iter().map(|p| p.name).collect()
    }

    fn action_names(&self) -> Vec<&'static str> {
        ACTIONS.iter().map(|a| a.name).collect()
    }

    fn is_unavailable_action(&self, name: &str) -> bool {
        UNAVAILABLE_ACTIONS.contains(&name)
    }

    fn is_inert_plugin(&self, name: &str) -> bool {
        INERT_PLUGINS.contains(&name)
    }

    fn check_plugin(&self, cfg: &PluginConfig) -> Option<Result<PluginTraits, ArgErrors>> {
        let entry = plugin(&cfg.name)?;
        Some((entry.build)(cfg).map(|p| PluginTraits {
            orders_queues: p.queue_order().is_some(),
            inert_args: entry.args.inert_keys(&cfg.arguments),
        }))
    }

    fn check_action(
        &self,
        name: &str,
        args: &Args,
    ) -> Option<Result<Vec<(String, &'static str)>, ArgErrors>> {
        action(name).map(|a| (a.check)(args).map(|()| a.args.inert_keys(args)))
    }
}

impl SchedulerConfig {
    /// Parses a configuration and checks it against the built-in plugins and actions. Volcano
    /// plugins tephra does not implement load with a warning ([`SchedulerConfig::warnings`]).
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        Self::parse_with(text, &Registry, ParseOptions::default())
    }

    /// Parses a configuration as [`SchedulerConfig::parse`] does, but refuses Volcano plugins
    /// tephra does not implement (`--strict-config`).
    pub fn parse_strict(text: &str) -> Result<Self, ConfigError> {
        Self::parse_with(text, &Registry, ParseOptions { strict: true })
    }

    /// Tephra's default configuration ([`config::DEFAULT_CONFIG`]).
    pub fn default_config() -> Self {
        match Self::parse(config::DEFAULT_CONFIG) {
            Ok(c) => c,
            // The default is a constant covered by tests; an empty config is the safe fallback.
            Err(_) => Self {
                actions: vec![],
                tiers: vec![],
                action_args: Default::default(),
                inert_plugins: vec![],
                warnings: vec![],
            },
        }
    }
}

/// Holds the configuration in force and swaps in a new one on reload, keeping the last good
/// configuration when the new text is bad. The text last read is remembered, so that reading
/// the same file again (a periodic reload) neither parses it nor reports its error again.
#[derive(Clone, Debug)]
pub struct ConfigHolder {
    current: Arc<SchedulerConfig>,
    last_error: Option<ConfigError>,
    text: Option<String>,
}

impl ConfigHolder {
    /// Starts with `config`, read from `text` if it came from one.
    pub fn new(config: SchedulerConfig) -> Self {
        Self {
            current: Arc::new(config),
            last_error: None,
            text: None,
        }
    }

    /// Starts with `config`, parsed from `text`.
    pub fn read_from(config: SchedulerConfig, text: String) -> Self {
        Self {
            text: Some(text),
            ..Self::new(config)
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

    /// Parses `text` with the built-in plugins; on success it takes effect, on error the last
    /// good config stays.
    pub fn reload(&mut self, text: &str) -> Result<(), ConfigError> {
        self.reload_with(text, ParseOptions::default(), |_| {})
            .map(|_| ())
    }

    /// Parses `text` with `options` and `adjust` applied to the result, unless it is the text
    /// last read: `Ok(true)` when a new configuration took effect, `Ok(false)` when the text
    /// is unchanged, and on error the last good configuration stays.
    pub fn reload_with(
        &mut self,
        text: &str,
        options: ParseOptions,
        adjust: impl FnOnce(&mut SchedulerConfig),
    ) -> Result<bool, ConfigError> {
        if self.text.as_deref() == Some(text) {
            return Ok(false);
        }
        self.text = Some(text.to_string());
        match SchedulerConfig::parse_with(text, &Registry, options) {
            Ok(mut c) => {
                adjust(&mut c);
                self.current = Arc::new(c);
                self.last_error = None;
                Ok(true)
            }
            Err(e) => {
                self.last_error = Some(e.clone());
                Err(e)
            }
        }
    }
}

/// Opens a session on `snapshot` with fresh instances of the configured plugins.
pub fn open_session(snapshot: Snapshot, config: &SchedulerConfig, now: i64, id: u64) -> Session {
    open_session_observed(snapshot, config, now, id, &mut |_, _| {})
}

/// [`open_session`], calling `observe(plugin, true)` before and `observe(plugin, false)` after
/// each plugin's `OnSessionOpen`.
pub fn open_session_observed(
    snapshot: Snapshot,
    config: &SchedulerConfig,
    now: i64,
    id: u64,
    observe: &mut dyn FnMut(&'static str, bool),
) -> Session {
    let tiers = config
        .tiers
        .iter()
        .map(|tier| {
            tier.iter()
                .filter_map(|p| {
                    // Arguments were checked when the config was parsed.
                    let built = plugin(&p.name).and_then(|e| (e.build)(p).ok())?;
                    Some((p.enables.clone(), built))
                })
                .collect()
        })
        .collect();
    let mut ssn = Session::open_observed(snapshot, Hooks::new(tiers), now, id, observe);
    if let Some(p) = config
        .tiers
        .iter()
        .flatten()
        .find(|p| p.name == "deviceshare")
    {
        let gpus = plugins::deviceshare::config(p);
        ssn.state.gpus.configure(&ssn.snap, gpus);
    }
    ssn.state.gpus.now = now;
    ssn.allocate_admits = !config.actions.iter().any(|a| a == "enqueue");
    ssn
}

/// A step of a session, reported to an observer before and after it runs, so that a runtime
/// can time each phase (the core reads no clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step<'a> {
    /// Opening the session: plugins' `OnSessionOpen`.
    Open,
    /// One plugin's `OnSessionOpen`, within [`Step::Open`].
    Plugin(&'static str),
    /// One configured action.
    Action(&'a str),
    /// Closing the session: plugins' `OnSessionClose` and the decisions.
    Close,
}

/// Opens a session on `snapshot`, runs every configured action and returns the decisions.
pub fn schedule(
    snapshot: Snapshot,
    config: Arc<SchedulerConfig>,
    now: i64,
    session_id: u64,
) -> Decisions {
    schedule_observed(snapshot, config, now, session_id, &mut |_, _| {})
}

/// [`schedule`], calling `observe(step, true)` before and `observe(step, false)` after each
/// step of the session.
pub fn schedule_observed(
    snapshot: Snapshot,
    config: Arc<SchedulerConfig>,
    now: i64,
    session_id: u64,
    observe: &mut dyn FnMut(Step<'_>, bool),
) -> Decisions {
    observe(Step::Open, true);
    let mut ssn = open_session_observed(snapshot, &config, now, session_id, &mut |name, begin| {
        observe(Step::Plugin(name), begin)
    });
    let mut placer = Placer::new(&ssn);
    observe(Step::Open, false);
    for name in &config.actions {
        if let Some(a) = action(name) {
            observe(Step::Action(name), true);
            (a.execute)(&mut ssn, &mut placer, &config.action_args(name));
            observe(Step::Action(name), false);
        }
    }
    observe(Step::Close, true);
    let d = ssn.close();
    observe(Step::Close, false);
    d
}
