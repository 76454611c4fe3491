//! The free list of a shared receive queue: HPVM §5, send steps 2–3.
//!
//! "Fetch-and-increment the head of the receiver's free list to consume a
//! message frame. Test-and-set an in-use flag in the frame. If the fetched
//! value is non-zero, go to step 2." Credits guarantee a free frame exists
//! for a sender that has credit, so the walk is bounded by the frame count
//! (O(1) under fair scheduling).

use super::FrameStore;
use crate::sync::mutant::{self, Mutant};
use crate::sync::{self, AtomicU64, Ordering};

/// The free list of one receive queue, over some frame storage.
#[derive(Debug)]
pub struct FreeList<'a, F: FrameStore> {
    head: &'a AtomicU64,
    frames: &'a F,
    mask: u64,
}

impl<'a, F: FrameStore> FreeList<'a, F> {
    /// A free list whose head counter is `head`.
    ///
    /// # Panics
    /// If the frame count is not a power of two.
    pub fn new(head: &'a AtomicU64, frames: &'a F) -> Self {
        let n = frames.count();
        assert!(n.is_power_of_two(), "frame count {n} is not a power of two");
        FreeList {
            head,
            frames,
            mask: u64::from(n) - 1,
        }
    }

    /// Claim a free frame and return its index.
    ///
    /// The caller must hold a credit for this queue: that is what bounds the
    /// walk. Without one this can spin until some frame is released.
    pub fn claim(&self) -> u32 {
        let mut walked = 0u64;
        loop {
            // Take the next frame index. Relaxed: the index only names a
            // candidate; ownership is decided by the in-use flag below.
            let frame = (self.head.fetch_add(1, Ordering::Relaxed) & self.mask) as u32;
            // Test-and-set its in-use flag; a frame still held by a reader is
            // skipped (seed step 3).
            // SYNC POINT frame-release (acquire side): pairs with the Release
            // store in `release`, so the receiver's reads of the frame's last
            // contents happen before our writes.
            let in_use = self.frames.in_use(frame);
            let was = if mutant::on(Mutant::FreeListPlainTas) {
                // MUTANT FreeListPlainTas (loom only): test, then set.
                let was = in_use.load(Ordering::Acquire);
                if was == 0 {
                    in_use.store(1, Ordering::Relaxed);
                }
                was
            } else {
                // SYNC POINT frame-release (acquire side), as above.
                sync::test_and_set(in_use, Ordering::Acquire)
            };
            if was == 0 {
                return frame;
            }
            walked += 1;
            if walked > self.mask {
                // A whole lap without a free frame: some reader is slow.
                walked = 0;
                sync::yield_now();
            } else {
                sync::spin_loop();
            }
        }
    }

    /// Give `frame` back once its contents have been read.
    pub fn release(&self, frame: u32) {
        // SYNC POINT frame-release (release side): pairs with the Acquire
        // test-and-set in `claim`; our reads of the frame happen before its reuse.
        // (MUTANT FrameReleaseRelaxed, loom only: Relaxed.)
        let order = mutant::weaken(Mutant::FrameReleaseRelaxed, Ordering::Release);
        self.frames.in_use(frame).store(0, order);
    }
}
