//! Queue index and phase arithmetic (NVMe Base Specification 1.4c §4.1), kept pure.
//!
//! A submission queue is full when advancing the tail would make it equal to the head (one slot
//! always stays empty, §4.1.2). A completion queue entry is new when its phase tag equals the
//! phase we expect; the expected phase starts at 1 and flips each time the head wraps (§4.6).

/// The host's view of a submission queue: where it writes next (tail) and how far the
/// controller has read (head, from the SQHD field of completions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqIndex {
    entries: u16,
    tail: u16,
    head: u16,
}

impl SqIndex {
    /// `entries` ≥ 2.
    pub fn new(entries: u16) -> SqIndex {
        SqIndex {
            entries: entries.max(2),
            tail: 0,
            head: 0,
        }
    }

    pub fn entries(&self) -> u16 {
        self.entries
    }

    pub fn tail(&self) -> u16 {
        self.tail
    }

    pub fn is_full(&self) -> bool {
        self.next(self.tail) == self.head
    }

    /// Entries written but not yet consumed by the controller.
    pub fn in_flight(&self) -> u16 {
        (self.tail + self.entries - self.head) % self.entries
    }

    fn next(&self, i: u16) -> u16 {
        if i + 1 == self.entries {
            0
        } else {
            i + 1
        }
    }

    /// Claims the slot at the tail and advances it; `None` if the queue is full.
    pub fn push(&mut self) -> Option<u16> {
        if self.is_full() {
            return None;
        }
        let slot = self.tail;
        self.tail = self.next(self.tail);
        Some(slot)
    }

    /// Records the controller's SQ head pointer from a completion (ignored if out of range).
    pub fn set_head(&mut self, head: u16) {
        if head < self.entries {
            self.head = head;
        }
    }
}

/// The host's view of a completion queue: the next entry to look at and the phase that marks
/// it as new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqIndex {
    entries: u16,
    head: u16,
    phase: bool,
}

impl CqIndex {
    pub fn new(entries: u16) -> CqIndex {
        CqIndex {
            entries: entries.max(2),
            head: 0,
            phase: true,
        }
    }

    pub fn head(&self) -> u16 {
        self.head
    }

    /// Whether an entry with this phase tag at the head is new.
    pub fn is_new(&self, phase_tag: bool) -> bool {
        phase_tag == self.phase
    }

    /// Consumes the head entry: advances, flipping the expected phase on wrap.
    pub fn advance(&mut self) {
        self.head += 1;
        if self.head == self.entries {
            self.head = 0;
            self.phase = !self.phase;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_submission_queue_keeps_one_slot_empty() {
        let mut sq = SqIndex::new(4);
        assert_eq!(sq.push(), Some(0));
        assert_eq!(sq.push(), Some(1));
        assert_eq!(sq.push(), Some(2));
        assert!(sq.is_full());
        assert_eq!(sq.push(), None);
        assert_eq!(sq.in_flight(), 3);
        sq.set_head(2);
        assert_eq!(sq.in_flight(), 1);
        assert_eq!(sq.push(), Some(3));
        assert_eq!(sq.tail(), 0, "wraps");
        assert_eq!(sq.push(), Some(0));
        assert!(sq.is_full());
        sq.set_head(99);
        assert_eq!(sq.in_flight(), 3, "an out-of-range head is ignored");
    }

    #[test]
    fn the_completion_phase_flips_on_wrap() {
        let mut cq = CqIndex::new(3);
        // Fresh queue memory is zeroed: phase 0 entries are old.
        assert!(!cq.is_new(false));
        assert!(cq.is_new(true));
        for _ in 0..3 {
            cq.advance();
        }
        assert_eq!(cq.head(), 0);
        assert!(cq.is_new(false), "second pass expects phase 0");
        assert!(!cq.is_new(true), "entries left from the first pass are old");
        for _ in 0..3 {
            cq.advance();
        }
        assert!(cq.is_new(true));
    }

    #[test]
    fn many_wraps_stay_consistent() {
        let mut sq = SqIndex::new(33);
        let mut cq = CqIndex::new(33);
        let mut phase_flips = 0;
        for i in 0..10_000u32 {
            let slot = sq.push().unwrap();
            assert_eq!(u32::from(slot), i % 33);
            let before = cq.is_new(true);
            cq.advance();
            if cq.is_new(true) != before {
                phase_flips += 1;
            }
            sq.set_head(sq.tail());
        }
        assert_eq!(phase_flips, 10_000 / 33);
    }
}
