//! The probes' `IOMMUTOP_*` settings, read from the environment once into [`ProbeSettings`]:
//! a value a setting does not take is a one-line usage error naming the variable and what it takes.

use crate::abi::{IOMMUTOP_MAX_DEVICES, IOMMUTOP_ROW_HINT_BITS, IOMMUTOP_TASK_SLOTS};
use crate::maps::capacity::stats_capacity;
use std::sync::OnceLock;

/// Each CPU samples the kernel call path of at most one DMA API call per this many ms, unless
/// `IOMMUTOP_STACK_INTERVAL_MS` says otherwise (0 turns sampling off).
pub const DEFAULT_STACK_INTERVAL_MS: u64 = 20;

/// Where the kernel's BTF is read from unless `IOMMUTOP_KERNEL_BTF` says otherwise.
const DEFAULT_KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

/// A setting's value it does not take: the text names the variable and the values it takes.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{name}={value}: give {takes}, or unset it")]
pub struct BadSetting {
    pub name: &'static str,
    pub value: String,
    /// The values it takes, in words.
    pub takes: String,
}

impl BadSetting {
    pub(crate) fn new(name: &'static str, value: &str, takes: impl Into<String>) -> BadSetting {
        BadSetting {
            name,
            value: value.to_string(),
            takes: takes.into(),
        }
    }
}

/// Every setting the probes are loaded with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSettings {
    /// Between two call-path samples per CPU (0: none), in ns (`IOMMUTOP_STACK_INTERVAL_MS`).
    pub stack_interval_ns: u64,
    /// How many thread-id slots the probes keep calls in flight in before the hash by thread id
    /// (`IOMMUTOP_TASK_SLOTS`, a power of two up to `IOMMUTOP_TASK_SLOTS`; tests set 1, which
    /// sends every task but the slot's holder to the hash), as the mask of a thread id.
    pub task_slot_mask: u32,
    /// The rows of statistics: what `IOMMUTOP_STATS_ROWS` says, else sized for this machine.
    pub stats_rows: u32,
    /// How many of the hints of which statistics row is a key's the probes keep
    /// (`IOMMUTOP_ROW_HINTS`, 1 to `1 << IOMMUTOP_ROW_HINT_BITS`): a key whose hint index is
    /// beyond them finds its row the slow way at every lookup, as tests make nearly every key do
    /// with 1.
    pub row_hints: u32,
    /// Where the kernel's BTF is read from (`IOMMUTOP_KERNEL_BTF`); tests point it elsewhere to
    /// exercise the no-BTF path.
    pub kernel_btf: String,
    /// Whether one program serves many functions where the kernel links it so
    /// (`IOMMUTOP_LINKS=multi`, the default: faster to attach, more runs skipped under load) or
    /// each function has its own programs (`IOMMUTOP_LINKS=per-function`): see
    /// `loader/src/links/multi.rs`.
    pub multi_links: bool,
    /// Whether packets of netdevs without a parent device (veth, tun, lo) are counted, each on a
    /// row of its own (`--netdev all`); the environment never sets it.
    pub virtual_netdevs: bool,
    /// Whether the kernel's own DMA and IOMMU trace events are counted beside the probes
    /// (`record --cross-check`, `diagnose`); the environment never sets it.
    pub cross_check: bool,
    /// Whether each timed program gets an understudy (`IOMMUTOP_UNDERSTUDIES`): `auto`, the
    /// default, where the kernel preempts tasks inside programs (`loader/src/calibration/understudy.rs`).
    pub understudies: Understudies,
}

/// `IOMMUTOP_UNDERSTUDIES`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Understudies {
    /// Where the kernel can preempt a task inside a BPF program (PREEMPT_RT, full or lazy
    /// preemption), or its preemption model cannot be read.
    Auto,
    On,
    Off,
}

impl ProbeSettings {
    /// The settings the environment gives, each unset one at its default.
    pub fn from_env() -> Result<ProbeSettings, BadSetting> {
        Ok(ProbeSettings {
            stack_interval_ns: setting("IOMMUTOP_STACK_INTERVAL_MS", stack_interval_setting)?
                .unwrap_or(DEFAULT_STACK_INTERVAL_MS * 1_000_000),
            task_slot_mask: setting("IOMMUTOP_TASK_SLOTS", task_slots_setting)?
                .unwrap_or(IOMMUTOP_TASK_SLOTS - 1),
            stats_rows: setting("IOMMUTOP_STATS_ROWS", rows_setting)?
                .unwrap_or_else(stats_capacity),
            row_hints: setting("IOMMUTOP_ROW_HINTS", row_hints_setting)?
                .unwrap_or(1 << IOMMUTOP_ROW_HINT_BITS),
            kernel_btf: std::env::var("IOMMUTOP_KERNEL_BTF")
                .unwrap_or_else(|_| DEFAULT_KERNEL_BTF.into()),
            multi_links: setting("IOMMUTOP_LINKS", links_setting)?.unwrap_or(true),
            virtual_netdevs: false,
            cross_check: false,
            understudies: setting("IOMMUTOP_UNDERSTUDIES", understudies_setting)?
                .unwrap_or(Understudies::Auto),
        })
    }
}

/// Whether every aya error is printed whole, verifier log included, on stderr
/// (`IOMMUTOP_DEBUG_VERIFIER` set), read once for the process: the error text is made where
/// no settings are at hand (the calibration and selftest objects too).
pub fn debug_verifier() -> bool {
    static SET: OnceLock<bool> = OnceLock::new();
    *SET.get_or_init(|| std::env::var_os("IOMMUTOP_DEBUG_VERIFIER").is_some())
}

/// The environment variable `name` as `parse` reads it, `None` when it is unset; a value `parse`
/// refuses is a usage error (its message names the variable and what it takes).
fn setting<T>(
    name: &str,
    parse: impl FnOnce(&str) -> Result<T, BadSetting>,
) -> Result<Option<T>, BadSetting> {
    std::env::var(name)
        .ok()
        .map(|value| parse(&value))
        .transpose()
}

fn stack_interval_setting(value: &str) -> Result<u64, BadSetting> {
    value
        .parse::<u64>()
        .ok()
        .and_then(|ms| ms.checked_mul(1_000_000))
        .ok_or_else(|| {
            BadSetting::new(
                "IOMMUTOP_STACK_INTERVAL_MS",
                value,
                "milliseconds between call-path samples per CPU (0 turns them off)",
            )
        })
}

fn task_slots_setting(value: &str) -> Result<u32, BadSetting> {
    match value.parse::<u32>() {
        Ok(slots) if slots.is_power_of_two() && slots <= IOMMUTOP_TASK_SLOTS => Ok(slots - 1),
        _ => Err(BadSetting::new(
            "IOMMUTOP_TASK_SLOTS",
            value,
            format!("a power of two from 1 to {IOMMUTOP_TASK_SLOTS}"),
        )),
    }
}

fn row_hints_setting(value: &str) -> Result<u32, BadSetting> {
    let most = 1u32 << IOMMUTOP_ROW_HINT_BITS;
    match value.parse::<u32>() {
        Ok(hints) if (1..=most).contains(&hints) => Ok(hints),
        _ => Err(BadSetting::new(
            "IOMMUTOP_ROW_HINTS",
            value,
            format!("a number of hints from 1 to {most}"),
        )),
    }
}

fn links_setting(value: &str) -> Result<bool, BadSetting> {
    match value {
        "multi" => Ok(true),
        "per-function" => Ok(false),
        _ => Err(BadSetting::new(
            "IOMMUTOP_LINKS",
            value,
            "multi (one program for many functions, where the kernel links it so) or per-function",
        )),
    }
}

fn understudies_setting(value: &str) -> Result<Understudies, BadSetting> {
    match value {
        "auto" => Ok(Understudies::Auto),
        "on" => Ok(Understudies::On),
        "off" => Ok(Understudies::Off),
        _ => Err(BadSetting::new(
            "IOMMUTOP_UNDERSTUDIES",
            value,
            "auto (where the kernel preempts tasks inside BPF programs), on or off",
        )),
    }
}

/// `IOMMUTOP_STATS_ROWS`, which sets the number instead: the error names the setting and the
/// values it takes.
fn rows_setting(value: &str) -> Result<u32, BadSetting> {
    match value.parse::<u32>() {
        Ok(rows) if (1..=IOMMUTOP_MAX_DEVICES).contains(&rows) => Ok(rows),
        _ => Err(BadSetting::new(
            "IOMMUTOP_STATS_ROWS",
            value,
            format!("a number of rows from 1 to {IOMMUTOP_MAX_DEVICES}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn understudies_are_auto_on_or_off() {
        assert_eq!(understudies_setting("auto"), Ok(Understudies::Auto));
        assert_eq!(understudies_setting("on"), Ok(Understudies::On));
        assert_eq!(understudies_setting("off"), Ok(Understudies::Off));
        for bad in ["", "yes", "On", "1"] {
            let error = understudies_setting(bad).expect_err(bad).to_string();
            assert!(error.starts_with(&format!("IOMMUTOP_UNDERSTUDIES={bad}: ")));
            assert!(!error.contains('\n'), "one line: {error}");
        }
    }

    #[test]
    fn links_are_multi_or_per_function() {
        assert_eq!(links_setting("multi"), Ok(true));
        assert_eq!(links_setting("per-function"), Ok(false));
        for bad in ["", "single", "Multi", "per_function"] {
            let error = links_setting(bad).expect_err(bad).to_string();
            assert!(error.starts_with(&format!("IOMMUTOP_LINKS={bad}: ")));
            assert!(!error.contains('\n'), "one line: {error}");
        }
    }

    #[test]
    fn task_slots_take_powers_of_two_up_to_the_map_as_a_mask() {
        assert_eq!(task_slots_setting("1"), Ok(0));
        assert_eq!(task_slots_setting("64"), Ok(63));
        assert_eq!(
            task_slots_setting(&IOMMUTOP_TASK_SLOTS.to_string()),
            Ok(IOMMUTOP_TASK_SLOTS - 1)
        );
        for bad in ["0", "3", "2048", "-1", "all", ""] {
            let error = task_slots_setting(bad).expect_err(bad).to_string();
            assert!(error.starts_with(&format!("IOMMUTOP_TASK_SLOTS={bad}: ")));
            assert!(!error.contains('\n'), "one line: {error}");
        }
    }

    #[test]
    fn row_hints_take_1_to_the_table_s_size() {
        let most = 1u32 << IOMMUTOP_ROW_HINT_BITS;
        assert_eq!(row_hints_setting("1"), Ok(1));
        assert_eq!(row_hints_setting(&most.to_string()), Ok(most));
        for bad in ["0", "1025", "-1", "lots", ""] {
            let error = row_hints_setting(bad).expect_err(bad).to_string();
            assert!(error.starts_with(&format!("IOMMUTOP_ROW_HINTS={bad}: ")));
            assert!(!error.contains('\n'), "one line: {error}");
        }
    }

    #[test]
    fn stack_interval_is_whole_milliseconds_in_ns() {
        assert_eq!(stack_interval_setting("0"), Ok(0));
        assert_eq!(stack_interval_setting("20"), Ok(20_000_000));
        for bad in ["-1", "2.5", "20ms", "", "18446744073709551615"] {
            let error = stack_interval_setting(bad).expect_err(bad).to_string();
            assert!(error.starts_with(&format!("IOMMUTOP_STACK_INTERVAL_MS={bad}: ")));
            assert!(!error.contains('\n'), "one line: {error}");
        }
    }

    #[test]
    fn rows_setting_takes_1_to_the_abi_maximum_and_names_itself_otherwise() {
        assert_eq!(rows_setting("1"), Ok(1));
        assert_eq!(
            rows_setting(&IOMMUTOP_MAX_DEVICES.to_string()),
            Ok(IOMMUTOP_MAX_DEVICES)
        );
        for bad in ["0", "257", "-1", "many", ""] {
            let error = rows_setting(bad).expect_err(bad).to_string();
            assert!(
                error.starts_with(&format!("IOMMUTOP_STATS_ROWS={bad}: ")),
                "{error}"
            );
            assert!(!error.contains('\n'), "one line: {error}");
        }
    }
}
