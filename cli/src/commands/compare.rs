//! `iommutop compare A.json B.json [--json FILE|-] [--fail-if EXPR]... [--format text|markdown]
//! [--html F.html]`: lines up two reports and explains the difference (see
//! `iommutop_model::compare`), as text, as Markdown for a pull request or as a page with A and B on
//! the same charts; thresholds set exit code 4 for CI.

use crate::cli::{CompareArgs, CompareFormat};
use crate::commands::html;
use crate::commands::workload::is_stdout;
use crate::exit::{Code, Failure, Outcome};
use anyhow::{anyhow, Context};
use iommutop_model::compare::markdown::render_markdown;
use iommutop_model::compare::{compare, Evaluation, Threshold};
use iommutop_model::html::render_comparison;
use iommutop_model::report::Report;
use std::process::ExitCode;

pub fn run(args: &CompareArgs) -> Outcome<ExitCode> {
    // Expressions first: a typo fails before any file is read.
    let thresholds = args
        .fail_if
        .iter()
        .map(|t| Threshold::parse(t).map_err(|e| Failure::usage(anyhow!("--fail-if {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let a = Report::read(&args.a).map_err(Failure::usage)?;
    let b = Report::read(&args.b).map_err(Failure::usage)?;
    let comparison = compare(&a, &b);
    let names = (args.a.display().to_string(), args.b.display().to_string());
    let evaluations = thresholds
        .iter()
        .map(|t| {
            t.evaluate(&a, &b)
                .map_err(|e| Failure::usage(anyhow!("--fail-if {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let text = match args.format {
        CompareFormat::Text => {
            comparison.render((&names.0, &names.1)) + &threshold_lines(&evaluations)
        }
        CompareFormat::Markdown => render_markdown(&comparison, (&names.0, &names.1), &evaluations),
    };
    // With `--json -` stdout carries the JSON alone; the text goes to stderr.
    let json_to_stdout = args.json.as_deref().is_some_and(is_stdout);
    if json_to_stdout {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    if let Some(path) = &args.json {
        let value = serde_json::json!({
            "a": names.0,
            "b": names.1,
            "comparison": comparison,
            "thresholds": evaluations,
        });
        let text = serde_json::to_string_pretty(&value)? + "\n";
        if json_to_stdout {
            print!("{text}");
        } else {
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    if let Some(path) = &args.html {
        let page = render_comparison(&a, &b, &comparison, (&names.0, &names.1));
        html::write(path, &page)?;
    }
    let crossed: Vec<String> = evaluations
        .iter()
        .filter(|e| e.crossed)
        .map(|e| e.sentence())
        .collect();
    if crossed.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    Err(Failure {
        code: Code::Threshold,
        error: anyhow!(crossed.join("; ")),
    })
}

/// `thresholds:` and one sentence per threshold, after the text; nothing without thresholds.
fn threshold_lines(evaluations: &[Evaluation]) -> String {
    if evaluations.is_empty() {
        return String::new();
    }
    let lines: Vec<String> = evaluations
        .iter()
        .map(|e| format!("  {}", e.sentence()))
        .collect();
    format!("\nthresholds:\n{}\n", lines.join("\n"))
}
