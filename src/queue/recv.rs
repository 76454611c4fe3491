//! The receive queue: a power-of-two ring of stamped one-line slots.
//!
//! Seed 004 §5 send steps 5–6 ("fetch-and-increment on the tail of the
//! receiver's receive queue; set the index at the fetched tail") and receive
//! step 1 ("poll until the entry at the head is marked"), with the marking
//! made precise by a sequence stamp per slot (Vyukov's bounded queue):
//!
//! - a slot for queue position `p` is **published** when its `seq == p + 1`;
//! - in shared mode the consumer **recycles** the slot after reading it by
//!   storing `seq = p + cap`, which is exactly the value a producer of
//!   position `p + cap` waits for; initially `seq[i] = i`;
//! - in dedicated mode nobody recycles: the credit protocol proves the
//!   consumer read position `p` before the single producer may reach
//!   `p + cap`, so the consumer never writes to the slot's cache line.
//!
//! The consumer's head is private to the receiving process; polling an
//! empty queue is one Acquire load of a line that stays in the receiver's
//! cache until a producer writes it (HPVM §4.1, memory-based
//! notification).

#![allow(unsafe_code)]

use crate::frame::FragHeader;
use crate::sync::mutant::{self, Mutant};
use crate::sync::{self, AtomicU64, Ordering, UnsafeCell};

/// Payload bytes that travel inside the slot itself.
pub const INLINE_BYTES: usize = 28;

/// Frame index meaning "payload is inline, no frame".
pub const NO_FRAME: u32 = u32::MAX;

/// The descriptor stored in a slot: 56 bytes, so the slot is one cache line.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotBody {
    /// Fragment header.
    pub header: FragHeader,
    /// Frame holding the payload, or [`NO_FRAME`] for an inline payload.
    pub frame: u32,
    /// Inline payload (first `header.len` bytes) when `frame == NO_FRAME`.
    /// The bytes past the payload are unspecified (senders write the slot
    /// in place and leave what an earlier lap left there).
    pub inline: [u8; INLINE_BYTES],
}

/// One receive-queue slot: the stamp and the descriptor, one cache line.
// Shared layout: a fixed `repr(C, align(64))`, not crossbeam's `CachePadded`
// (128 on x86_64, platform dependent), which the segment's offsets and
// every process mapping it must agree on (docs/architecture.md).
#[repr(C, align(64))]
#[derive(Debug)]
pub struct Slot {
    seq: AtomicU64,
    body: UnsafeCell<SlotBody>,
}

#[cfg(not(loom))]
static_assertions::assert_eq_size!(Slot, [u8; 64]);

impl Slot {
    /// A slot stamped for position `index` of lap 0 (unpublished).
    pub fn new(index: u64) -> Slot {
        Slot {
            seq: AtomicU64::new(index),
            body: UnsafeCell::new(SlotBody::default()),
        }
    }

    /// Re-stamp an existing slot (in a freshly created mapping) as `new(index)`.
    /// Relaxed: the mapping is published to other processes by the segment's
    /// ready flag afterwards.
    pub fn reset(&self, index: u64) {
        self.seq.store(index, Ordering::Relaxed);
    }
}

/// A slot's stamp is from neither this lap nor the last one: the memory was
/// overwritten by something that does not follow the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueCorrupt {
    /// The consumer's position.
    pub head: u64,
    /// The stamp found.
    pub seq: u64,
}

/// Why a shared-queue publication did not happen (nothing was written).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PublishStalled {
    /// The slot's stamp is one the protocol never leaves there while a
    /// producer waits for it (a stamp from a later position, or not of this
    /// slot): the memory was overwritten.
    Corrupt {
        /// The position to publish at.
        pos: u64,
        /// The stamp found.
        seq: u64,
    },
    /// The caller's `give_up` said to stop waiting (the consumer is gone).
    GaveUp,
}

/// Spins between two looks at `give_up` while a producer waits.
const SPINS_PER_LOOK: u32 = 1024;

/// A receive queue over a slice of slots.
#[derive(Debug, Clone, Copy)]
pub struct RecvQueue<'a> {
    slots: &'a [Slot],
    tail: &'a AtomicU64,
    mask: u64,
    shared: bool,
}

impl<'a> RecvQueue<'a> {
    /// A queue over `slots` (a power of two of them) whose shared tail
    /// counter is `tail`. `shared` selects the multi-producer protocol.
    ///
    /// # Panics
    /// If the slot count is not a power of two of at least 2.
    pub fn new(slots: &'a [Slot], tail: &'a AtomicU64, shared: bool) -> Self {
        let n = slots.len();
        assert!(
            n >= 2 && n.is_power_of_two(),
            "slot count {n} is not a power of two >= 2"
        );
        RecvQueue {
            slots,
            tail,
            mask: n as u64 - 1,
            shared,
        }
    }

    /// Number of slots.
    #[inline]
    pub fn capacity(&self) -> u64 {
        self.mask + 1
    }

    /// Whether several producers share this queue.
    #[inline]
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// Claim the next position of a shared queue (seed step 5). Dedicated
    /// queues do not call this: their producer counts positions itself.
    #[inline]
    pub fn claim(&self) -> u64 {
        // Relaxed: the position only chooses a slot; the slot's stamp orders
        // the data (SYNC POINT rq-publish / rq-recycle).
        self.tail.fetch_add(1, Ordering::Relaxed)
    }

    /// The slot of position `pos`.
    #[inline(always)]
    fn slot(&self, pos: u64) -> &'a Slot {
        let i = (pos & self.mask) as usize;
        debug_assert!(i < self.slots.len());
        // SAFETY: `mask` is `slots.len() - 1` and the length a power of two
        // (checked in `new`; neither changes), so `i < slots.len()`.
        unsafe { self.slots.get_unchecked(i) }
    }

    /// Publish `body` at position `pos` of a dedicated queue (seed step 6):
    /// the caller's credit must prove the consumer has read position
    /// `pos - capacity()`. Nothing is waited for, so nothing can fail.
    #[inline(always)]
    pub fn publish_dedicated(&self, pos: u64, body: &SlotBody) {
        self.publish_dedicated_with(pos, |b| *b = *body);
    }

    /// As [`publish_dedicated`](Self::publish_dedicated), with the body
    /// written in place by `write` (which must set every field it means
    /// the consumer to read). A sender that builds the body in place saves
    /// the copy of a stack-built one, whose wide loads straddle the
    /// narrower stores that built it and so cannot be forwarded from the
    /// store buffer: a stall per message (docs/engine.md, "Store forwarding").
    #[inline(always)]
    pub fn publish_dedicated_with(&self, pos: u64, write: impl FnOnce(&mut SlotBody)) {
        debug_assert!(!self.shared, "a shared queue publishes with `publish`");
        self.fill(self.slot(pos), pos, write);
    }

    /// Publish `body` at position `pos` (seed step 6), in either mode.
    ///
    /// In shared mode this first waits for the consumer to recycle the slot:
    /// the caller's credit says it will unless the consumer holds older
    /// fragments for long, or is gone. Every [`SPINS_PER_LOOK`] spins the
    /// wait asks `give_up`; a stamp the protocol cannot leave there ends it
    /// at once. Dedicated queues never wait.
    ///
    /// # Errors
    /// [`PublishStalled`]: nothing was written.
    #[inline(always)]
    pub fn publish(
        &self,
        pos: u64,
        body: &SlotBody,
        give_up: impl FnMut() -> bool,
    ) -> Result<(), PublishStalled> {
        self.publish_with(pos, |b| *b = *body, give_up)
    }

    /// As [`publish`](Self::publish), with the body written in place by
    /// `write` once the slot is ours (see
    /// [`publish_dedicated_with`](Self::publish_dedicated_with)).
    ///
    /// # Errors
    /// [`PublishStalled`]: nothing was written.
    #[inline(always)]
    pub fn publish_with(
        &self,
        pos: u64,
        write: impl FnOnce(&mut SlotBody),
        give_up: impl FnMut() -> bool,
    ) -> Result<(), PublishStalled> {
        let slot = self.slot(pos);
        // (MUTANT PublishSkipsRecycleWait, loom only: no wait.)
        if self.shared && !mutant::on(Mutant::PublishSkipsRecycleWait) {
            // SYNC POINT rq-recycle (acquire side): pairs with the
            // consumer's Release recycle store in `recycle`; its reads of
            // the previous lap's body happen before our write. The usual
            // case, recycled already, inline; the wait out of line.
            if slot.seq.load(Ordering::Acquire) != pos {
                wait_recycled(slot, pos, self.mask, give_up)?;
            }
        }
        self.fill(slot, pos, write);
        Ok(())
    }

    /// Write the body into `slot` through `write` and stamp it published
    /// for `pos`.
    #[inline(always)]
    fn fill(&self, slot: &Slot, pos: u64, write: impl FnOnce(&mut SlotBody)) {
        // Fill the slot.
        slot.body.with_mut(|p| {
            // SAFETY: the slot is ours: in shared mode the stamp says the
            // consumer recycled it and no other producer holds position
            // `pos`; in dedicated mode the credit protocol says the consumer
            // finished with it. So no one else reads or writes the body until
            // the stamp below, and this is the only reference. `p` is valid
            // and aligned (it points into the slot), and SlotBody is plain
            // old data (any bytes left from the last lap are a valid value).
            write(unsafe { &mut *p })
        });
        // SYNC POINT rq-publish (release side): pairs with the Acquire load
        // in `try_pop_with` and in `Watch::ready`; the body written above is
        // visible to the consumer that sees the new stamp. (MUTANT PublishRelaxed, loom only: Relaxed.)
        let order = mutant::weaken(Mutant::PublishRelaxed, Ordering::Release);
        slot.seq.store(pos + 1, order);
    }

    /// Read the entry at position `head`, if it has been published, through
    /// `read`, which gets the descriptor in place. The slot stays the
    /// consumer's until it is given back: in shared mode by
    /// [`recycle`](Self::recycle), in dedicated mode by returning the
    /// fragment's credit. Until then the descriptor (and its inline bytes)
    /// may be read again, so a consumer can leave a small payload in the
    /// slot until its handler is done with it.
    ///
    /// # Errors
    /// [`QueueCorrupt`] if the stamp belongs to neither this lap nor the last.
    #[inline]
    pub fn try_pop_with<R>(
        &self,
        head: u64,
        read: impl FnOnce(&SlotBody) -> R,
    ) -> Result<Option<R>, QueueCorrupt> {
        let slot = self.slot(head);
        // SYNC POINT rq-publish (acquire side): pairs with the Release store
        // in `publish`; seeing `head + 1` makes the body visible.
        let seq = slot.seq.load(Ordering::Acquire);
        if seq != head + 1 {
            return if seq > head + 1 || seq + self.mask < head {
                Err(QueueCorrupt { head, seq })
            } else {
                Ok(None)
            };
        }
        // Read the descriptor in the slot.
        Ok(Some(slot.body.with(|p| {
            // SAFETY: the stamp says position `head` was published, and the
            // producer of the next lap cannot write before the consumer
            // recycles (shared) or returns the credit (dedicated), which
            // the consumer does only after its last read. `p` is valid and
            // aligned; SlotBody is plain old data.
            read(unsafe { &*p })
        })))
    }

    /// Check, without popping, that the stamp at `head` belongs to this lap
    /// or the last (what an idle consumer does now and then: the empty poll
    /// itself only compares with one value).
    ///
    /// # Errors
    /// [`QueueCorrupt`] otherwise.
    pub fn check(&self, head: u64) -> Result<(), QueueCorrupt> {
        // Relaxed: only the value is judged; nothing is read through it.
        let seq = self.slot(head).seq.load(Ordering::Relaxed);
        if seq > head + 1 || seq + self.mask < head {
            Err(QueueCorrupt { head, seq })
        } else {
            Ok(())
        }
    }

    /// The stamp of the slot of position `pos` now. Relaxed: only the
    /// value is judged (how long a waiting producer has seen it), nothing
    /// is read through it.
    pub fn stamp(&self, pos: u64) -> u64 {
        self.slot(pos).seq.load(Ordering::Relaxed)
    }

    /// How many positions producers have claimed so far (shared mode; in
    /// dedicated mode the tail is not used and this stays 0). Relaxed: a
    /// hint for the consumer's hole watch, nothing is read through it.
    pub fn claimed(&self) -> u64 {
        self.tail.load(Ordering::Relaxed)
    }

    /// Read the entry at `head` through `read`, for a consumer whose
    /// [`Watch`] on `head` has just fired: that Acquire load is what makes
    /// the descriptor visible, so the stamp is not loaded again. Otherwise
    /// as [`try_pop_with`](Self::try_pop_with).
    #[inline]
    pub fn read_watched<R>(&self, head: u64, read: impl FnOnce(&SlotBody) -> R) -> R {
        let slot = self.slot(head);
        slot.body.with(|p| {
            // SAFETY: the caller's watch saw `head + 1` with Acquire (SYNC
            // POINT rq-publish), so the body is published and ours until we
            // recycle (shared) or return its credit (dedicated); `p` is valid
            // and aligned; SlotBody is plain old data.
            read(unsafe { &*p })
        })
    }

    /// Shared mode: give the slot of position `pos` back to the producer of
    /// position `pos + capacity()`. Call once per popped position, after the
    /// last read of its descriptor. No-op in dedicated mode.
    #[inline]
    pub fn recycle(&self, pos: u64) {
        if self.shared {
            // SYNC POINT rq-recycle (release side): pairs with the Acquire
            // wait in `publish`; our reads of the slot happen before reuse.
            // (MUTANT RecycleRelaxed, loom only: Relaxed.)
            let order = mutant::weaken(Mutant::RecycleRelaxed, Ordering::Release);
            self.slot(pos).seq.store(pos + self.capacity(), order);
        }
    }

    /// Pop a copy of the entry at `head` and recycle its slot at once.
    ///
    /// # Errors
    /// As [`try_pop_with`](Self::try_pop_with).
    #[inline]
    pub fn try_pop(&self, head: u64) -> Result<Option<SlotBody>, QueueCorrupt> {
        let body = self.try_pop_with(head, |b| *b)?;
        if body.is_some() {
            self.recycle(head);
        }
        Ok(body)
    }

    /// Hint the CPU to fetch the slot of position `pos` into the cache.
    ///
    /// A consumer that finds entries published back to back would otherwise
    /// take one dependent cache miss per entry (it loads slot `i + 1` only
    /// after handling slot `i`); prefetching a little ahead overlaps those
    /// transfers. Harmless when the slot is not written yet.
    #[inline(always)]
    pub fn prefetch(&self, pos: u64) {
        #[cfg(all(not(loom), target_arch = "x86_64"))]
        {
            let p = self.slot(pos) as *const Slot as *const i8;
            // SAFETY: a prefetch only hints the cache; `p` points into the
            // slot slice, and prefetching never faults or writes.
            unsafe { core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p) };
        }
        #[cfg(not(all(not(loom), target_arch = "x86_64")))]
        let _ = pos;
    }

    /// Whether the entry at `head` has been published (one Acquire load).
    #[inline]
    pub fn is_ready(&self, head: u64) -> bool {
        self.watch(head).ready()
    }

    /// A [`Watch`] on the slot of position `head`: what an idle poll checks.
    #[inline]
    pub fn watch(&self, head: u64) -> Watch<'a> {
        Watch {
            stamp: &self.slot(head).seq,
            want: head + 1,
        }
    }
}

/// Shared mode, producer: wait until the consumer has recycled `slot` for
/// position `pos`. Out of line: dedicated queues never wait, and the wait
/// kept `publish` from being inlined into the send paths.
///
/// While a producer of `pos` waits, the slot holds the stamp of an earlier
/// position `q` of the same slot (`q = pos - k * capacity`, `k >= 1`):
/// `q` (recycled for `q`, its producer not yet done), `q + 1` (published,
/// not yet recycled), or `pos` itself (ready). So a stamp above `pos`, or
/// one that is neither this slot's index nor the next modulo the capacity,
/// was written by something outside the protocol.
#[inline(never)]
fn wait_recycled(
    slot: &Slot,
    pos: u64,
    mask: u64,
    mut give_up: impl FnMut() -> bool,
) -> Result<(), PublishStalled> {
    let mut spins = 0u32;
    loop {
        // SYNC POINT rq-recycle (acquire side): pairs with the consumer's
        // Release recycle store in `recycle`; its reads of the previous
        // lap's body happen before the caller's write.
        let seq = slot.seq.load(Ordering::Acquire);
        if seq == pos {
            return Ok(());
        }
        let lap_offset = seq.wrapping_sub(pos) & mask;
        if seq > pos || lap_offset > 1 {
            return Err(PublishStalled::Corrupt { pos, seq });
        }
        spins += 1;
        if spins % SPINS_PER_LOOK == 0 {
            if give_up() {
                return Err(PublishStalled::GaveUp);
            }
            sync::yield_now();
        } else {
            sync::spin_loop();
        }
    }
}

/// The stamp word a consumer polls and the value that means "published":
/// an empty poll is one load and one compare (HPVM §4.1).
#[derive(Debug, Clone, Copy)]
pub struct Watch<'a> {
    stamp: &'a AtomicU64,
    want: u64,
}

impl<'a> Watch<'a> {
    /// A watch that never fires (for a queue taken out of service).
    pub fn never(stamp: &'a AtomicU64) -> Self {
        Watch {
            stamp,
            want: u64::MAX,
        }
    }

    /// Whether this watch was made by [`never`](Self::never).
    pub fn is_never(&self) -> bool {
        self.want == u64::MAX
    }

    /// The stamp word watched.
    pub fn stamp_ref(&self) -> &'a AtomicU64 {
        self.stamp
    }

    /// Whether the watched slot has been published.
    #[inline(always)]
    pub fn ready(&self) -> bool {
        // SYNC POINT rq-publish (acquire side): pairs with the Release stamp
        // store in `RecvQueue::publish`; `read_watched` relies on it.
        self.stamp.load(Ordering::Acquire) == self.want
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_the_protocol_never_leaves_stops_a_waiting_producer_at_once() {
        let tail = AtomicU64::new(0);
        let slots: Vec<Slot> = (0..4).map(Slot::new).collect();
        let q = RecvQueue::new(&slots, &tail, true);
        // Position 5 waits on slot 1 for stamp 5; a stamp above the
        // position, or not this slot's (1) or the next's (2) modulo 4, is
        // garbage.
        for bad in [6, 99, 4, 7, 0x_dead_beef] {
            slots[1].seq.store(bad, Ordering::Relaxed);
            let looks = Cell::new(0);
            let r = q.publish(5, &SlotBody::default(), || {
                looks.set(looks.get() + 1);
                false
            });
            assert_eq!(r, Err(PublishStalled::Corrupt { pos: 5, seq: bad }));
            assert_eq!(looks.get(), 0, "found before any wait");
        }
    }

    #[test]
    fn a_producer_waiting_on_an_unrecycled_slot_asks_and_can_give_up() {
        let tail = AtomicU64::new(0);
        let slots: Vec<Slot> = (0..4).map(Slot::new).collect();
        let q = RecvQueue::new(&slots, &tail, true);
        // Position 1 published (stamp 2), not recycled: a producer of
        // position 5 waits; the stamp is a legitimate one.
        for waiting in [2, 1] {
            slots[1].seq.store(waiting, Ordering::Relaxed);
            let looks = Cell::new(0);
            let r = q.publish(5, &SlotBody::default(), || {
                looks.set(looks.get() + 1);
                looks.get() == 3
            });
            assert_eq!(r, Err(PublishStalled::GaveUp));
            assert_eq!(looks.get(), 3);
            assert_eq!(
                slots[1].seq.load(Ordering::Relaxed),
                waiting,
                "nothing written"
            );
        }
        // Recycled for position 5: published at once, no look.
        slots[1].seq.store(5, Ordering::Relaxed);
        assert_eq!(
            q.publish(5, &SlotBody::default(), || panic!("no wait")),
            Ok(())
        );
        assert!(q.is_ready(5));
    }

    use std::cell::Cell;
}
