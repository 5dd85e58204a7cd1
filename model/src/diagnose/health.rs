//! The line said before a verdict when its figures lack calls: those no probe program saw, those
//! still open at the end, events dropped, and latencies that leave out more than a few calls.

use crate::report::Report;
use crate::sample::Health;
use iommutop_abi::units::percent;

/// Whether a figure below lacks calls (see docs/probes.md, "How the loss figures are
/// computed"): said before the verdict, so that no figure is read as complete when it is not, and
/// not said at all on a run whose counts are exact and whose latencies miss at most
/// [`UNTIMED_SHARE_LIMIT`](crate::losses::UNTIMED_SHARE_LIMIT) of any operation's calls.
pub(super) fn health_line(report: &Report) -> Option<String> {
    let Some(losses) = &report.losses else {
        return health_line_before_losses(report);
    };
    let health = |counter: Health| report.health.get(&counter).copied().unwrap_or(0);
    let mut parts = Vec::new();
    let lost: Vec<String> = losses
        .lost_groups()
        .map(|g| {
            let names: Vec<&str> = g.ops.iter().map(|op| op.name()).collect();
            format!("{} {}", g.lost, crate::losses::either(&names))
        })
        .collect();
    if !lost.is_empty() {
        parts.push(format!(
            "calls seen by no probe program: {} (the counts are short by that many)",
            lost.join(", ")
        ));
    }
    let open = losses.open_at_end();
    if open > 0 {
        parts.push(if open == 1 {
            "1 call was still open at the end (its exit never seen): counted nowhere".to_string()
        } else {
            format!(
                "{open} calls were still open at the end (their exits never seen): counted nowhere"
            )
        });
    }
    let dropped = health(Health::DeviceMapFull).saturating_add(health(Health::RowBusy));
    if dropped > 0 {
        parts.push(format!(
            "{dropped} events were dropped (statistics rows full or busy): the counts are short by that many"
        ));
    }
    let unseen = health(Health::CompletionsUnseen);
    if unseen > 0 {
        parts.push(format!(
            "the block layer completed {unseen} more requests than the probes counted"
        ));
    }
    let untimed: Vec<String> = losses
        .untimed_over_limit()
        .map(|(op, _, share)| format!("{} of {} calls", percent(share), op.name()))
        .collect();
    if !untimed.is_empty() {
        parts.push(format!(
            "the latencies leave out {} (counted, not timed)",
            untimed.join(" and ")
        ));
    }
    (!parts.is_empty()).then(|| format!("numbers may be incomplete: {}", parts.join("; ")))
}

/// [`health_line`] for reports written before `losses`: their health counters bound what was
/// missed (`missed_calls.<op>`), where newer reports give it exactly.
fn health_line_before_losses(report: &Report) -> Option<String> {
    let seen_at_one_end = [
        Health::RecursionMisses,
        Health::ExitWithoutEntry,
        Health::AbandonedFrames,
        Health::ClockBehindEntry,
    ]
    .iter()
    .filter_map(|counter| report.health.get(counter))
    .fold(0u64, |sum, &n| sum.saturating_add(n));
    let untracked = [
        Health::NestingOverflow,
        Health::TaskMapFull,
        Health::DeviceMapFull,
    ]
    .iter()
    .filter_map(|counter| report.health.get(counter))
    .chain(
        report
            .health
            .iter()
            .filter(|(counter, _)| matches!(counter, Health::MissedCalls(_)))
            .map(|(_, n)| n),
    )
    .fold(0u64, |sum, &n| sum.saturating_add(n));
    if seen_at_one_end == 0 && untracked == 0 {
        return None;
    }
    let mut parts = Vec::new();
    if seen_at_one_end > 0 {
        parts.push(format!(
            "{seen_at_one_end} probe runs were skipped or calls seen at one end only: those calls are counted but not timed, and work nested in them may be `unattributed`"
        ));
    }
    if untracked > 0 {
        parts.push(format!(
            "{untracked} calls could not be tracked (nesting or maps full): counts may be short"
        ));
    }
    Some(format!("numbers may be incomplete: {}", parts.join("; ")))
}
