//! The data pattern of verified runs: every 8-byte word of logical block `lba` is a function of
//! the seed, the LBA and the word's index, so a read-back can check any block on its own and a
//! block left from another seed or never written fails.

use crate::rng::mix;

/// The word at `index` of block `lba`.
pub fn pattern_word(seed: u64, lba: u64, index: u64) -> u64 {
    mix(mix(seed ^ 0x5a5a_a5a5_0f0f_f0f0) ^ lba.rotate_left(20) ^ index)
}

/// Fills `buf` (whole blocks of `lba_size` bytes starting at `slba`) with the pattern.
pub fn fill(buf: &mut [u8], slba: u64, lba_size: u32, seed: u64) {
    let lba_size = lba_size as usize;
    for (b, block) in buf.chunks_mut(lba_size).enumerate() {
        let lba = slba + b as u64;
        for (w, word) in block.chunks_exact_mut(8).enumerate() {
            word.copy_from_slice(&pattern_word(seed, lba, w as u64).to_le_bytes());
        }
    }
}

/// A block that does not hold the pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    pub lba: u64,
    /// Byte offset inside the block.
    pub offset: u64,
    pub expected: u64,
    pub found: u64,
}

/// Checks every block in `buf`; returns the number of bad blocks and the first mismatch.
pub fn check(buf: &[u8], slba: u64, lba_size: u32, seed: u64) -> (u64, Option<Mismatch>) {
    let lba_size = lba_size as usize;
    let mut bad = 0;
    let mut first = None;
    for (b, block) in buf.chunks(lba_size).enumerate() {
        let lba = slba + b as u64;
        for (w, word) in block.chunks_exact(8).enumerate() {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(word);
            let found = u64::from_le_bytes(bytes);
            let expected = pattern_word(seed, lba, w as u64);
            if found != expected {
                bad += 1;
                first.get_or_insert(Mismatch {
                    lba,
                    offset: 8 * w as u64,
                    expected,
                    found,
                });
                break;
            }
        }
    }
    (bad, first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filled_buffer_checks_clean() {
        let mut buf = vec![0u8; 8192];
        fill(&mut buf, 100, 512, 42);
        assert_eq!(check(&buf, 100, 512, 42), (0, None));
    }

    #[test]
    fn wrong_lba_seed_or_zeros_are_caught() {
        let mut buf = vec![0u8; 4096];
        fill(&mut buf, 100, 512, 42);
        assert_eq!(check(&buf, 101, 512, 42).0, 8, "shifted by one block");
        assert_eq!(check(&buf, 100, 512, 43).0, 8, "another seed");
        let (bad, first) = check(&vec![0u8; 4096], 7, 4096, 42);
        assert_eq!(bad, 1);
        let m = first.unwrap();
        assert_eq!((m.lba, m.offset, m.found), (7, 0, 0));
        buf[600] ^= 1; // one bit in block 101, word 11
        let (bad, first) = check(&buf, 100, 512, 42);
        assert_eq!(bad, 1);
        assert_eq!((first.unwrap().lba, first.unwrap().offset), (101, 88));
    }
}
