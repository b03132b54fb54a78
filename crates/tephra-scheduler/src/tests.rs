//! Configurations checked against the built-in registry.

use crate::config::DEFAULT_CONFIG;
use crate::{ConfigHolder, SchedulerConfig};

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

#[test]
fn every_unknown_argument_is_reported_not_only_the_first() {
    let text = "actions: allocate\ntiers:\n- plugins:\n  - name: binpack\n    arguments:\n      binpack.cpuu: 2\n      binpack.memry: 3\n  - name: drf\n    arguments:\n      bogus: 1\n";
    let e = SchedulerConfig::parse(text).unwrap_err().to_string();
    for key in ["binpack.cpuu", "binpack.memry", "(drf).arguments.bogus"] {
        assert!(e.contains(key), "{key} missing from: {e}");
    }
}

#[test]
fn an_inert_volcano_plugin_with_nested_arguments_loads_with_a_warning() {
    let text = r#"actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
  - name: resource-strategy-fit
    arguments:
      resourceStrategyFitWeight: 10
      resources:
        nvidia.com/gpu:
          type: MostAllocated
          weight: 2
"#;
    let c = SchedulerConfig::parse(text).unwrap();
    assert_eq!(c.inert_plugins, ["resource-strategy-fit"]);
    assert_eq!(c.tiers[0].len(), 1, "only gang runs");
    assert!(
        c.warnings
            .iter()
            .any(|w| w.contains("resource-strategy-fit") && w.contains("no effect")),
        "{:?}",
        c.warnings
    );
    let e = SchedulerConfig::parse_strict(text).unwrap_err().to_string();
    assert!(
        e.contains("tiers[0].plugins[1].name") && e.contains("--strict-config"),
        "{e}"
    );
}

#[test]
fn a_yaml_error_names_line_and_column() {
    let text = "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n   - name: drf\n";
    let e = SchedulerConfig::parse(text).unwrap_err().to_string();
    assert!(e.contains("line 5"), "{e}");
    assert!(e.contains("column"), "{e}");
}

#[test]
fn volcano_keys_without_effect_here_are_accepted_with_a_warning() {
    let text = "actions: allocate\ntiers:\n- plugins:\n  - name: nodeorder\n    arguments:\n      imagelocality.weight: 2\n      nodeaffinity.weight: 3\n  - name: gang\n    enableJobStarving: false\n";
    let c = SchedulerConfig::parse(text).unwrap();
    assert!(
        c.warnings
            .iter()
            .any(|w| w.contains("(nodeorder).arguments.imagelocality.weight")),
        "{:?}",
        c.warnings
    );
    assert!(
        !c.warnings.iter().any(|w| w.contains("nodeaffinity.weight")),
        "nodeaffinity.weight is honoured, not inert: {:?}",
        c.warnings
    );
}

#[test]
fn gang_preempt_and_gang_reclaim_actions_are_accepted() {
    let c = SchedulerConfig::parse("actions: \"enqueue, allocate, gangpreempt, gangreclaim\"\n")
        .unwrap();
    assert_eq!(
        c.actions,
        ["enqueue", "allocate", "gangpreempt", "gangreclaim"]
    );
}

#[test]
fn scheduler_flags_set_the_node_search_where_the_config_leaves_it_unset() {
    use crate::placement::SearchArgs;
    use crate::placement::search::SEARCH_ONLY;
    let mut c = SchedulerConfig::parse(
        r#"actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: predicates
configurations:
- name: backfill
  arguments:
    percentageNodesToFind: 30
"#,
    )
    .unwrap();
    let flags = SearchArgs {
        min_feasible_nodes: 10,
        min_percentage: 2,
        percentage: 100,
        ..SearchArgs::default()
    };
    crate::default_node_search(&mut c, &flags);
    let read = |action: &str| SearchArgs::read(&c.action_args[action], &SEARCH_ONLY).unwrap();
    assert_eq!(read("allocate"), flags);
    // The configuration's own argument wins; the flags fill in the rest.
    assert_eq!(
        read("backfill"),
        SearchArgs {
            percentage: 30,
            ..flags
        }
    );
    assert_eq!(read("reclaim"), flags);
    assert_eq!(read("gangpreempt"), flags);
    // Enqueue searches no nodes and is given no search keys (they would be refused).
    assert!(!c.action_args.contains_key("enqueue"));
    // The search itself follows: 100% scores every one of 1,000 nodes, adaptive 420.
    assert_eq!(flags.to_find(1000), 1000);
    assert_eq!(SearchArgs::default().to_find(1000), 420);
}

#[test]
fn a_reload_of_the_text_last_read_neither_parses_nor_reports_again() {
    let default = SchedulerConfig::parse(VOLCANO_DEFAULT).unwrap();
    let mut h = ConfigHolder::read_from(default, VOLCANO_DEFAULT.to_string());
    let opts = crate::config::ParseOptions::default();
    let unchanged = h.reload_with(VOLCANO_DEFAULT, opts, |_| panic!("parsed again"));
    assert!(matches!(unchanged, Ok(false)));
    assert!(h.reload_with("actions: bogus", opts, |_| {}).is_err());
    // The same bad text again: no second error, the last good config stays.
    assert!(matches!(
        h.reload_with("actions: bogus", opts, |_| {}),
        Ok(false)
    ));
    assert_eq!(h.current().actions, ["enqueue", "allocate", "backfill"]);
    let fresh = h.reload_with("actions: \"allocate\"", opts, |c| {
        c.actions.push("backfill".into());
    });
    assert!(matches!(fresh, Ok(true)));
    assert_eq!(h.current().actions, ["allocate", "backfill"]);
}
