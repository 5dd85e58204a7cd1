//! `iommutop compare A.json B.json [--json FILE] [--fail-if EXPR]...`

use crate::cli::CompareArgs;
use crate::exit::{Code, Failure, Outcome};
use anyhow::{anyhow, Context};
use iommutop_model::compare::{compare, Threshold};
use iommutop_model::report::Report;
use std::process::ExitCode;

pub fn run(args: &CompareArgs) -> Outcome<ExitCode> {
    let thresholds = args
        .fail_if
        .iter()
        .map(|t| Threshold::parse(t).map_err(|e| Failure::usage(anyhow!("--fail-if {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let a = Report::read(&args.a).map_err(Failure::usage)?;
    let b = Report::read(&args.b).map_err(Failure::usage)?;
    let comparison = compare(&a, &b);
    print!("{}", comparison.render());
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&comparison)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    let mut crossed = Vec::new();
    for threshold in &thresholds {
        if let Some(sentence) = threshold.crossed(&a, &b).map_err(Failure::usage)? {
            crossed.push(sentence);
        }
    }
    if crossed.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    Err(Failure {
        code: Code::Threshold,
        error: anyhow!(crossed.join("; ")),
    })
}
