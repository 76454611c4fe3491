//! Credit flow control per (sender, receiver) pair, counted in fragments.
//!
//! FM's rule (HPVM §3): a receiver guarantees memory for every fragment a
//! sender may have in flight; each fragment, full or partial, costs one
//! credit; a sender without credit must make progress itself (extract) until
//! credit returns. Here:
//!
//! - [`CreditWindow`] lives with the sender: `sent` fragments so far and the
//!   latest `returned` count it has seen; `window - (sent - returned)` is its
//!   credit. It re-reads the receiver's count only when it runs out, so the
//!   sender's hot path touches no shared line.
//! - [`CreditReturn`] lives with the receiver: it counts released fragments
//!   and publishes the total, batched, through a [`CreditLine`] (shm: a
//!   single-writer counter in the mapping; rings: the value travels in a
//!   trailer or a credit frame).
//!
//! Invariants (checked by the loom model): the sender never has more than
//! `window` fragments unreleased, the published count never passes the
//! released count, and a receiver that keeps releasing always lets a waiting
//! sender continue.

use crate::sync::mutant::{self, Mutant};
use crate::sync::{AtomicU64, Ordering};

/// Sender-side credit state for one destination.
#[derive(Debug, Clone)]
pub struct CreditWindow {
    window: u64,
    sent: u64,
    returned: u64,
}

impl CreditWindow {
    /// A window of `window` fragments (at least 1).
    ///
    /// # Panics
    /// If `window` is 0.
    pub fn new(window: u32) -> Self {
        assert!(window > 0, "credit window must be at least 1");
        CreditWindow {
            window: u64::from(window),
            sent: 0,
            returned: 0,
        }
    }

    /// Credits available with what is known now.
    #[inline]
    pub fn available(&self) -> u64 {
        self.window - (self.sent - self.returned)
    }

    /// Fragments sent so far (also the next dedicated-queue position).
    #[inline]
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// The receiver's released count as last accepted by
    /// [`update`](Self::update).
    #[inline]
    pub fn returned(&self) -> u64 {
        self.returned
    }

    /// Take one credit if one is known to be available.
    #[inline]
    pub fn try_take(&mut self) -> bool {
        // (MUTANT CreditTakeOffByOne, loom only: one credit too many.)
        let slack = u64::from(mutant::on(Mutant::CreditTakeOffByOne));
        if self.sent - self.returned < self.window + slack {
            self.sent += 1;
            true
        } else {
            false
        }
    }

    /// Record the receiver's released count. Counts that go backwards or
    /// past what was sent are ignored (a bad peer cannot mint credit).
    #[inline]
    pub fn update(&mut self, returned: u64) -> bool {
        if returned > self.returned && returned <= self.sent {
            self.returned = returned;
            true
        } else {
            false
        }
    }
}

/// Receiver-side credit state for one source.
#[derive(Debug, Clone, Default)]
pub struct CreditReturn {
    released: u64,
    published: u64,
}

impl CreditReturn {
    /// Count one released fragment.
    #[inline]
    pub fn release(&mut self) {
        self.released += 1;
    }

    /// Released fragments not yet published.
    #[inline]
    pub fn unpublished(&self) -> u64 {
        self.released - self.published
    }

    /// Total released so far.
    #[inline]
    pub fn released(&self) -> u64 {
        self.released
    }

    /// Mark everything released as published and return the total to send.
    #[inline]
    pub fn take_publish(&mut self) -> Option<u64> {
        if self.released == self.published {
            None
        } else {
            let before = self.published;
            self.published = self.released;
            if mutant::on(Mutant::CreditPublishStale) {
                // MUTANT CreditPublishStale (loom only): the old total.
                return Some(before);
            }
            Some(self.released)
        }
    }
}

/// A single-writer counter through which a receiver returns credit to one
/// sender over shared memory. One cache line, so pairs do not false-share.
// Shared layout: a fixed `repr(C, align(64))`, not crossbeam's `CachePadded`
// (128 on x86_64, platform dependent), which the segment's offsets and
// every process mapping it must agree on (docs/architecture.md).
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct CreditLine {
    returned: AtomicU64,
}

impl CreditLine {
    /// A line with nothing returned.
    pub fn new() -> Self {
        CreditLine {
            returned: AtomicU64::new(0),
        }
    }

    /// Receiver: publish the released total.
    #[inline]
    pub fn publish(&self, released: u64) {
        // SYNC POINT credit-return (release side): pairs with the Acquire in
        // `read`; the receiver's reads of the released slots and frames
        // happen before the sender reuses them.
        self.returned.store(released, Ordering::Release);
    }

    /// Sender: the latest released total.
    #[inline]
    pub fn read(&self) -> u64 {
        // SYNC POINT credit-return (acquire side): pairs with `publish`.
        // (MUTANT CreditReadRelaxed, loom only: Relaxed.)
        let order = mutant::weaken(Mutant::CreditReadRelaxed, Ordering::Acquire);
        self.returned.load(order)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_bounds_in_flight_and_refills() {
        let mut w = CreditWindow::new(2);
        assert!(w.try_take());
        assert!(w.try_take());
        assert!(!w.try_take());
        assert!(!w.update(3), "cannot return more than was sent");
        assert!(w.update(1));
        assert!(w.try_take());
        assert!(!w.try_take());
        assert!(!w.update(0), "counts never go backwards");
    }

    #[test]
    fn return_publishes_only_news() {
        let mut r = CreditReturn::default();
        assert_eq!(r.take_publish(), None);
        r.release();
        r.release();
        assert_eq!(r.unpublished(), 2);
        assert_eq!(r.take_publish(), Some(2));
        assert_eq!(r.take_publish(), None);
    }
}
