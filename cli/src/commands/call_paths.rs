//! The sampled call paths of a report, written as folded stacks (for flame-graph tools) or as a
//! flame graph (SVG): by `diagnose`, `record` and `report`.

use crate::exit::Outcome;
use anyhow::{anyhow, Context};
use iommutop_model::diagnose::folded_stacks;
use iommutop_model::report::Report;
use std::path::Path;

pub fn write(report: &Report, folded: Option<&Path>, flamegraph: Option<&Path>) -> Outcome {
    let stacks = folded_stacks(report);
    if let Some(path) = folded {
        let mut text = stacks.join("\n");
        text.push('\n');
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("iommutop: folded call paths written to {}", path.display());
    }
    if let Some(path) = flamegraph {
        if stacks.is_empty() {
            return Err(anyhow!(
                "no call path was sampled (stack sampling needs the fentry or kprobe tier): no \
                 flame graph written"
            )
            .into());
        }
        let file =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut options = inferno::flamegraph::Options::default();
        options.title = "iommutop: call paths of DMA API calls (sampled)".into();
        options.count_name = "samples".into();
        inferno::flamegraph::from_lines(
            &mut options,
            stacks.iter().map(String::as_str),
            std::io::BufWriter::new(file),
        )
        .map_err(|e| anyhow!("rendering the flame graph: {e}"))?;
        eprintln!("iommutop: flame graph written to {}", path.display());
    }
    Ok(())
}
