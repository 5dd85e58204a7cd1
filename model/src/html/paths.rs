//! A device's sampled call paths (`stacks`) as a ranked list: the heaviest paths first, each
//! with its share of the device's samples drawn as a bar, the mean latency of its sampled calls,
//! and its frames innermost first (all of them when unfolded).

use super::escape::escape;
use crate::report::{Report, StackSample};
use iommutop_abi::units::human_ns;
use std::fmt::Write;

/// Paths listed per device; the rest are summed in one line.
pub const LISTED: usize = 15;

/// Frames shown before the list is folded (the probed function and the callers that explain it).
const SHOWN_FRAMES: usize = 5;

/// The call-path list of the row `key`, or a sentence saying none was sampled.
pub fn call_paths(report: &Report, key: &str) -> String {
    let mut stacks: Vec<&StackSample> = report
        .stacks
        .iter()
        .filter(|s| s.device.text() == key)
        .collect();
    if stacks.is_empty() {
        return "<p class=\"note\">No call path sampled for this row (stack sampling needs the \
                fentry or kprobe tier, and samples DMA API calls only).</p>\n"
            .to_string();
    }
    stacks.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.frames.cmp(&b.frames)));
    let total: u64 = stacks.iter().map(|s| s.samples).sum();
    let mut out = String::from(
        "<table class=\"paths\"><thead><tr><th>op</th><th>samples</th><th>share</th>\
         <th>mean</th><th>call path (innermost first)</th></tr></thead><tbody>\n",
    );
    for stack in stacks.iter().take(LISTED) {
        let share = stack.samples as f64 / total.max(1) as f64;
        let mean = (stack.samples > 0).then(|| human_ns(stack.total_ns / stack.samples));
        let shown: Vec<String> = stack
            .frames
            .iter()
            .take(SHOWN_FRAMES)
            .map(|f| escape(f))
            .collect();
        let mut path = shown.join(" ← ");
        if stack.frames.len() > SHOWN_FRAMES {
            let all: Vec<String> = stack.frames.iter().map(|f| escape(f)).collect();
            path = format!(
                "<details><summary>{path} ← …</summary>{}</details>",
                all.join("<br>")
            );
        }
        let _ = writeln!(
            out,
            "<tr><td>{op}</td><td class=\"num\">{samples}</td><td class=\"share\">\
             <span class=\"meter\" style=\"width:{width:.1}%\"></span>{percent:.1}%</td>\
             <td class=\"num\">{mean}</td><td class=\"frames\">{path}</td></tr>",
            op = escape(stack.op.name()),
            samples = stack.samples,
            width = share * 100.0,
            percent = share * 100.0,
            mean = mean.unwrap_or_else(|| "–".into()),
        );
    }
    if stacks.len() > LISTED {
        let rest: u64 = stacks.iter().skip(LISTED).map(|s| s.samples).sum();
        let _ = writeln!(
            out,
            "<tr><td></td><td class=\"num\">{rest}</td><td colspan=\"3\">in {} other paths</td></tr>",
            stacks.len() - LISTED
        );
    }
    out.push_str("</tbody></table>\n");
    out
}
