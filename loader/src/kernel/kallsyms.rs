//! Kernel addresses to function names, from /proc/kallsyms (root sees real addresses).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashSet};
use std::path::Path;

/// One line of /proc/kallsyms: `ADDRESS KIND NAME` and, for a module's symbol, `\t[MODULE]`.
struct Symbol<'a> {
    address: &'a str,
    kind: &'a str,
    name: &'a str,
    in_module: bool,
}

impl Symbol<'_> {
    fn is_code(&self) -> bool {
        matches!(self.kind, "t" | "T" | "w" | "W")
    }
}

/// The symbols of a /proc/kallsyms text. Fields are cut at single separators (the kernel's
/// format), not by a Unicode-aware whitespace split: the text is some 170,000 lines, and the lab
/// runs this under emulation, where the general split took seconds.
fn symbols(text: &str) -> impl Iterator<Item = Symbol<'_>> {
    text.lines().filter_map(|line| {
        let (address, rest) = line.split_once(' ')?;
        let (kind, rest) = rest.split_once(' ')?;
        let (name, in_module) = match rest.split_once('\t') {
            Some((name, _module)) => (name, true),
            None => (rest, false),
        };
        Some(Symbol {
            address,
            kind,
            name,
            in_module,
        })
    })
}

/// What the probes learn from one walk of /proc/kallsyms (some 170,000 lines: under emulation
/// each walk costs a CPU most of a second, and reading the file as much again).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KallsymsFacts {
    /// Which of the functions asked about this kernel has (built-in and loaded modules),
    /// whatever kptr_restrict hides of their addresses: what can be hooked by name.
    pub functions: BTreeSet<String>,
    pub preempt: Option<PreemptCount>,
    /// KASAN is built into the kernel (its `kasan_report`), which doubles a kernel stack.
    pub kasan: bool,
}

impl KallsymsFacts {
    /// One walk of `text`, keeping of the functions only `wanted`: a kernel has some 200,000
    /// symbols, and the probe table asks about a few dozen.
    pub fn scan(text: &str, wanted: &HashSet<&str>) -> KallsymsFacts {
        let mut functions = BTreeSet::new();
        let (mut offsets, mut direct, mut hot, mut kasan) = (None, None, None, false);
        for symbol in symbols(text) {
            if symbol.is_code() && wanted.contains(symbol.name) {
                functions.insert(symbol.name.to_string());
            }
            if symbol.in_module {
                continue;
            }
            let slot = match symbol.name {
                "__per_cpu_offset" => &mut offsets,
                "__preempt_count" => &mut direct,
                "pcpu_hot" => &mut hot,
                "kasan_report" => {
                    kasan = true;
                    continue;
                }
                _ => continue,
            };
            *slot = u64::from_str_radix(symbol.address, 16).ok();
        }
        KallsymsFacts {
            functions,
            preempt: PreemptCount::from_addresses(offsets, direct, hot),
            kasan,
        }
    }

    pub fn has_function(&self, name: &str) -> bool {
        self.functions.contains(name)
    }

    /// A kernel stack's size (THREAD_SIZE; x86-64's interrupt stacks are as large): 16 KiB,
    /// twice that with KASAN, and on arm64 at least a page (64 KiB-page kernels). The tracker
    /// takes two calls further apart than this to lie on different stacks. 16 KiB where
    /// /proc/kallsyms could not be read (`facts` None).
    pub fn kernel_stack_size(facts: Option<&KallsymsFacts>, page_size: u64) -> u64 {
        const WITHOUT_KASAN: u64 = 16 * 1024;
        let kasan = facts.is_some_and(|f| f.kasan);
        let size = WITHOUT_KASAN << u32::from(kasan);
        if cfg!(target_arch = "aarch64") {
            size.max(page_size)
        } else {
            size
        }
    }
}

pub struct Kallsyms {
    /// (start address, name), sorted by address; text symbols only.
    symbols: Vec<(u64, String)>,
}

impl Kallsyms {
    pub fn load(path: &Path) -> std::io::Result<Kallsyms> {
        Ok(Kallsyms::parse(&std::fs::read_to_string(path)?))
    }

    /// Parses `ADDRESS TYPE NAME [MODULE]` lines, keeping code symbols (t, T, w, W).
    pub fn parse(text: &str) -> Kallsyms {
        let mut by_address: Vec<(u64, String)> = symbols(text)
            .filter(Symbol::is_code)
            .filter_map(|symbol| {
                let address = u64::from_str_radix(symbol.address, 16).ok()?;
                (address != 0).then(|| (address, symbol.name.to_string()))
            })
            .collect();
        by_address.sort_unstable_by_key(|(address, _)| *address);
        Kallsyms {
            symbols: by_address,
        }
    }

    /// The function containing `address`, or its hex form when unknown.
    pub fn name_of(&self, address: u64) -> String {
        let index = self.symbols.partition_point(|(start, _)| *start <= address);
        match index.checked_sub(1).and_then(|i| self.symbols.get(i)) {
            Some((_, name)) => name.clone(),
            None => format!("{address:#x}"),
        }
    }
}

/// Where each CPU's preempt count lives, which says whether a CPU runs an interrupt: an
/// interrupt that arrives in user mode runs on the interrupted task's kernel stack, where only
/// the count tells it from the task's own work. Per-CPU symbols: `__preempt_count` (up to 6.1 and
/// from 6.15) or `pcpu_hot` (6.2 to 6.14, which holds it as a field), at an address that
/// `__per_cpu_offset[cpu]` is added to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreemptCount {
    /// The address of `__per_cpu_offset[]`.
    pub per_cpu_offsets: u64,
    /// The symbol's value (an offset in the per-CPU area, or its address since 6.15).
    pub symbol: u64,
    /// The symbol is `pcpu_hot`: the count is its `preempt_count` field.
    pub in_pcpu_hot: bool,
}

impl PreemptCount {
    /// From the addresses of `__per_cpu_offset`, `__preempt_count` and `pcpu_hot` in
    /// /proc/kallsyms; None when kptr_restrict hides them or a symbol is missing.
    fn from_addresses(
        offsets: Option<u64>,
        direct: Option<u64>,
        hot: Option<u64>,
    ) -> Option<PreemptCount> {
        let per_cpu_offsets = offsets.filter(|&a| a != 0)?;
        let (symbol, in_pcpu_hot) = match (direct, hot) {
            (Some(symbol), _) => (symbol, false),
            (None, Some(symbol)) => (symbol, true),
            (None, None) => return None,
        };
        // Zero-based per-CPU symbols may be 0; hidden addresses make every one 0.
        Some(PreemptCount {
            per_cpu_offsets,
            symbol,
            in_pcpu_hot,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preempt_count_of(text: &str) -> Option<PreemptCount> {
        KallsymsFacts::scan(text, &HashSet::new()).preempt
    }

    #[test]
    fn the_preempt_count_is_found_in_each_era() {
        let v5_10 = "0000000000019580 A this_cpu_off\n000000000001fb80 A __preempt_count\n\
                     ffffffff82185940 D __per_cpu_offset\n";
        assert_eq!(
            preempt_count_of(v5_10),
            Some(PreemptCount {
                per_cpu_offsets: 0xffffffff82185940,
                symbol: 0x1fb80,
                in_pcpu_hot: false
            })
        );
        let v6_12 = "00000000000351c0 A pcpu_hot\nffffffff825e4e20 D __per_cpu_offset\n";
        assert_eq!(
            preempt_count_of(v6_12).map(|p| (p.symbol, p.in_pcpu_hot)),
            Some((0x351c0, true))
        );
        let v7_3 = "ffffffff829db0e0 D __per_cpu_offset\nffffffff83f4d028 D __preempt_count\n";
        assert_eq!(
            preempt_count_of(v7_3).map(|p| p.symbol),
            Some(0xffffffff83f4d028)
        );
        let hidden = "0000000000000000 D __per_cpu_offset\n0000000000000000 D __preempt_count\n";
        assert_eq!(preempt_count_of(hidden), None);
        assert_eq!(preempt_count_of("ffffffff81000000 T _stext\n"), None);
    }

    const SAMPLE: &str = "\
ffffffff81000000 T _stext
ffffffff81234560 T dma_map_page_attrs
ffffffff81234700 t __iommu_dma_map
ffffffff81300000 D some_data
ffffffffc0001000 t e1000_xmit_frame\t[e1000e]
";

    #[test]
    fn function_names_are_known_even_with_hidden_addresses() {
        let hidden = SAMPLE.replace("ffffffff", "00000000");
        let wanted = HashSet::from([
            "dma_map_page_attrs",
            "e1000_xmit_frame",
            "some_data",
            "dma_map_phys",
        ]);
        let facts = KallsymsFacts::scan(&hidden, &wanted);
        assert!(facts.has_function("dma_map_page_attrs"));
        assert!(facts.has_function("e1000_xmit_frame"));
        assert!(!facts.has_function("some_data"));
        assert!(!facts.has_function("dma_map_phys"));
    }

    #[test]
    fn addresses_resolve_to_the_enclosing_function() {
        let k = Kallsyms::parse(SAMPLE);
        assert_eq!(k.name_of(0xffffffff81234560), "dma_map_page_attrs");
        assert_eq!(k.name_of(0xffffffff812345ff), "dma_map_page_attrs");
        assert_eq!(k.name_of(0xffffffff81234701), "__iommu_dma_map");
        assert_eq!(k.name_of(0xffffffffc0001010), "e1000_xmit_frame");
    }

    #[test]
    fn addresses_below_every_symbol_stay_hex_and_data_symbols_are_ignored() {
        let k = Kallsyms::parse(SAMPLE);
        assert_eq!(k.name_of(0x1000), "0x1000");
        // some_data is not code: an address inside it still names the code symbol before it.
        assert_eq!(k.name_of(0xffffffff81300010), "__iommu_dma_map");
    }

    #[test]
    fn a_kernel_stack_is_16_kib_and_twice_that_with_kasan() {
        let plain = "ffffffff81000000 T _stext\nffffffff81000100 T do_one_initcall\n";
        let kasan = "ffffffff81000000 T _stext\nffffffff81200000 T kasan_report\n";
        let in_a_module = "ffffffffc0000000 t kasan_report\t[test_kasan]\n";
        let stack = |text: &str| {
            let facts = KallsymsFacts::scan(text, &HashSet::new());
            KallsymsFacts::kernel_stack_size(Some(&facts), 4096)
        };
        assert_eq!(stack(plain), 16 * 1024);
        assert_eq!(stack(kasan), 32 * 1024);
        assert_eq!(stack(in_a_module), 16 * 1024);
        assert_eq!(KallsymsFacts::kernel_stack_size(None, 4096), 16 * 1024);
    }
}
