//! [`RingRegion`]: page-aligned, zeroed process memory holding rings (and
//! the words peers write one-sidedly next to them), shared between the
//! application thread, which polls it, and whoever places remote writes
//! into it (the TCP software NIC thread, or an RDMA adapter once the
//! region is registered).
//!
//! A region is its own anonymous private mapping, never written at
//! creation: its pages are zero without being written and become resident
//! only when first written, so a ring costs memory for the slots that
//! traffic has reached, not for its whole size at start (polling an
//! untouched stamp reads the kernel's shared zero page). The mapping is
//! charged to the commit limit as any allocation is (no `MAP_NORESERVE`),
//! so under strict overcommit a region that does not fit fails here, at
//! start. Registering a region for RDMA (verbs) pins, and so populates,
//! it; `docs/scale.md` has the figures.

#![allow(unsafe_code)]

use super::{RingGeometry, RingStore, TrailerBody, STAMP_OFFSET, TRAILER_BYTES};
use crate::sync::AtomicU64;

/// A zeroed, page-aligned block of memory that outlives every view of it.
#[derive(Debug)]
pub struct RingRegion {
    base: *mut u8,
    len: usize,
}

// SAFETY: the region is plain memory; concurrent access follows the ring
// protocol (stamps are atomics, everything else is written before its
// stamp and read after it) or goes through atomics (credit and window
// words), so sharing the pointer between threads is sound.
unsafe impl Send for RingRegion {}
// SAFETY: as above.
unsafe impl Sync for RingRegion {}

impl RingRegion {
    /// `bytes` of zeroed memory (at least one page).
    ///
    /// # Panics
    /// If the allocation fails (as `Vec` would) or `bytes` overflows: for
    /// tests, benches and fuzz targets; the transports use
    /// [`try_zeroed`](Self::try_zeroed) and report the failure.
    pub fn zeroed(bytes: u64) -> RingRegion {
        Self::try_zeroed(bytes)
            .unwrap_or_else(|e| panic!("cannot allocate a ring region of {bytes} bytes: {e}"))
    }

    /// `bytes` of zeroed memory (at least one page).
    ///
    /// # Errors
    /// The mapping failed (the OS's error: out of memory, or an address
    /// space limit such as `ulimit -v`), or the size does not fit the
    /// address space.
    pub fn try_zeroed(bytes: u64) -> Result<RingRegion, std::io::Error> {
        let len = usize::try_from(bytes.max(1))
            .ok()
            .and_then(|b| b.checked_next_multiple_of(4096))
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::OutOfMemory,
                    "larger than the address space",
                )
            })?;
        // SAFETY: a fresh anonymous private mapping at an address the
        // kernel picks (page aligned, zero filled); the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(RingRegion {
            base: base.cast(),
            len,
        })
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never: at least a page).
    #[inline]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The base address.
    #[inline]
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// The 8-byte word at `at` (8-aligned, inside the region).
    ///
    /// # Panics
    /// If `at` is misaligned or out of range.
    #[inline]
    pub fn word(&self, at: usize) -> &AtomicU64 {
        assert!(at % 8 == 0 && at + 8 <= self.len(), "region word {at}");
        // SAFETY: in bounds and aligned (asserted; the base is page
        // aligned); the memory lives as long as `self`; AtomicU64 has the
        // representation of u64 and every bit pattern is valid.
        unsafe { &*(self.base.add(at) as *const AtomicU64) }
    }

    /// A ring view of `geometry` at byte `offset` of this region.
    ///
    /// # Panics
    /// If the ring does not fit or `offset` is not 64-byte aligned.
    pub fn ring(&self, offset: usize, geometry: RingGeometry) -> RingView<'_> {
        assert!(
            offset % 64 == 0 && offset as u64 + geometry.ring_bytes() <= self.len() as u64,
            "ring at {offset} does not fit the region"
        );
        RingView {
            // SAFETY: in bounds (asserted).
            base: unsafe { self.base.add(offset) },
            geometry,
            _region: std::marker::PhantomData,
        }
    }
}

impl Drop for RingRegion {
    fn drop(&mut self) {
        // SAFETY: mapped in `try_zeroed` with this very length; no view
        // outlives the region (views borrow it).
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

/// One ring inside a [`RingRegion`].
#[derive(Debug, Clone, Copy)]
pub struct RingView<'a> {
    base: *mut u8,
    geometry: RingGeometry,
    _region: std::marker::PhantomData<&'a RingRegion>,
}

impl RingView<'_> {
    /// The base address of the ring.
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    fn slot_end(&self, slot: u32) -> *mut u8 {
        assert!(slot < self.geometry.slots);
        // SAFETY: slot < slots, so the end stays inside the ring.
        unsafe {
            self.base
                .add((slot as usize + 1) * self.geometry.slot_bytes as usize)
        }
    }
}

impl RingStore for RingView<'_> {
    fn geometry(&self) -> RingGeometry {
        self.geometry
    }

    #[inline]
    fn stamp(&self, slot: u32) -> &AtomicU64 {
        // SAFETY: the stamp is the last 8 bytes of an in-bounds slot, 8-byte
        // aligned (slot sizes are multiples of 64); the region outlives the
        // view; every bit pattern is a valid u64.
        unsafe { &*(self.slot_end(slot).sub(8) as *const AtomicU64) }
    }

    fn read_body(&self, slot: u32) -> TrailerBody {
        // SAFETY: the body lies inside the slot, 8-aligned; the caller saw
        // the stamp with Acquire, so the writer's body write happened
        // before; TrailerBody is plain old data, valid for any bytes.
        unsafe { (self.slot_end(slot).sub(TRAILER_BYTES) as *const TrailerBody).read_volatile() }
    }

    fn write_body(&self, slot: u32, body: &TrailerBody) {
        // SAFETY: as in `read_body`; the writer owns the slot (credit).
        unsafe {
            (self.slot_end(slot).sub(TRAILER_BYTES) as *mut TrailerBody).write_volatile(*body)
        }
    }

    fn write_payload(&self, slot: u32, data: &[u8]) {
        assert!(data.len() <= self.geometry.capacity());
        // SAFETY: the payload ends at the trailer, inside the slot; the
        // writer owns the slot (credit); `data` is not ring memory.
        unsafe {
            core::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.slot_end(slot).sub(TRAILER_BYTES + data.len()),
                data.len(),
            )
        }
    }

    #[inline]
    fn payload(&self, slot: u32, len: usize) -> *const u8 {
        assert!(len <= self.geometry.capacity());
        // SAFETY: in bounds: the payload ends where the trailer starts.
        unsafe { self.slot_end(slot).sub(TRAILER_BYTES + len) }
    }
}

const _: () = assert!(STAMP_OFFSET + 8 == TRAILER_BYTES);
