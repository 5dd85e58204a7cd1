//! What to try for a translated device, and what it would gain: measured where `--ab` measured
//! it, bounded by the report's own times where it can be, unknown where it cannot.

use super::ab::AbOutcome;
use crate::compare::DeviceWork;
use crate::facts::DomainType;
use crate::sample::Op;
use crate::snapshot::Device;
use iommutop_abi::units::human_ns;
use serde::Serialize;

/// How much a change would save.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Gain {
    /// Measured by running the workload both ways (`diagnose --ab`).
    Measured { text: String },
    /// Bounded by times this run measured, per unit of work.
    Bounded {
        low_ns: f64,
        high_ns: f64,
        unit: String,
    },
    /// At most this time per unit.
    UpTo { ns: f64, unit: String },
    /// Not measurable from one run.
    Unknown,
}

impl Gain {
    fn describe(&self) -> String {
        match self {
            Gain::Measured { text } => format!("measured: {text}"),
            Gain::Bounded {
                low_ns,
                high_ns,
                unit,
            } => format!(
                "expected to save {} to {} per {unit}: from the translation-only work measured \
                 to all time in DMA map and unmap",
                human_ns(low_ns.round() as u64),
                human_ns(high_ns.round() as u64)
            ),
            Gain::UpTo { ns, unit } => {
                format!(
                    "expected to save up to {} per {unit}",
                    human_ns(ns.round() as u64)
                )
            }
            Gain::Unknown => "not measurable from one run".into(),
        }
    }
}

/// One thing to try.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Advice {
    pub action: String,
    pub why: String,
    pub gain: Gain,
}

impl Advice {
    /// The action, then why and the gain on their own lines (indented by the caller).
    pub fn lines(&self) -> [String; 3] {
        [
            self.action.clone(),
            format!("why: {}", self.why),
            format!("gain: {}", self.gain.describe()),
        ]
    }
}

/// What to try for one device that did DMA; nothing for a device that is not translated.
pub fn advise(
    device: &Device,
    work: &DeviceWork,
    unit: &str,
    ab: Option<&AbOutcome>,
) -> Vec<Advice> {
    if !work.translated {
        return Vec::new();
    }
    let group = device
        .iommu_group
        .map_or_else(|| "N".to_string(), |g| g.to_string());
    let mut tips = Vec::new();
    let identity_gain = match ab.filter(|ab| device.key == ab.device_key) {
        Some(ab) => Gain::Measured {
            text: ab.gain_sentence(),
        },
        None => match (work.iommu_ns, work.dma_ns) {
            (Some(low), Some(high)) if high > 0.0 => Gain::Bounded {
                low_ns: low.min(high),
                high_ns: high,
                unit: unit.into(),
            },
            (None, Some(high)) if high > 0.0 => Gain::UpTo {
                ns: high,
                unit: unit.into(),
            },
            _ => Gain::Unknown,
        },
    };
    tips.push(Advice {
        action: format!(
            "identity domain for a device you trust: `echo identity > \
             /sys/kernel/iommu_groups/{group}/type` with its driver unbound, or `iommu=pt` for \
             every device (`iommutop diagnose --ab --device {}` measures the gain)",
            device.key
        ),
        why: "no IOVA allocation, page-table update or IOTLB work per I/O; the device can then \
              reach all memory, so only for a device you trust"
            .into(),
        gain: identity_gain,
    });
    if device.domain_type.as_deref().map(str::parse) == Some(Ok(DomainType::Dma)) {
        let flushes = work.iotlb_flushes.unwrap_or(0.0);
        let flush_ns = device
            .op(Op::IotlbFlush)
            .total_ns()
            .zip(per_unit_divisor(device, work))
            .map(|(ns, units)| ns as f64 / units);
        tips.push(Advice {
            action: format!(
                "lazy invalidation: `echo DMA-FQ > /sys/kernel/iommu_groups/{group}/type` (accepted \
                 while bound) or `iommu.strict=0`"
            ),
            why: format!(
                "strict mode invalidates the IOTLB on every unmap ({flushes:.2} per {unit}); the \
                 flush queue batches them, leaving a short window in which the device can still \
                 reach unmapped memory"
            ),
            gain: flush_ns.map_or(Gain::Unknown, |ns| Gain::UpTo {
                ns,
                unit: unit.into(),
            }),
        });
    }
    let maps = work.dma_maps.unwrap_or(0.0);
    if let Some(avg) = device.op(Op::DmaMap).avg_bytes {
        if maps >= 2.0 && avg < 8192.0 {
            tips.push(Advice {
                action: "larger DMA segments or reused mappings".into(),
                why: format!(
                    "{maps:.1} maps of {avg:.0} bytes on average per {unit}: each pays an IOVA \
                     allocation, a page-table update and an IOTLB sync; drivers that recycle \
                     mapped pages (page_pool) or map larger buffers pay it less often"
                ),
                gain: Gain::Unknown,
            });
        }
    }
    if let Some(share) = device.derived.of_which.get(&Op::IovaAllocSlow) {
        if *share >= 0.05 {
            tips.push(Advice {
                action: "keep mappings under 128 KiB or fewer in flight".into(),
                why: format!(
                    "{:.0}% of translation time is IOVA allocation through the rbtree: the \
                     per-CPU IOVA caches only hold sizes up to 128 KiB",
                    share * 100.0
                ),
                gain: device
                    .derived
                    .translation_ns_per_io
                    .map_or(Gain::Unknown, |ns| Gain::UpTo {
                        ns: ns * share,
                        unit: "I/O".into(),
                    }),
            });
        }
    }
    let storage = device.driver.as_deref() == Some("nvme")
        || device.names.iter().any(|n| n.starts_with("nvme"));
    if storage {
        tips.push(Advice {
            action: "a userspace driver (VFIO) with buffers in 2 MiB huge pages".into(),
            why:
                "it maps its buffers once at set-up instead of per I/O, and huge pages need fewer \
                  IOTLB entries; `iommutop run` with the vfio-nvme workload measures it"
                    .into(),
            gain: work.dma_ns.map_or(Gain::Unknown, |ns| Gain::UpTo {
                ns,
                unit: unit.into(),
            }),
        });
    }
    tips
}

/// The number of units `work` is per, recovered from the maps count (`dma_maps` per unit).
fn per_unit_divisor(device: &Device, work: &DeviceWork) -> Option<f64> {
    let maps = device.op(Op::DmaMap).count as f64;
    work.dma_maps.filter(|m| *m > 0.0).map(|per| maps / per)
}
