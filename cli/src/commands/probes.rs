//! `iommutop probes [--verify | --selftest] [--format text|json] [--json FILE|-]`: which tier
//! each probe point gets here, found by really attaching, and what the probes' maps take in
//! kernel memory here and on a large machine.

use crate::cli::ProbesArgs;
use crate::exit::load_failure;
use crate::exit::{Failure, Outcome};
use crate::output::{emit_table_or_json, json_or_text, stdout_width};
use crate::privileges::require_bpf_privileges;
use anyhow::anyhow;
use iommutop_loader::{
    check_hist_slots, hook_kernels, point, verify_all_programs, MapMemory, PointSelection,
    PointStatus, ProbeSettings, Probes, ProgramVerdict, LARGE_MACHINE_BUDGET, LARGE_MACHINE_CPUS,
    STATS_MAP,
};
use iommutop_model::sample::Op;
use iommutop_model::text::{wrap, Align, Table};
use serde::Serialize;
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
    let memory = probes.map_memory();
    let width = stdout_width();
    let text = format!(
        "{}\n{}",
        table(probes.statuses(), width),
        wrap(&map_memory_text(&memory), width)
    );
    let json = ProbesJson {
        points: probes.statuses().iter().map(PointJson::of).collect(),
        map_memory: MapMemoryJson::of(&memory),
    };
    out(&text, &serde_json::to_value(json)?)?;
    Ok(ExitCode::SUCCESS)
}

/// `probes --json`: each point's tier, hooks and refused tiers, and what the maps take. Written
/// through a `serde_json::Value`, so its keys are in name order.
#[derive(Serialize)]
struct ProbesJson<'a> {
    points: Vec<PointJson<'a>>,
    map_memory: MapMemoryJson<'a>,
}

/// One probe point.
#[derive(Serialize)]
struct PointJson<'a> {
    point: &'static str,
    what: Option<&'static str>,
    op: Op,
    tier: Option<&'static str>,
    latency: bool,
    hooks: Vec<HookJson<'a>>,
    refused: Vec<RefusalJson<'a>>,
    caveats: &'a [&'static str],
}

/// One hook of a point: attached, absent from this kernel, or failed (and why).
#[derive(Serialize)]
struct HookJson<'a> {
    hook: &'a str,
    kernels: Option<&'static str>,
    status: &'static str,
    tier: Option<&'static str>,
    error: Option<&'a str>,
}

/// A tier a point did not get, and why.
#[derive(Serialize)]
struct RefusalJson<'a> {
    tier: &'static str,
    reason: &'a str,
}

impl PointJson<'_> {
    fn of(status: &PointStatus) -> PointJson<'_> {
        PointJson {
            point: status.point,
            what: point(status.point).map(|p| p.what),
            op: status.op,
            tier: status.tier.map(|t| t.name()),
            latency: status.measures_latency(),
            hooks: status
                .hooks
                .iter()
                .map(|h| HookJson {
                    hook: &h.hook,
                    kernels: hook_kernels(&h.hook),
                    status: if h.is_attached() {
                        "attached"
                    } else if h.absent {
                        "absent"
                    } else {
                        "failed"
                    },
                    tier: h.tier.map(|t| t.name()),
                    error: h.error.as_deref(),
                })
                .collect(),
            refused: status
                .refused
                .iter()
                .map(|r| RefusalJson {
                    tier: r.tier.name(),
                    reason: &r.reason,
                })
                .collect(),
            caveats: &status.caveats,
        }
    }
}

/// What the maps take here and with [`LARGE_MACHINE_CPUS`], in total and each.
#[derive(Serialize)]
struct MapMemoryJson<'a> {
    cpus: u64,
    bytes: u64,
    bytes_256_cpus: u64,
    kernel_bytes: Option<u64>,
    stats_rows: Option<u32>,
    stats_rows_within_64_mib: Option<u32>,
    maps: Vec<MapJson<'a>>,
}

#[derive(Serialize)]
struct MapJson<'a> {
    name: &'a str,
    #[serde(rename = "type")]
    kind: String,
    per_cpu: bool,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    bytes: u64,
    bytes_256_cpus: u64,
    kernel_bytes: Option<u64>,
}

impl MapMemoryJson<'_> {
    fn of(memory: &MapMemory) -> MapMemoryJson<'_> {
        let (here, large) = (memory.cpus, LARGE_MACHINE_CPUS);
        MapMemoryJson {
            cpus: here,
            bytes: memory.bytes(here),
            bytes_256_cpus: memory.bytes(large),
            kernel_bytes: memory.kernel_bytes(),
            stats_rows: memory.stats().map(|stats| stats.max_entries),
            stats_rows_within_64_mib: memory.rows_within_budget(),
            maps: memory
                .maps
                .iter()
                .map(|map| MapJson {
                    name: &map.name,
                    kind: map.kind.name(),
                    per_cpu: map.kind.per_cpu(),
                    key_size: map.key_size,
                    value_size: map.value_size,
                    max_entries: map.max_entries,
                    bytes: map.bytes(here),
                    bytes_256_cpus: map.bytes(large),
                    kernel_bytes: map.kernel_bytes,
                })
                .collect(),
        }
    }
}

/// `3.4 MiB`, `512 KiB`, `96 B`.
fn binary_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// What the maps hold here and with [`LARGE_MACHINE_CPUS`], the largest three, and the rows
/// that keep them within [`LARGE_MACHINE_BUDGET`] there when they are not.
fn map_memory_text(memory: &MapMemory) -> String {
    let (here, large) = (memory.cpus, LARGE_MACHINE_CPUS);
    let mut text = format!(
        "map memory: the probes' {} BPF maps hold {} with this machine's {here} possible CPUs, \
         {} with {large} CPUs (an estimate of their data from each map's type, key and value \
         sizes and entries as loaded: a per-CPU map holds a copy for each CPU; the allocators' \
         own overhead is not in it)\n",
        memory.maps.len(),
        binary_size(memory.bytes(here)),
        binary_size(memory.bytes(large)),
    );
    for map in memory.maps.iter().take(3) {
        let what = if map.name == STATS_MAP {
            format!(
                "{} rows of {} on each CPU, IOMMUTOP_STATS_ROWS sets the rows",
                map.max_entries,
                binary_size(u64::from(map.value_size).next_multiple_of(8))
            )
        } else {
            format!("{} entries", map.max_entries)
        };
        text.push_str(&format!(
            "  {}: {} here, {} with {large} CPUs ({}, {what})\n",
            map.name,
            binary_size(map.bytes(here)),
            binary_size(map.bytes(large)),
            map.kind.name(),
        ));
    }
    if let Some(rows) = memory.rows_within_budget() {
        text.push_str(&format!(
            "  over {} with {large} CPUs: IOMMUTOP_STATS_ROWS={rows} keeps the maps within it, \
             room for {rows} devices, disks, netdevs and processes that do DMA (a key beyond \
             them is counted as device_map_full)\n",
            binary_size(LARGE_MACHINE_BUDGET)
        ));
    }
    text
}

/// Writes a result as the table (text) and the JSON `--format` and `--json` ask for.
type Out<'a> = &'a dyn Fn(&str, &serde_json::Value) -> Outcome;

fn selftest(out: Out) -> Outcome<ExitCode> {
    let check = check_hist_slots().map_err(|e| Failure::environment(anyhow!(e)))?;
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
    let json = SelftestJson {
        hist_slots: HistSlotsJson {
            values: check.values,
            mismatches: check
                .mismatches
                .iter()
                .map(|m| SlotMismatchJson {
                    value: m.value,
                    kernel: m.kernel,
                    user_space: m.user_space,
                })
                .collect(),
        },
    };
    out(&text, &serde_json::to_value(json)?)?;
    Ok(if check.mismatches.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn verify(out: Out) -> Outcome<ExitCode> {
    let settings = ProbeSettings::from_env().map_err(load_failure)?;
    let verdicts = verify_all_programs(&settings).map_err(load_failure)?;
    let programs: Vec<ProgramJson> = verdicts
        .iter()
        .map(|v| ProgramJson {
            program: &v.program,
            target: &v.target,
            tier: v.tier.name(),
            status: verdict_status(v),
            error: v.error.as_deref(),
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
    out(&text, &serde_json::to_value(VerifyJson { programs })?)?;
    let rejected = verdicts
        .iter()
        .filter(|v| verdict_status(v) == "rejected")
        .count();
    if rejected > 0 {
        return Err(anyhow::anyhow!("{rejected} BPF program(s) rejected by this kernel").into());
    }
    Ok(ExitCode::SUCCESS)
}

/// `probes --selftest --json`: the histogram slots the kernel filed edge values in, where they
/// differ from user space's.
#[derive(Serialize)]
struct SelftestJson {
    hist_slots: HistSlotsJson,
}

#[derive(Serialize)]
struct HistSlotsJson {
    values: usize,
    mismatches: Vec<SlotMismatchJson>,
}

#[derive(Serialize)]
struct SlotMismatchJson {
    value: u64,
    kernel: u32,
    user_space: usize,
}

/// `probes --verify --json`: the verifier's verdict on every program.
#[derive(Serialize)]
struct VerifyJson<'a> {
    programs: Vec<ProgramJson<'a>>,
}

#[derive(Serialize)]
struct ProgramJson<'a> {
    program: &'a str,
    target: &'a str,
    tier: &'static str,
    status: &'static str,
    error: Option<&'a str>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use iommutop_loader::{MapKind, MapShape};

    fn memory(stats_rows: u32) -> MapMemory {
        let map = |name: &str, kind, value_size, max_entries| MapShape {
            name: name.into(),
            kind,
            key_size: 4,
            value_size,
            max_entries,
            flags: 0,
            kernel_bytes: None,
        };
        MapMemory::new(
            2,
            vec![
                map("iommutop_names", MapKind::Array, 64, 256),
                map(STATS_MAP, MapKind::PerCpuArray, 17_408, stats_rows),
                map("iommutop_health", MapKind::PerCpuArray, 8, 10),
                map("iommutop_row_count", MapKind::Array, 4, 1),
            ],
        )
    }

    #[test]
    fn the_text_gives_both_figures_the_largest_maps_and_the_setting_that_reduces_them() {
        let text = map_memory_text(&memory(99));
        assert!(
            text.starts_with(
                "map memory: the probes' 4 BPF maps hold 3.3 MiB with this machine's 2 possible \
                 CPUs, 420.8 MiB with 256 CPUs ("
            ),
            "{text}"
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert_eq!(
            lines[1],
            "  iommutop_stats: 3.3 MiB here, 420.8 MiB with 256 CPUs (percpu_array, 99 rows of \
             17.0 KiB on each CPU, IOMMUTOP_STATS_ROWS sets the rows)"
        );
        assert!(
            lines[2].starts_with("  iommutop_health: 240 B here"),
            "{text}"
        );
        assert!(
            lines[4].starts_with(
                "  over 64.0 MiB with 256 CPUs: IOMMUTOP_STATS_ROWS=15 keeps the maps within it"
            ),
            "{text}"
        );
        let json = serde_json::to_value(MapMemoryJson::of(&memory(99))).expect("encodes");
        assert_eq!(json["stats_rows"], 99);
        assert_eq!(json["stats_rows_within_64_mib"], 15);
        assert_eq!(json["maps"][0]["name"], STATS_MAP);
        assert_eq!(json["maps"][0]["per_cpu"], true);
        assert!(json["kernel_bytes"].is_null());
        let within = map_memory_text(&memory(15));
        assert!(!within.contains("over 64"), "{within}");
    }
}
