//! [`Landed`]: the safe mode's record of which ring slots the wire
//! reported landed ([`super::wire::Event::Landed`]) and the poll has not
//! taken yet, with their count, so that an empty poll tells "nothing
//! reported" from one load instead of looking at every peer's head slot.
//! Single-threaded (the rank's own poll): plain cells.

use std::cell::Cell;

/// Per peer and slot, whether the write of the slot's next fragment was
/// reported landed; and how many such reports wait.
#[derive(Debug, Default)]
pub(super) struct Landed {
    slots: usize,
    /// Peer `k`'s slot `s` is `flags[k * slots + s]`.
    flags: Vec<Cell<bool>>,
    /// How many of `flags` are set.
    unread: Cell<usize>,
}

impl Landed {
    /// No report yet, for `peers` rings of `slots` slots.
    pub(super) fn new(peers: usize, slots: u32) -> Landed {
        let slots = slots as usize;
        Landed {
            slots,
            flags: (0..peers * slots).map(|_| Cell::new(false)).collect(),
            unread: Cell::new(0),
        }
    }

    fn flag(&self, peer: usize, slot: u32) -> Option<&Cell<bool>> {
        let s = slot as usize;
        if s >= self.slots {
            return None;
        }
        self.flags
            .get(peer.checked_mul(self.slots)?.checked_add(s)?)
    }

    /// The wire reported peer `peer`'s write of `slot` landed (a peer or
    /// slot out of range is ignored: the report names nothing we keep).
    #[inline]
    pub(super) fn mark(&self, peer: usize, slot: u32) {
        if let Some(f) = self.flag(peer, slot) {
            if !f.replace(true) {
                self.unread.set(self.unread.get() + 1);
            }
        }
    }

    /// Whether peer `peer`'s `slot` was reported landed.
    #[inline]
    pub(super) fn is_set(&self, peer: usize, slot: u32) -> bool {
        self.flag(peer, slot).is_some_and(Cell::get)
    }

    /// The fragment of peer `peer`'s `slot` was taken: the report is used.
    #[inline]
    pub(super) fn clear(&self, peer: usize, slot: u32) {
        if let Some(f) = self.flag(peer, slot) {
            if f.replace(false) {
                self.unread.set(self.unread.get() - 1);
            }
        }
    }

    /// Whether any report waits (false: no ring can be ready in safe mode).
    #[inline(always)]
    pub(super) fn any(&self) -> bool {
        self.unread.get() != 0
    }
}

#[cfg(test)]
mod tests {
    use super::Landed;

    #[test]
    fn counts_reports_until_taken() {
        let l = Landed::new(3, 4);
        assert!(!l.any());
        l.mark(2, 3);
        l.mark(2, 3); // the same report twice counts once
        l.mark(0, 1);
        assert!(l.any());
        assert!(l.is_set(2, 3) && l.is_set(0, 1) && !l.is_set(1, 1));
        l.clear(2, 3);
        assert!(l.any() && !l.is_set(2, 3));
        l.clear(2, 3); // taken twice: no underflow
        l.clear(1, 0); // never reported
        assert!(l.any());
        l.clear(0, 1);
        assert!(!l.any());
    }

    #[test]
    fn ignores_reports_out_of_range() {
        let l = Landed::new(2, 4);
        l.mark(2, 0);
        l.mark(0, 4);
        l.mark(usize::MAX, 1);
        assert!(!l.any());
        assert!(!l.is_set(2, 0) && !l.is_set(0, 4));
    }
}
