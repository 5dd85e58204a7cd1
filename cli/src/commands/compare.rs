//! `iommutop compare A.json B.json [--json FILE|-] [--fail-if EXPR]... [--format text|markdown]
//! [--html F.html]`: lines up two reports and explains the difference (see
//! `iommutop_model::compare`), as text, as Markdown for a pull request or as a page with A and B on
//! the same charts; thresholds set exit code 4 for CI.

use crate::cli::{CompareArgs, OutputFormat};
use crate::commands::html;
use crate::exit::{Code, Failure, Outcome};
use crate::output::{emit, stdout_width};
use anyhow::anyhow;
use iommutop_model::compare::markdown::render_markdown;
use iommutop_model::compare::{compare, Evaluation, Threshold};
use iommutop_model::html::render_comparison;
use iommutop_model::report::Report;
use iommutop_model::text::wrap;
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
    let value = serde_json::json!({
        "a": names.0,
        "b": names.1,
        "comparison": comparison,
        "thresholds": evaluations,
    });
    let json = serde_json::to_string_pretty(&value)? + "\n";
    let html_page = || render_comparison(&a, &b, &comparison, (&names.0, &names.1));
    let form = match args.format {
        OutputFormat::Text => wrap(
            &(comparison.render((&names.0, &names.1)) + &threshold_lines(&evaluations)),
            stdout_width(),
        ),
        OutputFormat::Markdown => render_markdown(&comparison, (&names.0, &names.1), &evaluations),
        OutputFormat::Json => json.clone(),
        OutputFormat::Html => html_page(),
    };
    emit(&form, args.json.as_deref().map(|p| (p, json.as_str())))?;
    if let Some(path) = &args.html {
        html::write(path, &html_page())?;
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
