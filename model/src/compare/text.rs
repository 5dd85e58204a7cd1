//! The text `iommutop compare` prints: the two runs, the findings with their evidence (a
//! device's figures shown once), the host differences, each device's work per unit in A and B
//! (and its waiting, where either run measured some) and the workload's numbers.

use super::explain::{f2, ns, waiting_figure, work_line, FindingKind};
use super::Comparison;
use std::fmt::Write;

/// One figure of a device's work, as text.
type ShowWork = fn(&super::DeviceWork) -> String;

impl Comparison {
    /// `detail` of finding `rank`, or, when it is the figures of a device already shown under an
    /// earlier finding, a pointer to them (with what the line adds to them).
    fn once<'a>(
        &'a self,
        detail: &'a str,
        rank: usize,
        shown: &mut Vec<(&'a str, usize)>,
    ) -> std::borrow::Cow<'a, str> {
        for d in &self.devices {
            let figures = work_line(d);
            let Some(rest) = detail.strip_prefix(figures.as_str()) else {
                continue;
            };
            if let Some((_, first)) = shown.iter().find(|(key, _)| *key == d.key) {
                return format!("{}: figures as under {first}. above{rest}", d.label).into();
            }
            shown.push((&d.key, rank));
        }
        detail.into()
    }

    /// The text `iommutop compare` prints; `names` label A and B (file names).
    pub fn render(&self, names: (&str, &str)) -> String {
        let mut out = String::new();
        self.render_runs(&mut out, names);
        self.render_findings(&mut out);
        if !self.host.is_empty() {
            let _ = writeln!(out, "\nhost (A → B):");
            for h in &self.host {
                let _ = writeln!(out, "  {:<22} {}: {} → {}", h.role.name(), h.what, h.a, h.b);
            }
        }
        self.render_devices(&mut out);
        self.render_workload(&mut out);
        out
    }

    /// A and B (what ran, how many runs, how long, from when), the noise, and the warnings.
    fn render_runs(&self, out: &mut String, names: (&str, &str)) {
        let sides = [("A", names.0, &self.a), ("B", names.1, &self.b)];
        let runs = [self.noise.runs_a, self.noise.runs_b];
        for ((tag, name, side), runs) in sides.into_iter().zip(runs) {
            let mut parts = side.description();
            if runs > 1 {
                parts.push(format!("{runs} runs"));
            }
            parts.push(format!("{:.1} s from {}", side.duration_s, side.started_at));
            let _ = writeln!(out, "{tag}: {name}: {}", parts.join("; "));
        }
        let _ = writeln!(out, "{}.", self.noise.sentence());
        for warning in &self.warnings {
            let _ = writeln!(out, "warning: {warning}.");
        }
        out.push('\n');
    }

    /// The findings, ranked (the workload's unranked), each with its share of the gap and its
    /// evidence.
    fn render_findings(&self, out: &mut String) {
        let mut rank = 0;
        // A device's figures are shown under the first finding about it; later ones point there.
        let mut shown: Vec<(&str, usize)> = Vec::new();
        for finding in &self.findings {
            let prefix = match (finding.kind, finding.share_of_gap) {
                (FindingKind::Workload, _) => String::new(),
                (_, Some(share)) => {
                    rank += 1;
                    format!(
                        "{rank}. [{:.0}% of the translation-time gap] ",
                        share * 100.0
                    )
                }
                (_, None) => {
                    rank += 1;
                    format!("{rank}. ")
                }
            };
            let _ = writeln!(out, "{prefix}{}.", finding.headline);
            for detail in &finding.details {
                let _ = writeln!(out, "     {}", self.once(detail, rank, &mut shown));
            }
        }
    }

    /// Each device's work per unit in A and B.
    fn render_devices(&self, out: &mut String) {
        if self.devices.is_empty() {
            return;
        }
        // Devices that count in different units each say their own.
        let own_units = self.device_unit == super::OWN_UNITS;
        if own_units {
            let _ = writeln!(out, "\ndevices, each per its own unit (A → B):");
        } else {
            let _ = writeln!(out, "\ndevices, per {} (A → B):", self.device_unit);
        }
        for d in &self.devices {
            render_device(out, d, own_units);
        }
    }

    /// The workload's numbers in A and B, with the change and whether it is beyond the noise.
    fn render_workload(&self, out: &mut String) {
        if self.workload.is_empty() {
            return;
        }
        let _ = writeln!(out, "\nworkload (A → B):");
        for m in &self.workload {
            let change = m
                .change
                .map_or("-".into(), |x| format!("{:+.1}%", x * 100.0));
            let noise = match m.significance {
                Some(s) if s.beyond_noise => format!("beyond noise (±{:.1}%)", s.band * 100.0),
                Some(s) => format!("within noise (±{:.1}%)", s.band * 100.0),
                None => String::new(),
            };
            let _ = writeln!(
                out,
                "  {:<22} {:.1} → {:.1}  {change}  {noise}",
                m.metric, m.a, m.b
            );
        }
    }
}

/// One device: its label (its own unit, its share of the gap), a row per figure of its work,
/// then its waiting and its time noise where there are some.
fn render_device(out: &mut String, d: &super::DeviceChange, own_units: bool) {
    let share = d
        .share_of_gap
        .map(|s| format!("  [{:.0}% of the gap]", s * 100.0))
        .unwrap_or_default();
    let unit = if own_units {
        format!(", per {}", d.unit())
    } else {
        String::new()
    };
    let _ = writeln!(out, "  {}{unit}{share}", d.label);
    let text = |w: &Option<super::DeviceWork>, f: fn(&super::DeviceWork) -> String| {
        w.as_ref().map_or("-".to_string(), f)
    };
    let rows: [(&str, ShowWork); 7] = [
        ("domain type", |w| {
            w.domain_type
                .clone()
                .unwrap_or_else(|| "no IOMMU group".into())
        }),
        ("DMA maps", |w| f2(w.dma_maps)),
        ("IOMMU page-table maps", |w| f2(w.iommu_maps)),
        ("IOTLB syncs", |w| f2(w.iotlb_syncs)),
        ("IOTLB invalidations", |w| f2(w.iotlb_flushes)),
        ("IOMMU work", |w| ns(w.iommu_ns)),
        ("DMA map+unmap time", |w| ns(w.dma_ns)),
    ];
    for (what, f) in rows {
        let _ = writeln!(out, "    {what:<22} {} → {}", text(&d.a, f), text(&d.b, f));
    }
    // The times above are on-CPU; waiting, where either run measured some, apart.
    let waited = |w: &Option<super::DeviceWork>| {
        w.as_ref()
            .and_then(|w| w.dma_offcpu_ns)
            .is_some_and(|ns| ns > 0.0)
    };
    if waited(&d.a) || waited(&d.b) {
        let _ = writeln!(
            out,
            "    {:<22} {} → {}",
            "switched out (waiting)",
            text(&d.a, waiting_figure),
            text(&d.b, waiting_figure)
        );
    }
    if let Some(s) = d.dma_time {
        let _ = writeln!(
            out,
            "    {:<22} ±{:.1}% ({})",
            "time noise",
            s.band * 100.0,
            if s.beyond_noise {
                "change beyond it"
            } else {
                "change within it"
            }
        );
    }
}
