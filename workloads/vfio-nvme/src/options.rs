//! The driver's parameters, declared once ([`SPECS`]) with the parameter system every workload
//! uses ([`iommutop_abi::params`]): `iommutop workload vfio-nvme`, profiles and the runner
//! check values against it, and [`Params::from_values`] / [`SweepFromValues::from_values`] read the
//! checked values into the typed parameters, with no string round trip.

use crate::error::ParamError;
use crate::params::{PageSize, Params, Pattern, Stop, SweepParams, Target};
use iommutop_abi::params::{DefaultValue, Kind, ParamSpec, ParamValues};
use std::time::Duration;

pub const SPECS: &[ParamSpec] = &[
    ParamSpec {
        key: "mode",
        kind: Kind::Choice(&["run", "iotlb-sweep"]),
        default: DefaultValue::Str("run"),
        help: "`run`: I/O at a queue depth; `iotlb-sweep`: QD1 reads over 1, 2, 4 … pages per page size",
    },
    ParamSpec {
        key: "device",
        kind: Kind::Str,
        default: DefaultValue::Unset,
        help: "PCI address, nvme0 or /dev/nvme0n1 (default: the only NVMe controller; writes need it named)",
    },
    ParamSpec {
        key: "bind",
        kind: Kind::Bool,
        default: DefaultValue::Unset,
        help: "bind the controller to vfio-pci for the run and back to its driver after",
    },
    ParamSpec {
        key: "reserve_hugepages",
        kind: Kind::Bool,
        default: DefaultValue::Unset,
        help: "raise nr_hugepages as the run needs and put it back after",
    },
    ParamSpec {
        key: "backend",
        kind: Kind::Choice(&["auto", "legacy", "iommufd"]),
        default: DefaultValue::Unset,
        help: "VFIO interface: the legacy container/group or iommufd (default auto)",
    },
    ParamSpec {
        key: "nsid",
        kind: Kind::Int {
            min: 1,
            max: 0xffff_fffe,
        },
        default: DefaultValue::Unset,
        help: "namespace (default 1)",
    },
    ParamSpec {
        key: "pattern",
        kind: Kind::Choice(&["randread", "randwrite", "read", "write"]),
        default: DefaultValue::Unset,
        help: "access pattern (default randread)",
    },
    ParamSpec {
        key: "bs",
        kind: Kind::Size {
            min: 512,
            max: 2 << 20,
        },
        default: DefaultValue::Unset,
        help: "bytes per I/O (default 4k)",
    },
    ParamSpec {
        key: "qd",
        kind: Kind::Int { min: 1, max: 1024 },
        default: DefaultValue::Unset,
        help: "commands in flight per thread (default 1)",
    },
    ParamSpec {
        key: "threads",
        kind: Kind::Int { min: 1, max: 64 },
        default: DefaultValue::Unset,
        help: "threads, one I/O queue pair each (default 1)",
    },
    ParamSpec {
        key: "duration_s",
        kind: Kind::Float {
            min: 0.001,
            max: 86_400.0,
        },
        default: DefaultValue::Unset,
        help: "how long a run does I/O (default 10)",
    },
    ParamSpec {
        key: "ios",
        kind: Kind::Int {
            min: 1,
            max: i64::MAX,
        },
        default: DefaultValue::Unset,
        help: "I/Os in total instead of a duration; the sweep: I/Os per step",
    },
    ParamSpec {
        key: "pages",
        kind: Kind::Str,
        default: DefaultValue::Unset,
        help: "distinct buffer pages per thread; the sweep: the largest count, or per size (`4k=4096,2m=128`)",
    },
    ParamSpec {
        key: "page_size",
        kind: Kind::ChoiceList(&["4k", "2m", "1g"]),
        default: DefaultValue::Unset,
        help: "page size of the DMA buffers; the sweep takes a list",
    },
    ParamSpec {
        key: "allow_write",
        kind: Kind::Bool,
        default: DefaultValue::Unset,
        help: "writes overwrite the device: needed for randwrite and write, with `device`",
    },
    ParamSpec {
        key: "verify",
        kind: Kind::Bool,
        default: DefaultValue::Unset,
        help: "writes a pattern derived from the LBA and seed; reads check it",
    },
    ParamSpec {
        key: "ccdf_csv",
        kind: Kind::Str,
        default: DefaultValue::Unset,
        help: "also write the latency CCDF here as CSV (thread,latency_ns,ccdf)",
    },
    ParamSpec {
        key: "svg",
        kind: Kind::Str,
        default: DefaultValue::Unset,
        help: "the sweep: also write its latency-per-pages plot here as SVG",
    },
    ParamSpec {
        key: "seed",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        default: DefaultValue::Unset,
        help: "seeds the random LBAs and the verify pattern (default 1)",
    },
];

/// Whether the parameters ask for the IOTLB sweep.
pub fn is_sweep(values: &ParamValues) -> bool {
    values.str("mode").is_ok_and(|m| m == "iotlb-sweep")
}

/// The option a key stands for in messages (`qd` is `--qd`, `duration_s` is `--duration`).
fn option_of(key: &str) -> String {
    match key {
        "duration_s" => "--duration".to_string(),
        _ => format!("--{}", key.replace('_', "-")),
    }
}

/// Typed reads of checked values, errors named by option.
struct Reader<'a>(&'a ParamValues);

impl Reader<'_> {
    fn error(key: &str, e: impl std::fmt::Display) -> ParamError {
        ParamError::new(&option_of(key), "", e.to_string())
    }

    fn flag(&self, key: &str) -> Result<bool, ParamError> {
        if !self.0.has(key) {
            return Ok(false);
        }
        self.0.bool(key).map_err(|e| Reader::error(key, e))
    }

    fn number<T: TryFrom<u64>>(&self, key: &str) -> Result<Option<T>, ParamError> {
        if !self.0.has(key) {
            return Ok(None);
        }
        let n = self.0.u64(key).map_err(|e| Reader::error(key, e))?;
        T::try_from(n)
            .map(Some)
            .map_err(|_| ParamError::new(&option_of(key), n.to_string(), "out of range"))
    }

    fn text(&self, key: &str) -> Result<Option<&str>, ParamError> {
        self.0.opt_str(key).map_err(|e| Reader::error(key, e))
    }

    fn list(&self, key: &str) -> Result<Option<Vec<String>>, ParamError> {
        if !self.0.has(key) {
            return Ok(None);
        }
        self.0
            .strs(key)
            .map(Some)
            .map_err(|e| Reader::error(key, e))
    }

    fn seconds(&self, key: &str) -> Result<Option<f64>, ParamError> {
        if !self.0.has(key) {
            return Ok(None);
        }
        self.0.f64(key).map(Some).map_err(|e| Reader::error(key, e))
    }

    fn target(&self) -> Result<Target, ParamError> {
        let mut target = Target {
            device: self.text("device")?.map(str::to_string),
            bind: self.flag("bind")?,
            reserve_hugepages: self.flag("reserve_hugepages")?,
            ..Target::default()
        };
        if let Some(backend) = self.text("backend")? {
            target.backend = backend.parse()?;
        }
        if let Some(nsid) = self.number("nsid")? {
            target.nsid = nsid;
        }
        Ok(target)
    }

    fn block_size(&self) -> Result<Option<u32>, ParamError> {
        self.number("bs")
    }

    fn page_sizes(&self) -> Result<Option<Vec<PageSize>>, ParamError> {
        let Some(names) = self.list("page_size")? else {
            return Ok(None);
        };
        let mut sizes = Vec::new();
        for name in &names {
            let size: PageSize = name.parse()?;
            if !sizes.contains(&size) {
                sizes.push(size);
            }
        }
        Ok(Some(sizes))
    }
}

/// A whole number given as text (`pages`), decimal or hex with 0x.
fn whole_number(option: &str, text: &str) -> Result<u64, ParamError> {
    let t = text.trim().replace('_', "");
    match t.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => t.parse::<u64>(),
    }
    .map_err(|_| ParamError::new(option, text, "give a whole number"))
}

/// Reading a run from checked values: a trait, as [`Params`] is the results' type.
pub trait RunFromValues: Sized {
    /// A run from checked values (keys absent take the defaults).
    fn from_values(values: &ParamValues) -> Result<Self, ParamError>;
}

impl RunFromValues for Params {
    fn from_values(values: &ParamValues) -> Result<Params, ParamError> {
        let read = Reader(values);
        let mut params = Params {
            target: read.target()?,
            allow_write: read.flag("allow_write")?,
            verify: read.flag("verify")?,
            ..Params::default()
        };
        if let Some(pattern) = read.text("pattern")? {
            params.pattern = pattern.parse()?;
        }
        if let Some(bs) = read.block_size()? {
            params.block_size = bs;
        }
        if let Some(qd) = read.number("qd")? {
            params.queue_depth = qd;
        }
        if let Some(threads) = read.number("threads")? {
            params.threads = threads;
        }
        if let Some(seconds) = read.seconds("duration_s")? {
            let duration = Duration::try_from_secs_f64(seconds).map_err(|_| {
                ParamError::new("--duration", seconds.to_string(), "give a positive time")
            })?;
            params.stop = Stop::Duration(duration);
        }
        if let Some(ios) = read.number("ios")? {
            params.stop = Stop::Ios(ios);
        }
        if let Some(pages) = read.text("pages")? {
            params.pages = Some(whole_number("--pages", pages)?);
        }
        if let Some(sizes) = read.page_sizes()? {
            params.page_size = match sizes.as_slice() {
                [one] => *one,
                _ => {
                    return Err(ParamError::new(
                        "--page-size",
                        read.list("page_size")?.unwrap_or_default().join(","),
                        "a run takes one page size (4k, 2m or 1g); the sweep takes a list",
                    ))
                }
            };
        }
        if let Some(seed) = read.number("seed")? {
            params.seed = seed;
        }
        Ok(params)
    }
}

/// Reading a sweep from checked values: a trait, as [`SweepParams`] is the results' type.
pub trait SweepFromValues: Sized {
    /// A sweep from checked values (keys absent take the defaults); options a sweep has no use
    /// for are refused.
    fn from_values(values: &ParamValues) -> Result<Self, ParamError>;
}

impl SweepFromValues for SweepParams {
    fn from_values(values: &ParamValues) -> Result<SweepParams, ParamError> {
        let read = Reader(values);
        let mut sweep = SweepParams {
            target: read.target()?,
            ..SweepParams::default()
        };
        if let Some(sizes) = read.page_sizes()? {
            sweep.page_sizes = sizes;
        }
        if let Some(pages) = read.text("pages")? {
            set_max_pages(&mut sweep, pages)?;
        }
        if let Some(ios) = read.number("ios")? {
            sweep.ios_per_step = ios;
        }
        if let Some(bs) = read.block_size()? {
            sweep.block_size = bs;
        }
        if let Some(seed) = read.number("seed")? {
            sweep.seed = seed;
        }
        if let Some(pattern) = read.text("pattern")? {
            let pattern: Pattern = pattern.parse()?;
            if pattern.is_write() {
                return Err(ParamError::new(
                    "--pattern",
                    pattern.name(),
                    "the sweep only reads: use randread",
                ));
            }
        }
        for key in ["qd", "threads"] {
            if let Some(n) = read.number::<u64>(key)? {
                if n != 1 {
                    return Err(ParamError::new(
                        &option_of(key),
                        n.to_string(),
                        "the sweep runs at QD1 on one thread",
                    ));
                }
            }
        }
        let refused = [
            ("duration_s", values.has("duration_s")),
            ("allow_write", read.flag("allow_write")?),
            ("verify", read.flag("verify")?),
        ]
        .into_iter()
        .find(|(_, given)| *given);
        if let Some((key, _)) = refused {
            return Err(ParamError::new(
                &option_of(key),
                "",
                "the sweep does not take this option (it reads `ios` per step)",
            ));
        }
        Ok(sweep)
    }
}

/// `pages`: the largest count for every page size (`4096`) or per size (`4k=4096,2m=128`).
fn set_max_pages(sweep: &mut SweepParams, text: &str) -> Result<(), ParamError> {
    if !text.contains('=') {
        sweep.max_pages = Some(whole_number("--pages", text)?);
        return Ok(());
    }
    let fix = "give a count for all page sizes (4096) or per size (4k=4096,2m=128)";
    for part in text.split(',') {
        let (size, n) = part
            .split_once('=')
            .ok_or_else(|| ParamError::new("--pages", text, fix))?;
        let size: PageSize = size
            .parse()
            .map_err(|_| ParamError::new("--pages", text, fix))?;
        let n = whole_number("--pages", n)?;
        sweep.max_pages_per_size.retain(|(s, _)| *s != size);
        sweep.max_pages_per_size.push((size, n));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
