//! Trace files read whole at start: the openb node list that becomes a fleet. (Job traces are
//! read lazily in `workload`.)

use std::collections::BTreeMap;
use std::path::Path;

/// One node from a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceNode {
    /// Name, as in the trace.
    pub name: String,
    /// Capacity as (resource, quantity).
    pub capacity: Vec<(String, String)>,
    /// Labels (GPU model).
    pub labels: BTreeMap<String, String>,
}

/// Reads `openb_node_list_*.csv`: sn, cpu_milli, memory_mib, gpu, model.
pub fn openb_nodes(path: &Path) -> Result<Vec<TraceNode>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .ok_or_else(|| format!("{}: empty file", path.display()))?
        .split(',')
        .map(str::trim)
        .collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| format!("{}: no column {name}", path.display()))
    };
    let (sn, cpu, mem, gpu, model) = (
        col("sn")?,
        col("cpu_milli")?,
        col("memory_mib")?,
        col("gpu")?,
        col("model")?,
    );
    let mut nodes = Vec::new();
    for (i, line) in lines.enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let row: Vec<&str> = line.split(',').map(str::trim).collect();
        let get = |c: usize| row.get(c).copied().unwrap_or("");
        let bad = |what: &str| format!("{}: line {}: malformed {what}", path.display(), i + 2);
        let cpu_milli: i64 = get(cpu).parse().map_err(|_| bad("cpu_milli"))?;
        let mem_mib: i64 = get(mem).parse().map_err(|_| bad("memory_mib"))?;
        let gpus: i64 = get(gpu).parse().map_err(|_| bad("gpu"))?;
        let mut capacity = vec![
            ("cpu".to_string(), format!("{cpu_milli}m")),
            ("memory".to_string(), format!("{mem_mib}Mi")),
            ("pods".to_string(), "256".to_string()),
        ];
        let mut labels = BTreeMap::new();
        if gpus > 0 {
            capacity.push(("nvidia.com/gpu".into(), gpus.to_string()));
            labels.insert(
                tephra_api::well_known::resources::GPU_PRODUCT_LABEL.to_string(),
                get(model).to_string(),
            );
        }
        nodes.push(TraceNode {
            name: get(sn).to_string(),
            capacity,
            labels,
        });
    }
    Ok(nodes)
}
