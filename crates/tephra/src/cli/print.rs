//! How the CLI prints: tables aligned as kubectl aligns them (upper-case headers, columns three
//! spaces apart), `-o yaml|json|name`, and errors that say what failed with an exit code per kind
//! (1 other, 3 not found, 4 forbidden, 5 conflict; clap's usage errors are 2).

use clap::ValueEnum;
use serde::Serialize;

/// `-o`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// More columns.
    Wide,
    /// YAML.
    Yaml,
    /// JSON.
    Json,
    /// `kind.group/name`.
    Name,
}

/// A failure with the exit code scripts can test.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The object is not there (exit 3).
    #[error("{0} not found")]
    NotFound(String),
    /// The API server refused (exit 4).
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// Already exists, or changed meanwhile (exit 5).
    #[error("conflict: {0}")]
    Conflict(String),
    /// Anything else (exit 1).
    #[error("{0}")]
    Other(String),
}

impl CliError {
    /// The process exit code.
    pub fn code(&self) -> u8 {
        match self {
            CliError::Other(_) => 1,
            CliError::NotFound(_) => 3,
            CliError::Forbidden(_) => 4,
            CliError::Conflict(_) => 5,
        }
    }

    /// `what` failed with `e`.
    pub fn api(what: &str, e: kube::Error) -> Self {
        match &e {
            kube::Error::Api(s) if s.code == 404 => CliError::NotFound(what.to_string()),
            kube::Error::Api(s) if s.code == 403 || s.code == 401 => {
                CliError::Forbidden(format!("{what}: {}", s.message))
            }
            kube::Error::Api(s) if s.code == 409 => {
                CliError::Conflict(format!("{what}: {}", s.message))
            }
            _ => CliError::Other(format!("{what}: {e}")),
        }
    }
}

/// A table as kubectl prints it.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 < cells.len() {
                out.push_str(&format!("{c:<w$}   ", w = widths[i]));
            } else {
                out.push_str(c);
            }
        }
        out.trim_end().to_string()
    };
    let mut out = line(headers.to_vec());
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

/// How long ago `then` was at `now` (Unix seconds), as kubectl words an age: `45s`, `3m20s`,
/// `42m`, `5h3m`, `30h`, `3d4h`, `120d`, `2y30d`, `9y`.
pub fn age(then: i64, now: i64) -> String {
    let s = (now - then).max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86_400);
    let y = d / 365;
    match s {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => match s % 60 {
            0 => format!("{m}m"),
            r => format!("{m}m{r}s"),
        },
        _ if h < 3 => format!("{m}m"),
        _ if h < 8 => match m % 60 {
            0 => format!("{h}h"),
            r => format!("{h}h{r}m"),
        },
        _ if h < 48 => format!("{h}h"),
        _ if h < 192 => match h % 24 {
            0 => format!("{d}d"),
            r => format!("{d}d{r}h"),
        },
        _ if y < 2 => format!("{d}d"),
        _ if y < 8 => match d % 365 {
            0 => format!("{y}y"),
            r => format!("{y}y{r}d"),
        },
        _ => format!("{y}y"),
    }
}

/// Objects in a structured format: one as itself, several as a `List`, as kubectl does.
pub fn structured<T: Serialize>(
    items: &[T],
    output: Output,
    single: bool,
) -> anyhow::Result<String> {
    let value = if single && items.len() == 1 {
        serde_json::to_value(&items[0])?
    } else {
        serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                           "items": items})
    };
    Ok(match output {
        Output::Json => format!("{}\n", serde_json::to_string_pretty(&value)?),
        _ => serde_saphyr::to_string(&value)?,
    })
}

/// Prints `rows` (or the objects, with `-o yaml|json|name`); `kind` names them for `-o name`
/// (`queue.scheduling.volcano.sh`) and `names` gives each one's name.
pub struct Listing<'a, T> {
    pub kind: &'a str,
    pub items: &'a [T],
    pub names: Vec<String>,
    pub headers: Vec<&'a str>,
    pub rows: Vec<Vec<String>>,
    /// Columns shown only with `-o wide`.
    pub wide: usize,
    /// `get NAME`: a single object prints as itself.
    pub single: bool,
}

impl<T: Serialize> Listing<'_, T> {
    /// The text to print.
    pub fn render(self, output: Option<Output>) -> anyhow::Result<String> {
        match output {
            Some(o @ (Output::Yaml | Output::Json)) => structured(self.items, o, self.single),
            Some(Output::Name) => Ok(self
                .names
                .iter()
                .map(|n| format!("{}/{n}\n", self.kind))
                .collect()),
            _ if self.items.is_empty() => Ok("No resources found\n".into()),
            Some(Output::Wide) => Ok(table(&self.headers, &self.rows)),
            None => {
                let keep = self.headers.len() - self.wide;
                let rows: Vec<Vec<String>> = self
                    .rows
                    .into_iter()
                    .map(|r| r.into_iter().take(keep).collect())
                    .collect();
                Ok(table(&self.headers[..keep], &rows))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_worded_as_kubectl_words_them() {
        for (secs, want) in [
            (45, "45s"),
            (119, "119s"),
            (200, "3m20s"),
            (300, "5m"),
            (42 * 60, "42m"),
            (5 * 3600 + 180, "5h3m"),
            (30 * 3600, "30h"),
            (3 * 86_400 + 4 * 3600, "3d4h"),
            (120 * 86_400, "120d"),
            (760 * 86_400, "2y30d"),
            (9 * 365 * 86_400, "9y"),
        ] {
            assert_eq!(age(0, secs), want, "{secs}");
        }
        assert_eq!(age(10, 0), "0s", "a clock behind says 0s");
    }
}
