//! `tephra validate`: offline admission of manifests, as a kube-apiserver with tephra's CRDs
//! would admit them, plus the checks the job controller makes that CEL cannot
//! (`tephra_api::checks`).

use std::path::PathBuf;

use anyhow::{Context, bail};
use serde_json::Value;
use tephra_api::admission::{Admission, AdmissionError};

pub fn run(files: &[PathBuf]) -> anyhow::Result<()> {
    let admission = Admission::new().context("building admission checks from the CRDs")?;
    let mut refused = 0usize;
    for file in files {
        let docs = match read(file) {
            Ok(docs) => docs,
            Err(e) => {
                refused += 1;
                eprintln!("error: {e:#}");
                continue;
            }
        };
        for (index, doc) in docs.iter().enumerate() {
            let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("?");
            let name = doc
                .pointer("/metadata/name")
                .or_else(|| doc.pointer("/metadata/generateName"))
                .and_then(Value::as_str)
                .unwrap_or("<unnamed>");
            let at = format!("{} (document {index}, {kind} {name})", file.display());
            match admission.admit(doc).map(|ok| (ok, semantic(doc))) {
                Ok((admitted, problems)) if problems.is_empty() => {
                    println!("ok       {at}");
                    for w in admitted.warnings {
                        println!("warning  {at}: {w}");
                    }
                }
                Ok((_, problems)) => {
                    refused += 1;
                    println!("refused  {at}: {}", problems.join("; "));
                }
                Err(AdmissionError::UnknownKind { .. }) => {
                    println!("skipped  {at}: not a tephra kind")
                }
                Err(err) => {
                    refused += 1;
                    println!("refused  {at}: {err}");
                }
            }
        }
    }
    if refused > 0 {
        bail!("{refused} manifest(s) or file(s) refused");
    }
    Ok(())
}

/// The documents of a file; a file with none is an error, since nothing in it would apply.
fn read(file: &PathBuf) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text)
        .with_context(|| format!("parsing {}", file.display()))?;
    let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    if docs.is_empty() {
        bail!(
            "{} holds no YAML documents: nothing in it would apply",
            file.display()
        );
    }
    Ok(docs)
}

/// The controllers' own checks of a Job or Queue that the schema admitted.
fn semantic(doc: &Value) -> Vec<String> {
    let problems = match doc.get("kind").and_then(Value::as_str) {
        Some("Job") => serde_json::from_value::<tephra_api::Job>(doc.clone())
            .map(|job| tephra_api::checks::job(&job)),
        Some("Queue") => serde_json::from_value::<tephra_api::Queue>(doc.clone())
            .map(|queue| tephra_api::checks::queue(&queue)),
        _ => return Vec::new(),
    };
    match problems {
        Ok(p) => p.iter().map(ToString::to_string).collect(),
        Err(e) => vec![format!("does not parse into its type: {e}")],
    }
}
