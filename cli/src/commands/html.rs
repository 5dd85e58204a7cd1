//! `--html FILE`: a report (or a comparison) as one self-contained HTML page, rendered by
//! `iommutop_model::html`; written by `report`, `compare`, `diagnose` and `run`.

use crate::exit::Outcome;
use anyhow::Context;
use std::path::Path;

/// Writes `page` to `path` and says so on stderr.
pub fn write(path: &Path, page: &str) -> Outcome {
    std::fs::write(path, page).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("iommutop: HTML report written to {}", path.display());
    Ok(())
}
