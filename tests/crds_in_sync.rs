//! The CRD YAML committed under `crds/` is exactly what the Rust types generate, and the Helm
//! chart's `crds/` folder is a copy of it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

#[test]
fn committed_crds_match_the_types() {
    let dir = common::repo_root().join("crds");
    let generated = tephra_api::crds().expect("CRDs generate");
    let mut expected_files: Vec<&str> = generated.iter().map(|(f, _)| *f).collect();
    expected_files.sort();
    let on_disk: Vec<String> = common::yaml_files(&dir)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        on_disk, expected_files,
        "crds/ holds other files than the types generate; run `cargo run -p tephra -- crds --out crds`"
    );
    for (file, crd) in generated {
        let docs = common::yaml_documents(&dir.join(file));
        assert_eq!(docs.len(), 1, "{file}: one CRD per file");
        let want = serde_json::to_value(&crd).unwrap();
        assert!(
            docs[0] == want,
            "crds/{file} is stale: regenerate with `cargo run -p tephra -- crds --out crds`"
        );
    }
}

#[test]
fn the_charts_crds_are_the_committed_ones() {
    let root = common::repo_root();
    let (ours, chart) = (root.join("crds"), root.join("charts/tephra/crds"));
    let names = |dir: &std::path::Path| -> Vec<String> {
        common::yaml_files(dir)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(
        names(&chart),
        names(&ours),
        "charts/tephra/crds must hold crds/: cp crds/*.yaml charts/tephra/crds/"
    );
    for file in names(&ours) {
        assert!(
            std::fs::read(ours.join(&file)).unwrap() == std::fs::read(chart.join(&file)).unwrap(),
            "charts/tephra/crds/{file} is stale: cp crds/{file} charts/tephra/crds/"
        );
    }
}

#[test]
fn crds_carry_volcano_names_and_status_subresources() {
    let crds = tephra_api::crds().unwrap();
    let by_name = |n: &str| {
        crds.iter()
            .map(|(_, c)| c)
            .find(|c| c.metadata.name.as_deref() == Some(n))
            .unwrap_or_else(|| panic!("no CRD {n}"))
    };
    let job = by_name("jobs.batch.volcano.sh");
    assert_eq!(
        job.spec.names.short_names.as_deref(),
        Some(&["vcjob".to_string(), "vj".to_string()][..])
    );
    let cols: Vec<&str> = job.spec.versions[0]
        .additional_printer_columns
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(cols, ["STATUS", "minAvailable", "RUNNINGS", "AGE", "QUEUE"]);
    let pg = by_name("podgroups.scheduling.volcano.sh");
    assert_eq!(
        pg.spec.names.short_names.as_deref(),
        Some(&["pg".to_string(), "podgroup-v1beta1".to_string()][..])
    );
    let q = by_name("queues.scheduling.volcano.sh");
    assert_eq!(q.spec.scope, "Cluster");
    assert_eq!(
        q.spec.names.short_names.as_deref(),
        Some(&["q".to_string(), "queue-v1beta1".to_string()][..])
    );
    for (_, crd) in &crds {
        let name = crd.metadata.name.clone().unwrap();
        // Volcano's PodGroup has no status subresource (integrations create PodGroups with a
        // status); a PropagationPolicy and a Command have no status.
        if name.starts_with("propagationpolicies")
            || name.starts_with("podgroups")
            || name.starts_with("commands")
        {
            assert!(
                crd.spec.versions[0]
                    .subresources
                    .as_ref()
                    .is_none_or(|s| s.status.is_none()),
                "{name} must not have a status subresource"
            );
            continue;
        }
        let sub = crd.spec.versions[0].subresources.as_ref();
        assert!(
            sub.is_some_and(|s| s.status.is_some()),
            "{name} lacks a status subresource"
        );
    }
}

/// Every rule compiles in Kubernetes' CRD environment as kube-apiserver 1.34 declares its
/// functions, and every rule, and every CRD as a whole, stays within the API server's static
/// cost budgets (estimated as the API server estimates them). A CRD that fails here is refused
/// by a real cluster.
#[test]
fn every_crd_passes_the_api_servers_static_cel_checks() {
    let mut problems = Vec::new();
    for (file, crd) in tephra_api::crds().expect("CRDs generate") {
        for (path, report) in tephra_api::celcheck::check_crd(&crd) {
            for p in report.problems(&path) {
                problems.push(format!("{file}: {p}"));
            }
            for r in &report.rules {
                println!(
                    "{file} {}: cost {} x {} = {}",
                    r.path, r.cost, r.cardinality, r.total
                );
            }
            println!("{file}: total {}", report.total);
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}
