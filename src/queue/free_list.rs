//! The free list of a shared receive queue: HPVM §5, send steps 2–3.
//!
//! "Fetch-and-increment the head of the receiver's free list to consume a
//! message frame. Test-and-set an in-use flag in the frame. If the fetched
//! value is non-zero, go to step 2." Credits guarantee a free frame exists
//! for a sender that has credit, so the walk is bounded by the frame count
//! (O(1) under fair scheduling).

use super::FrameStore;
#[cfg(not(loom))]
use super::STUCK;
use crate::sync::mutant::{self, Mutant};
use crate::sync::{self, AtomicU64, Ordering};

/// The free list of a queue was found corrupt by [`FreeList::claim`]: a
/// frame's in-use flag holds a value the protocol never writes, or no
/// frame came free for [`STUCK`](super::STUCK) against a credit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FramesCorrupt {
    /// The frame looked at last.
    pub frame: u32,
    /// Its in-use flag (1 after the time-out: held all along).
    pub flag: u32,
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
    /// walk (a free frame exists for it). Without one this can spin until
    /// some frame is released.
    ///
    /// # Errors
    /// [`FramesCorrupt`] (no frame claimed) if an in-use flag holds a
    /// value the protocol never writes (neither 0 nor 1), or if a whole
    /// lap found no free frame for [`STUCK`]: against a credit, only a
    /// process that does not follow the protocol holds every frame that
    /// long.
    #[inline]
    pub fn claim(&self) -> Result<u32, FramesCorrupt> {
        // The usual case inline: the next frame is free.
        let (frame, was) = self.try_next();
        if was == 0 {
            return Ok(frame);
        }
        self.claim_walk(frame, was)
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
        (frame, was)
    }

    /// The walk past frames in use (out of line: the usual claim takes
    /// the first frame it looks at). `frame` was found with flag `was`.
    #[cold]
    #[inline(never)]
    fn claim_walk(&self, mut frame: u32, mut was: u32) -> Result<u32, FramesCorrupt> {
        let mut walked = 0u64;
        #[cfg(not(loom))]
        let mut since: Option<std::time::Instant> = None;
        loop {
            // Held (1), or a value only something outside the protocol
            // writes: an error, not a frame skipped for ever.
            if was != 1 {
                return Err(FramesCorrupt { frame, flag: was });
            }
            walked += 1;
            if walked > self.mask {
                // A whole lap without a free frame: some reader is slow.
                walked = 0;
                #[cfg(not(loom))]
                if since.get_or_insert_with(std::time::Instant::now).elapsed() > STUCK {
                    return Err(FramesCorrupt { frame, flag: was });
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

    /// Flags only: the claim never touches payload bytes.
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
        fn write(&self, _: u32, _: usize, src: &[u8]) {
            assert!(src.is_empty());
        }
        fn read(&self, _: u32, _: usize, dst: &mut [u8]) {
            assert!(dst.is_empty());
        }
    }

    fn flags(values: &[u32]) -> Flags {
        Flags(values.iter().map(|&v| AtomicU32::new(v)).collect())
    }

    #[test]
    fn a_claim_skips_held_frames_and_takes_a_free_one() {
        let (head, f) = (AtomicU64::new(0), flags(&[1, 1, 0, 1]));
        let list = FreeList::new(&head, &f);
        assert_eq!(list.claim(), Ok(2));
        list.release(2);
        assert_eq!(list.claim(), Ok(2), "walks round to the released frame");
    }

    #[test]
    fn a_flag_the_protocol_never_writes_is_an_error_not_a_skip() {
        let (head, f) = (AtomicU64::new(0), flags(&[1, 0xdead, 1, 1]));
        let list = FreeList::new(&head, &f);
        assert_eq!(
            list.claim(),
            Err(FramesCorrupt {
                frame: 1,
                flag: 0xdead
            })
        );
    }

    #[test]
    fn frames_held_for_ever_end_the_claim_after_stuck() {
        // Every frame held and never released: with a credit in hand that
        // only a process outside the protocol can do.
        let (head, f) = (AtomicU64::new(0), flags(&[1; 4]));
        let list = FreeList::new(&head, &f);
        let t = std::time::Instant::now();
        let e = list.claim().expect_err("no frame ever comes free");
        assert_eq!(e.flag, 1);
        assert!(t.elapsed() >= STUCK, "gave up after {:?}", t.elapsed());
    }
}
