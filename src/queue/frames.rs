//! Storage of frames, abstracted so the free list and the loom models share
//! one implementation of the claim/release protocol.

use crate::sync::AtomicU32;

/// Where frames live: a shared mapping in production, a `Vec` under loom.
///
/// A frame is `capacity()` payload bytes plus an in-use flag that the free
/// list test-and-sets. Byte access goes through `write`/`read` so that loom
/// can see every access and report a race.
pub trait FrameStore {
    /// Number of frames (a power of two).
    fn count(&self) -> u32;
    /// Payload bytes per frame.
    fn capacity(&self) -> usize;
    /// The in-use flag of `frame` (0 free, 1 claimed).
    fn in_use(&self, frame: u32) -> &AtomicU32;
    /// Copy `src` into `frame` at byte `offset`.
    ///
    /// # Panics
    /// If `frame >= count()` or the range passes `capacity()`.
    fn write(&self, frame: u32, offset: usize, src: &[u8]);
    /// Copy bytes of `frame` from `offset` into `dst`.
    ///
    /// # Panics
    /// If `frame >= count()` or the range passes `capacity()`.
    fn read(&self, frame: u32, offset: usize, dst: &mut [u8]);
}
