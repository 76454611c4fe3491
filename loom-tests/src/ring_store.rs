//! A [`RingStore`] on ordinary memory whose every payload and trailer-body
//! access loom sees (the raw [`RingRegion`](fastmsg::internal::ring) casts bytes to
//! atomics and cannot run under loom).
//!
//! Each slot keeps its payload area, its trailer body and its stamp apart:
//! the payload bytes and the body each behind a loom cell, the stamp a loom
//! atomic. The layout the ring protocol promises is kept where it can be
//! observed: a fragment's payload *ends* where the trailer begins, so
//! [`RingStore::payload`] points `len` bytes before the end of the slot's
//! payload area, and [`LoomRing::read_taken`] insists on that pointer.

use fastmsg::internal::ring::{RingGeometry, RingStore, Taken, TrailerBody};
use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicU64;

/// One slot: `capacity` payload bytes, the trailer body, the stamp.
#[derive(Debug)]
struct LoomSlot {
    payload: UnsafeCell<Box<[u8]>>,
    body: UnsafeCell<TrailerBody>,
    stamp: AtomicU64,
}

/// A zeroed ring of `geometry.slots` slots. Loom reports any two accesses
/// to one slot's payload or body that are not ordered by happens-before
/// (a write with any other access): a reader that sees a stamp without the
/// bytes written before it, or a writer reusing a slot still being read.
#[derive(Debug)]
pub struct LoomRing {
    geometry: RingGeometry,
    slots: Vec<LoomSlot>,
}

impl LoomRing {
    /// A fresh ring (zero stamps, zero bytes), as a peer sees it after
    /// connection set-up.
    pub fn new(geometry: RingGeometry) -> Self {
        LoomRing {
            geometry,
            slots: (0..geometry.slots)
                .map(|_| LoomSlot {
                    payload: UnsafeCell::new(vec![0; geometry.capacity()].into_boxed_slice()),
                    body: UnsafeCell::new(TrailerBody::default()),
                    stamp: AtomicU64::new(0),
                })
                .collect(),
        }
    }

    /// The payload of a fragment [`RingRx::try_take`](fastmsg::internal::ring::RingRx)
    /// handed out, read through its slot's cell (so loom checks the read
    /// against the writer's writes).
    ///
    /// # Panics
    /// If `taken.data` is not where the payload of `taken.body.header.len`
    /// bytes must lie in the slot of `taken.pos` (ending at the trailer).
    pub fn read_taken(&self, taken: &Taken) -> Vec<u8> {
        let len = taken.body.header.len as usize;
        let cap = self.geometry.capacity();
        let slot = &self.slots[self.geometry.slot_of(taken.pos) as usize];
        slot.payload.with(|p| {
            // SAFETY: `p` points to the slot's live payload box; loom checks
            // that no write to it is concurrent (that is what is modelled).
            let bytes = unsafe { &*p };
            assert!(len <= cap, "payload longer than the slot");
            assert_eq!(
                taken.data,
                bytes[cap - len..].as_ptr(),
                "payload pointer does not end at the trailer"
            );
            bytes[cap - len..].to_vec()
        })
    }
}

impl RingStore for LoomRing {
    fn geometry(&self) -> RingGeometry {
        self.geometry
    }

    fn stamp(&self, slot: u32) -> &AtomicU64 {
        &self.slots[slot as usize].stamp
    }

    fn read_body(&self, slot: u32) -> TrailerBody {
        self.slots[slot as usize].body.with(|p| {
            // SAFETY: `p` points to the live body; loom checks for a
            // concurrent writer.
            unsafe { *p }
        })
    }

    fn write_body(&self, slot: u32, body: &TrailerBody) {
        self.slots[slot as usize].body.with_mut(|p| {
            // SAFETY: `p` points to the live body; loom checks for any
            // concurrent access.
            unsafe { *p = *body }
        })
    }

    fn write_payload(&self, slot: u32, data: &[u8]) {
        let cap = self.geometry.capacity();
        assert!(data.len() <= cap, "payload longer than the slot");
        self.slots[slot as usize].payload.with_mut(|p| {
            // SAFETY: as in `write_body`.
            let bytes = unsafe { &mut *p };
            bytes[cap - data.len()..].copy_from_slice(data);
        })
    }

    fn payload(&self, slot: u32, len: usize) -> *const u8 {
        let cap = self.geometry.capacity();
        assert!(len <= cap, "payload longer than the slot");
        // A read access as far as loom is concerned: the reader takes the
        // address of bytes it is about to read.
        self.slots[slot as usize].payload.with(|p| {
            // SAFETY: `p` points to the live payload box, which lives (and
            // stays put, being boxed) as long as the ring.
            let bytes = unsafe { &*p };
            bytes[cap - len..].as_ptr()
        })
    }
}
