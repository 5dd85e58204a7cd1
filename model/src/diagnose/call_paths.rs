//! The sampled kernel call paths of DMA API calls: the heaviest few of a device, as a verdict
//! lists them, and all of them in the folded format of flame-graph tools.

use crate::report::Report;
use iommutop_abi::{Op, RowKey};

/// How many call paths a verdict lists per device (the ranked list of sampled kernel stacks).
pub const CALL_PATHS: usize = 3;

/// Frames shown of a call path: the probed function and the callers that explain it.
const SHOWN_FRAMES: usize = 6;

/// A device's sampled call paths as shown (their first frames), merged and heaviest first.
pub(super) fn heaviest_paths(report: &Report, device: &RowKey) -> Vec<(Op, String, u64)> {
    let mut merged: Vec<(Op, String, u64)> = Vec::new();
    for stack in report.stacks.iter().filter(|s| s.device == *device) {
        let path = stack
            .frames
            .iter()
            .take(SHOWN_FRAMES)
            .map(String::as_str)
            .collect::<Vec<_>>();
        let path = path.join(" ← ");
        match merged
            .iter_mut()
            .find(|(op, p, _)| *op == stack.op && *p == path)
        {
            Some((_, _, samples)) => *samples += stack.samples,
            None => merged.push((stack.op, path, stack.samples)),
        }
    }
    merged.sort_by_key(|(_, _, samples)| std::cmp::Reverse(*samples));
    merged.truncate(CALL_PATHS);
    merged
}

/// The sampled call paths in the folded format of flame-graph tools, one line per path:
/// `DEVICE;OP;outermost;...;innermost SAMPLES`.
pub fn folded_stacks(report: &Report) -> Vec<String> {
    report
        .stacks
        .iter()
        .map(|s| {
            let device = s.device.text();
            let mut frames: Vec<&str> = vec![&device, s.op.name()];
            frames.extend(s.frames.iter().rev().map(String::as_str));
            format!("{} {}", frames.join(";"), s.samples)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::verdict;
    use crate::report::fixtures::full_report;
    use crate::report::StackSample;

    #[test]
    fn call_paths_that_look_the_same_are_merged_heaviest_first() {
        let mut report = full_report();
        let device = report.devices[0].key.clone();
        let path = |top: &str, samples| StackSample {
            device: device.clone(),
            op: Op::DmaMap,
            samples,
            total_ns: 0,
            frames: vec!["dma_map_page_attrs".into(), top.into()],
        };
        report.stacks = vec![
            path("nvme_queue_rq", 2),
            path("e1000_xmit_frame", 3),
            path("nvme_queue_rq", 4),
        ];
        let paths = heaviest_paths(&report, &device);
        assert_eq!(
            paths,
            [
                (
                    Op::DmaMap,
                    "dma_map_page_attrs ← nvme_queue_rq".to_string(),
                    6
                ),
                (
                    Op::DmaMap,
                    "dma_map_page_attrs ← e1000_xmit_frame".to_string(),
                    3
                ),
            ]
        );
        let text = verdict(&report, None, None);
        assert!(
            text.contains("  call paths that pay it (sampled, most first):\n    dma_map ×6: dma_map_page_attrs ← nvme_queue_rq\n"),
            "{text}"
        );
    }

    #[test]
    fn folded_stacks_put_the_device_and_op_first_and_the_callee_last() {
        let mut report = full_report();
        report.stacks = vec![StackSample {
            device: "0000:00:05.0".into(),
            op: Op::DmaMap,
            samples: 7,
            total_ns: 0,
            frames: vec!["dma_map_page_attrs".into(), "e1000_xmit_frame".into()],
        }];
        assert_eq!(
            folded_stacks(&report),
            ["0000:00:05.0;dma_map;e1000_xmit_frame;dma_map_page_attrs 7"]
        );
    }
}
