//! `tephra validate`: offline admission of manifests.

use std::path::PathBuf;

use anyhow::{Context, bail};
use serde_json::Value;
use tephra_api::admission::{Admission, AdmissionError};

pub fn run(files: &[PathBuf]) -> anyhow::Result<()> {
    let admission = Admission::new().context("building admission checks from the CRDs")?;
    let mut refused = 0usize;
    for file in files {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text)
            .with_context(|| format!("parsing {}", file.display()))?;
        for (index, doc) in docs.iter().enumerate().filter(|(_, d)| !d.is_null()) {
            let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("?");
            let name = doc
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("<unnamed>");
            let at = format!("{} (document {index}, {kind} {name})", file.display());
            match admission.admit(doc) {
                Ok(()) => println!("ok       {at}"),
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
        bail!("{refused} manifest(s) refused");
    }
    Ok(())
}
