//! Kernel release, command line and the IOMMU options of the kernel config.

use super::fs::read_trimmed;
use flate2::read::GzDecoder;
use iommutop_model::facts::cmdline_params;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

/// Kernel config options that change what IOMMU translation does or costs (without `CONFIG_`).
pub const IOMMU_CONFIG_OPTIONS: &[&str] = &[
    "IOMMU_SUPPORT",
    "IOMMU_API",
    "IOMMU_DMA",
    "IOMMU_IOVA",
    "IOMMU_DEFAULT_DMA_STRICT",
    "IOMMU_DEFAULT_DMA_LAZY",
    "IOMMU_DEFAULT_PASSTHROUGH",
    "IOMMU_DEBUGFS",
    "IOMMUFD",
    "INTEL_IOMMU",
    "INTEL_IOMMU_DEFAULT_ON",
    "INTEL_IOMMU_SCALABLE_MODE_DEFAULT_ON",
    "INTEL_IOMMU_SVM",
    "INTEL_IOMMU_FLOPPY_WA",
    "INTEL_IOMMU_PERF_EVENTS",
    "IRQ_REMAP",
    "AMD_IOMMU",
    "AMD_IOMMU_V2",
    "VIRTIO_IOMMU",
    "SWIOTLB",
    "DMA_API_DEBUG",
    "VFIO",
    "VFIO_PCI",
    "VFIO_IOMMU_TYPE1",
    "VFIO_NOIOMMU",
    "VFIO_CONTAINER",
];

/// `/proc/sys/kernel/osrelease`.
pub fn kernel_release(root: &Path) -> Option<String> {
    read_trimmed(&root.join("proc/sys/kernel/osrelease"))
}

/// `/proc/cmdline`.
pub fn cmdline(root: &Path) -> Option<String> {
    read_trimmed(&root.join("proc/cmdline"))
}

/// Whether the command line carries the lab's mark, `iommutop.lab` (bare, `=1`, `=y` or `=on`).
pub fn is_lab(cmdline: &str) -> bool {
    cmdline_params(cmdline)
        .into_iter()
        .any(|(key, value)| key == "iommutop.lab" && matches!(value, "" | "1" | "y" | "on"))
}

/// The IOMMU options of the running kernel's config, from `/proc/config.gz` or else
/// `/boot/config-RELEASE`; empty if neither can be read.
pub fn kernel_config(root: &Path, release: Option<&str>) -> BTreeMap<String, String> {
    config_text(root, release)
        .map(|text| iommu_options(&text))
        .unwrap_or_default()
}

/// The running kernel's whole config, from `/proc/config.gz` or else `/boot/config-RELEASE`.
pub fn config_text(root: &Path, release: Option<&str>) -> Option<String> {
    read_gzip(&root.join("proc/config.gz")).or_else(|| {
        let release = release?;
        std::fs::read_to_string(root.join("boot").join(format!("config-{release}"))).ok()
    })
}

fn read_gzip(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    GzDecoder::new(file).read_to_string(&mut text).ok()?;
    Some(text)
}

/// `CONFIG_X=value` and `# CONFIG_X is not set` (as `n`) lines for the options we care about.
fn iommu_options(config: &str) -> BTreeMap<String, String> {
    config
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            if let Some(unset) = line.strip_prefix("# CONFIG_") {
                let name = unset.strip_suffix(" is not set")?;
                return Some((name, "n"));
            }
            let (name, value) = line.strip_prefix("CONFIG_")?.split_once('=')?;
            Some((name, value.trim_matches('"')))
        })
        .filter(|(name, _)| IOMMU_CONFIG_OPTIONS.contains(name))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}
