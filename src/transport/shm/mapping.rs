//! The segment's mapping, owned jointly by everything that points into it.
//!
//! A [`Mapping`] lives in an `Arc`. The segment holds one clone; every view
//! handed out of it holds another: a [`MapRef`] (one object in the mapping:
//! a doorbell for the waiter and the TCP NIC thread, a lifeline for the
//! watchdog's probe and for the guard of an armed line) or a
//! [`WindowView`] (a rank's one-sided window area, for the engine and for
//! the network transports that place remote puts there). The memory is unmapped when
//! the last of them goes, so no owner has to be dropped before another:
//! correctness never rests on the order of fields or of a transport list.

#![allow(unsafe_code)]

use crate::window::WindowView;
use memmap2::MmapMut;
use std::ptr::NonNull;
use std::sync::Arc;

/// A shared, read-write mapping (the segment file, or anonymous memory in
/// tests), unmapped when the last `Arc` of it is dropped.
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len: usize,
    _map: MmapMut,
}

// SAFETY: the memory is shared with other processes by design; every
// shared part of it is reached only through atomics, process-shared
// mutexes and the queue protocol (see `segment`), never through plain
// references that would assume exclusive access. The `MmapMut` itself is
// `Send` and `Sync`; `base` is its address (stable for its whole life).
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapping")
            .field("base", &self.base)
            .field("len", &self.len)
            .finish()
    }
}

impl Mapping {
    /// Share `map`.
    pub(crate) fn new(mut map: MmapMut) -> Arc<Mapping> {
        let len = map.len();
        // A mapping's address is never null (memmap2 maps at least a byte,
        // a dangling but non-null pointer for an empty map).
        let base = NonNull::new(map.as_mut_ptr()).expect("a mapping has an address");
        Arc::new(Mapping {
            base,
            len,
            _map: map,
        })
    }

    /// `len` bytes of zeroed anonymous memory (tests: memory in the role
    /// of a segment).
    ///
    /// # Errors
    /// The OS error of `mmap`.
    #[cfg(test)]
    pub(crate) fn anon(len: usize) -> std::io::Result<Arc<Mapping>> {
        Ok(Mapping::new(MmapMut::map_anon(len)?))
    }

    /// The first byte.
    #[inline]
    pub(crate) fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// A view of the `T` at byte `off`, keeping the mapping alive.
    ///
    /// # Panics
    /// If the object does not lie inside the mapping or is misaligned.
    ///
    /// # Safety
    /// Whatever bytes other processes may have left there must be a valid
    /// `T` (atomics, process-shared mutexes, plain integers), and `T` must
    /// only be used through shared references (atomics and the like).
    pub(crate) unsafe fn view<T>(self: &Arc<Self>, off: usize) -> MapRef<T> {
        let size = core::mem::size_of::<T>();
        assert!(
            off.checked_add(size).is_some_and(|end| end <= self.len),
            "object at {off} of {size} bytes outside the {}-byte mapping",
            self.len
        );
        let p = self.base().wrapping_add(off);
        assert!(p as usize % core::mem::align_of::<T>() == 0, "misaligned");
        MapRef {
            // Non-null: inside the mapping (asserted above).
            ptr: NonNull::new(p.cast::<T>()).expect("inside the mapping"),
            _map: Arc::clone(self),
        }
    }

    /// The window area of `len` bytes at byte `off` (64-byte aligned),
    /// keeping the mapping alive.
    ///
    /// # Panics
    /// If the area does not lie inside the mapping or is misaligned.
    pub(crate) fn window(self: &Arc<Self>, off: usize, len: u64) -> WindowView {
        assert!(
            (off as u64)
                .checked_add(len)
                .is_some_and(|end| end <= self.len as u64),
            "window area at {off} of {len} bytes outside the {}-byte mapping",
            self.len
        );
        assert!(off % 64 == 0, "window area misaligned");
        let owner: Arc<dyn Send + Sync> = Arc::clone(self) as _;
        // SAFETY: inside the mapping (asserted), 64-byte aligned (a
        // mapping is page aligned), valid while `owner`, a clone of this
        // mapping's `Arc`, lives. Other writers (peers, the NIC) reach the
        // words only with 8-byte atomics (the window protocol).
        unsafe { WindowView::new(owner, self.base().wrapping_add(off), len) }
    }
}

/// One object inside a [`Mapping`], which it keeps mapped.
pub(crate) struct MapRef<T> {
    ptr: NonNull<T>,
    _map: Arc<Mapping>,
}

impl<T> std::ops::Deref for MapRef<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: inside the mapping, aligned and a valid `T` (`view`'s
        // contract); the mapping lives while `_map` does.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T> Clone for MapRef<T> {
    fn clone(&self) -> Self {
        MapRef {
            ptr: self.ptr,
            _map: Arc::clone(&self._map),
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for MapRef<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

// SAFETY: a `MapRef<T>` is a shared reference to a `T` plus an `Arc` of
// `Sync` memory: sending or sharing it is sharing `&T`, sound for `T: Sync`.
unsafe impl<T: Sync> Send for MapRef<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for MapRef<T> {}
