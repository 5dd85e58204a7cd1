//! Whether the running kernel preempts a task inside a BPF program: where it does (PREEMPT_RT, and
//! full or lazy preemption), a trampoline program that a task was switched out of holds its place
//! on that CPU, and the kernel skips it for every call made there until the task runs again; the
//! timed programs then get understudies ([`super::understudy`]). Read from the kernel's config
//! and, where the model is chosen at boot (PREEMPT_DYNAMIC), its command line's `preempt=`.

use iommutop_model::facts::cmdline_params;

/// The kernel's preemption model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Preemption {
    /// No preemption in the kernel (PREEMPT_NONE).
    None,
    /// Only at the kernel's explicit points (PREEMPT_VOLUNTARY).
    Voluntary,
    /// Anywhere preemption is enabled (PREEMPT, `preempt=full`).
    Full,
    /// Lazily, at the next tick for ordinary tasks (PREEMPT_LAZY, `preempt=lazy`).
    Lazy,
    /// PREEMPT_RT: interrupts in threads, spinlocks that sleep, preemption nearly everywhere.
    Rt,
}

impl Preemption {
    /// The model of the kernel whose config is `config` (the text of /proc/config.gz or
    /// /boot/config-RELEASE) and whose command line is `cmdline`; None when the config does not
    /// say.
    pub(crate) fn of_kernel(config: &str, cmdline: &str) -> Option<Preemption> {
        let set = |option: &str| {
            config
                .lines()
                .any(|line| line.trim() == format!("CONFIG_{option}=y"))
        };
        if set("PREEMPT_RT") {
            return Some(Preemption::Rt);
        }
        if set("PREEMPT_DYNAMIC") {
            let chosen = cmdline_params(cmdline)
                .into_iter()
                .rev()
                .find_map(|(key, value)| (key == "preempt").then_some(value));
            match chosen {
                Some("none") => return Some(Preemption::None),
                Some("voluntary") => return Some(Preemption::Voluntary),
                Some("full") => return Some(Preemption::Full),
                Some("lazy") => return Some(Preemption::Lazy),
                _ => {}
            }
        }
        [
            ("PREEMPT_LAZY", Preemption::Lazy),
            ("PREEMPT", Preemption::Full),
            ("PREEMPT_VOLUNTARY", Preemption::Voluntary),
            ("PREEMPT_NONE", Preemption::None),
        ]
        .into_iter()
        .find_map(|(option, model)| set(option).then_some(model))
    }

    /// Whether a task can be switched out inside a BPF trampoline program.
    pub(crate) fn inside_programs(self) -> bool {
        matches!(self, Preemption::Full | Preemption::Lazy | Preemption::Rt)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Preemption::None => "none",
            Preemption::Voluntary => "voluntary",
            Preemption::Full => "full",
            Preemption::Lazy => "lazy",
            Preemption::Rt => "PREEMPT_RT",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DYNAMIC_VOLUNTARY: &str =
        "CONFIG_PREEMPT_BUILD=y\nCONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_PREEMPT_DYNAMIC=y\n";
    const DYNAMIC_LAZY: &str = "CONFIG_PREEMPT_LAZY=y\nCONFIG_PREEMPT_DYNAMIC=y\n";
    const RT: &str = "CONFIG_PREEMPT_LAZY=y\nCONFIG_PREEMPT_RT=y\nCONFIG_PREEMPT_DYNAMIC=y\n";

    #[test]
    fn the_configured_model_holds_unless_the_command_line_chooses_one() {
        let of = Preemption::of_kernel;
        assert_eq!(of(DYNAMIC_VOLUNTARY, "quiet"), Some(Preemption::Voluntary));
        assert_eq!(
            of(DYNAMIC_VOLUNTARY, "preempt=full"),
            Some(Preemption::Full)
        );
        assert_eq!(of(DYNAMIC_LAZY, ""), Some(Preemption::Lazy));
        assert_eq!(of(DYNAMIC_LAZY, "preempt=none"), Some(Preemption::None));
        assert_eq!(of(RT, "preempt=none"), Some(Preemption::Rt), "RT is built");
        assert_eq!(
            of("CONFIG_PREEMPT_VOLUNTARY=y\n", "preempt=full"),
            Some(Preemption::Voluntary),
            "without PREEMPT_DYNAMIC the command line cannot change it"
        );
        assert_eq!(of("# CONFIG_PREEMPT is not set\n", ""), None);
    }

    #[test]
    fn tasks_are_preempted_inside_programs_under_full_lazy_and_rt() {
        let inside: Vec<bool> = [
            Preemption::None,
            Preemption::Voluntary,
            Preemption::Full,
            Preemption::Lazy,
            Preemption::Rt,
        ]
        .map(Preemption::inside_programs)
        .to_vec();
        assert_eq!(inside, [false, false, true, true, true]);
    }
}
