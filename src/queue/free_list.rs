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

/// Why a claim took no frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimStalled {
    /// A frame's in-use flag holds a value the protocol never writes.
    Corrupt {
        /// The frame.
        frame: u32,
        /// The flag found.
        flag: u32,
    },
    /// The caller's `give_up` said to stop walking (the consumer is gone).
    GaveUp,
}

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
    /// walk while the consumer releases frames. The walk asks `give_up`
    /// after every lap without a free frame (a consumer that holds every
    /// frame may be gone).
    ///
    /// # Errors
    /// [`ClaimStalled::Corrupt`] at once for an in-use flag that is
    /// neither 0 nor 1 (written by something outside the protocol);
    /// [`ClaimStalled::GaveUp`] when `give_up` says so. No frame is taken.
    #[inline]
    pub fn claim(&self, give_up: impl FnMut() -> bool) -> Result<u32, ClaimStalled> {
        // The usual case inline: the next frame is free.
        let (frame, was) = self.try_next();
        if was == 0 {
            return Ok(frame);
        }
        self.claim_walk(frame, was, give_up)
    }

    /// Take the next frame index and test-and-set its in-use flag: the
    /// index, and the flag's previous value (0: the frame is ours).
    #[inline(always)]
    fn try_next(&self) -> (u32, u32) {
        // Take the next frame index. Relaxed: the index only names a
        // candidate; ownership is decided by the in-use flag below.
        let frame = (self.head.fetch_add(1, Ordering::Relaxed) & self.mask) as u32;
        // Test-and-set its in-use flag; a frame still held by a reader is
        // skipped (seed step 3).
        let in_use = self.frames.in_use(frame);
        let was = if mutant::on(Mutant::FreeListPlainTas) {
            // MUTANT FreeListPlainTas (loom only): test, then set.
            // SYNC POINT frame-release (acquire side), as below.
            let was = in_use.load(Ordering::Acquire);
            if was == 0 {
                in_use.store(1, Ordering::Relaxed);
            }
            was
        } else {
            // SYNC POINT frame-release (acquire side): pairs with the
            // Release store in `release`, so the receiver's reads of the
            // frame's last contents happen before our writes.
            sync::test_and_set(in_use, Ordering::Acquire)
        };
        (frame, was)
    }

    /// The walk past frames in use (out of line: the usual claim takes the
    /// first frame it looks at). `frame` was found with flag `was`.
    #[cold]
    #[inline(never)]
    fn claim_walk(
        &self,
        mut frame: u32,
        mut was: u32,
        mut give_up: impl FnMut() -> bool,
    ) -> Result<u32, ClaimStalled> {
        let mut walked = 0u64;
        loop {
            // Held (1), or a value only something outside the protocol
            // writes: an error, not a frame skipped for ever.
            if was != 1 {
                return Err(ClaimStalled::Corrupt { frame, flag: was });
            }
            walked += 1;
            if walked > self.mask {
                // A whole lap without a free frame: some reader is slow,
                // or gone.
                walked = 0;
                if give_up() {
                    return Err(ClaimStalled::GaveUp);
                }
                sync::yield_now();
            } else {
                sync::spin_loop();
            }
            (frame, was) = self.try_next();
            if was == 0 {
                return Ok(frame);
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::AtomicU32;
    use std::cell::Cell;

    struct Flags(Vec<AtomicU32>);

    impl FrameStore for Flags {
        fn count(&self) -> u32 {
            self.0.len() as u32
        }
        fn capacity(&self) -> usize {
            0
        }
        fn in_use(&self, frame: u32) -> &AtomicU32 {
            &self.0[frame as usize]
        }
        fn write(&self, _: u32, _: usize, _: &[u8]) {}
        fn read(&self, _: u32, _: usize, _: &mut [u8]) {}
    }

    fn flags(values: &[u32]) -> Flags {
        Flags(values.iter().map(|&v| AtomicU32::new(v)).collect())
    }

    #[test]
    fn a_flag_the_protocol_never_writes_is_an_error_at_once() {
        let head = AtomicU64::new(0);
        let f = flags(&[1, 7, 0, 0]);
        let r = FreeList::new(&head, &f).claim(|| panic!("no lap walked"));
        assert_eq!(r, Err(ClaimStalled::Corrupt { frame: 1, flag: 7 }));
    }

    #[test]
    fn a_walk_past_held_frames_takes_the_first_free_one() {
        let head = AtomicU64::new(0);
        let f = flags(&[1, 1, 0, 1]);
        assert_eq!(FreeList::new(&head, &f).claim(|| panic!("no lap")), Ok(2));
        assert_eq!(f.in_use(2).load(Ordering::Relaxed), 1);
    }

    #[test]
    fn every_frame_held_asks_once_a_lap_and_can_give_up() {
        let head = AtomicU64::new(0);
        let f = flags(&[1, 1, 1, 1]);
        let laps = Cell::new(0);
        let r = FreeList::new(&head, &f).claim(|| {
            laps.set(laps.get() + 1);
            laps.get() == 2
        });
        assert_eq!(r, Err(ClaimStalled::GaveUp));
        assert_eq!(laps.get(), 2);
        assert!(
            f.0.iter().all(|x| x.load(Ordering::Relaxed) == 1),
            "nothing taken"
        );
    }
}
