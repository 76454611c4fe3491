//! A [`FrameStore`] on ordinary memory whose every byte access loom sees.

use fastmsg::internal::queue::FrameStore;
use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicU32;

/// One frame: its in-use flag and its bytes behind a loom cell.
#[derive(Debug)]
struct Frame<const N: usize> {
    in_use: AtomicU32,
    bytes: UnsafeCell<[u8; N]>,
}

/// `count` frames of `N` bytes. Loom reports any two accesses to one
/// frame's bytes that are not ordered by happens-before (a write with any
/// other access), which is exactly "a frame used by two owners at once".
#[derive(Debug)]
pub struct LoomFrames<const N: usize> {
    frames: Vec<Frame<N>>,
}

impl<const N: usize> LoomFrames<N> {
    /// `count` free, zeroed frames.
    pub fn new(count: u32) -> Self {
        LoomFrames {
            frames: (0..count)
                .map(|_| Frame {
                    in_use: AtomicU32::new(0),
                    bytes: UnsafeCell::new([0; N]),
                })
                .collect(),
        }
    }
}

impl<const N: usize> FrameStore for LoomFrames<N> {
    fn count(&self) -> u32 {
        self.frames.len() as u32
    }

    fn capacity(&self) -> usize {
        N
    }

    fn in_use(&self, frame: u32) -> &AtomicU32 {
        &self.frames[frame as usize].in_use
    }

    fn write(&self, frame: u32, offset: usize, src: &[u8]) {
        self.frames[frame as usize].bytes.with_mut(|p| {
            // SAFETY: `p` points to a live `[u8; N]`; loom checks that no
            // other access to it is concurrent (that is what is modelled).
            let bytes = unsafe { &mut *p };
            bytes[offset..offset + src.len()].copy_from_slice(src);
        });
    }

    fn read(&self, frame: u32, offset: usize, dst: &mut [u8]) {
        self.frames[frame as usize].bytes.with(|p| {
            // SAFETY: as in `write`; loom reports a concurrent writer.
            let bytes = unsafe { &*p };
            dst.copy_from_slice(&bytes[offset..offset + dst.len()]);
        });
    }
}
