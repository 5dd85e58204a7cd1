//! A small deterministic generator (SplitMix64): the same seed gives the same LBAs, so a
//! read-back visits exactly the blocks a write touched.

#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The generator for thread `index` of a run seeded with `seed`.
    pub fn for_thread(seed: u64, index: u16) -> Rng {
        Rng(mix(seed ^ mix(u64::from(index) + 1)))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// Uniform in `0..n` (`n` > 0), by rejection so there is no modulo bias.
    pub fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            return 0;
        }
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let v = self.next_u64();
            if v < zone {
                return v % n;
            }
        }
    }
}

/// SplitMix64's finalizer: a bijection on u64 with good avalanche.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_threads_differ() {
        let a: Vec<u64> = (0..5)
            .map({
                let mut r = Rng::for_thread(7, 0);
                move |_| r.below(1000)
            })
            .collect();
        let b: Vec<u64> = (0..5)
            .map({
                let mut r = Rng::for_thread(7, 0);
                move |_| r.below(1000)
            })
            .collect();
        let c: Vec<u64> = (0..5)
            .map({
                let mut r = Rng::for_thread(7, 1);
                move |_| r.below(1000)
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn below_covers_the_range() {
        let mut r = Rng::new(1);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            seen[r.below(10) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 800), "{seen:?}");
        assert_eq!(r.below(1), 0);
    }
}
