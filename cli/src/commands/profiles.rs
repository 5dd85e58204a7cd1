//! `iommutop profiles [--format text|json] [--json FILE|-]`: the profiles `iommutop run` knows,
//! with a line each.

use crate::cli::ProfilesArgs;
use crate::exit::{Failure, Outcome};
use crate::output::{emit_table_or_json, json_or_text, stdout_width};
use anyhow::anyhow;
use iommutop_model::text::{Align, Table};
use iommutop_workloads::ProfileSet;
use serde_json::json;
use std::process::ExitCode;

pub fn run(args: &ProfilesArgs) -> Outcome<ExitCode> {
    let json_form = json_or_text("profiles", args.format)?;
    let set = ProfileSet::discover();
    let listed = set.list();
    let invalid: Vec<String> = listed
        .iter()
        .filter_map(|l| l.profile.as_ref().err().map(|e| e.to_string()))
        .collect();
    let items: Vec<_> = listed
        .iter()
        .map(|l| match &l.profile {
            Ok(p) => json!({
                "name": p.name,
                "description": p.description,
                "workload": p.workload.name(),
                "duration_s": p.duration_s,
                "params": p.given,
                "probe_groups": p.probe_groups,
                "fail_if": p.fail_if,
                "source": l.source,
            }),
            Err(e) => json!({"name": l.name, "source": l.source, "error": e.to_string()}),
        })
        .collect();
    let mut table = Table::new(&[
        ("PROFILE", Align::Left),
        ("WORKLOAD", Align::Left),
        ("WHAT IT MEASURES", Align::Wrap),
    ]);
    for l in &listed {
        table.row(match &l.profile {
            Ok(p) => vec![
                l.name.clone(),
                p.workload.name().to_string(),
                p.description.clone(),
            ],
            Err(_) => vec![
                l.name.clone(),
                "?".to_string(),
                "(invalid: see below)".to_string(),
            ],
        });
    }
    emit_table_or_json(
        json_form,
        &table.render(stdout_width()),
        &json!(items),
        args.json.as_deref(),
    )?;
    if !json_form && !set.dirs.is_empty() {
        let dirs: Vec<String> = set.dirs.iter().map(|d| d.display().to_string()).collect();
        eprintln!(
            "iommutop: profiles from {} and built in; `iommutop run NAME` runs one",
            dirs.join(", ")
        );
    }
    if invalid.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(Failure::usage(anyhow!(
            "invalid profile: {}",
            invalid.join("; ")
        )))
    }
}
