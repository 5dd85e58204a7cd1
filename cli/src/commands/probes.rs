//! `iommutop probes [--verify | --selftest] [--format text|json] [--json FILE|-]`: which tier
//! each probe point gets here, found by really attaching.

use crate::cli::ProbesArgs;
use crate::exit::{Failure, Outcome};
use crate::output::{emit_table_or_json, json_or_text, stdout_width};
use crate::privileges::require_bpf_privileges;
use crate::probes::selftest::check_hist_slots;
use crate::probes::table::{hook_kernels, point};
use crate::probes::{
    load_failure, verify_all_programs, PointSelection, PointStatus, ProbeSettings, Probes,
    ProgramVerdict,
};
use anyhow::anyhow;
use iommutop_model::text::{Align, Table};
use serde_json::json;
use std::process::ExitCode;

pub fn run(args: &ProbesArgs) -> Outcome<ExitCode> {
    let json_form = json_or_text("probes", args.format)?;
    require_bpf_privileges()?;
    let out = |table: &str, json: &serde_json::Value| {
        emit_table_or_json(json_form, table, json, args.json.as_deref())
    };
    if args.verify {
        return verify(&out);
    }
    if args.selftest {
        return selftest(&out);
    }
    let settings = ProbeSettings::from_env().map_err(load_failure)?;
    let probes =
        Probes::attach(&settings, false, &PointSelection::all(), None).map_err(load_failure)?;
    let points: Vec<serde_json::Value> = probes.statuses().iter().map(status_json).collect();
    out(
        &table(probes.statuses(), stdout_width()),
        &json!({ "points": points }),
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Writes a result as the table (text) and the JSON `--format` and `--json` ask for.
type Out<'a> = &'a dyn Fn(&str, &serde_json::Value) -> Outcome;

fn selftest(out: Out) -> Outcome<ExitCode> {
    let check = check_hist_slots().map_err(|e| Failure::environment(anyhow!(e)))?;
    let mismatches: Vec<serde_json::Value> = check
        .mismatches
        .iter()
        .map(|m| json!({"value": m.value, "kernel": m.kernel, "user_space": m.user_space}))
        .collect();
    let text = if check.mismatches.is_empty() {
        format!(
            "hist slots: the kernel files all {} edge values in the slots iommutop reads them \
             from\n",
            check.values
        )
    } else {
        check
            .mismatches
            .iter()
            .map(|m| {
                format!(
                    "hist slots: {} ns filed in slot {} by the kernel, read from slot {} by \
                     iommutop\n",
                    m.value, m.kernel, m.user_space
                )
            })
            .collect()
    };
    out(
        &text,
        &json!({"hist_slots": {"values": check.values, "mismatches": mismatches}}),
    )?;
    Ok(if check.mismatches.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn verify(out: Out) -> Outcome<ExitCode> {
    let settings = ProbeSettings::from_env().map_err(load_failure)?;
    let verdicts = verify_all_programs(&settings).map_err(load_failure)?;
    let programs: Vec<serde_json::Value> = verdicts
        .iter()
        .map(|v| {
            json!({
                "program": v.program,
                "target": v.target,
                "tier": v.tier.name(),
                "status": verdict_status(v),
                "error": v.error,
            })
        })
        .collect();
    let text: String = verdicts
        .iter()
        .map(|v| {
            let error = v.error.as_deref().unwrap_or("");
            format!(
                "{:<34} {:<30} {:<9} {}\n",
                v.program,
                v.target,
                verdict_status(v),
                error
            )
        })
        .collect();
    out(&text, &json!({ "programs": programs }))?;
    let rejected = verdicts
        .iter()
        .filter(|v| verdict_status(v) == "rejected")
        .count();
    if rejected > 0 {
        return Err(anyhow::anyhow!("{rejected} BPF program(s) rejected by this kernel").into());
    }
    Ok(ExitCode::SUCCESS)
}

/// loaded: the verifier accepted it; absent: its target is not in this kernel; refused: the
/// kernel does not allow the program type at all (EPERM, no kprobes); rejected: a bug of ours.
fn verdict_status(v: &ProgramVerdict) -> &'static str {
    match &v.error {
        None => "loaded",
        Some(_) if v.absent => "absent",
        Some(e) if e.contains("verifier:") || e.contains("Invalid argument") => "rejected",
        Some(_) => "refused",
    }
}

pub fn status_json(status: &PointStatus) -> serde_json::Value {
    json!({
        "point": status.point,
        "what": point(status.point).map(|p| p.what),
        "op": status.op.name(),
        "tier": status.tier.map(|t| t.name()),
        "latency": status.measures_latency(),
        "hooks": status.hooks.iter().map(|h| json!({
            "hook": h.hook,
            "kernels": hook_kernels(&h.hook),
            "status": if h.is_attached() { "attached" } else if h.absent { "absent" } else { "failed" },
            "tier": h.tier.map(|t| t.name()),
            "error": h.error,
        })).collect::<Vec<_>>(),
        "refused": status.refused.iter().map(|r| json!({
            "tier": r.tier.name(),
            "reason": r.reason,
        })).collect::<Vec<_>>(),
        "caveats": status.caveats,
    })
}

/// One row per point, then a row per refused tier (✗) and per caveat (⚠) under it; the last
/// column wraps to fit `width`.
fn table(statuses: &[PointStatus], width: Option<u16>) -> String {
    let mut table = Table::new(&[
        ("POINT", Align::Left),
        ("TIER", Align::Left),
        ("LATENCY", Align::Left),
        ("HOOKS / WHY NOT", Align::Wrap),
    ]);
    for status in statuses {
        let tier = status.tier.map_or("-", |t| t.name());
        let latency = if status.measures_latency() {
            "yes"
        } else {
            "no"
        };
        let hooks = status.attached_hook_labels();
        let hooks = if hooks.is_empty() {
            "unavailable".to_string()
        } else {
            hooks.join(", ")
        };
        table.row(vec![
            status.point.to_string(),
            tier.to_string(),
            latency.to_string(),
            hooks,
        ]);
        for refusal in &status.refused {
            table.row(vec![
                String::new(),
                refusal.tier.name().to_string(),
                String::new(),
                format!("✗ {}", refusal.reason),
            ]);
        }
        for caveat in &status.caveats {
            table.row(vec![
                String::new(),
                String::new(),
                String::new(),
                format!("⚠ {caveat}"),
            ]);
        }
    }
    table.render(width)
}
