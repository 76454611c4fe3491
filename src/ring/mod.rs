//! End-of-frame length-flag rings: the network transports' fast path
//! (HPVM §4.1, "memory-based atomic notification"; IWARP §3.3, the
//! MVAPICH "RDMA fast path").
//!
//! Per (sender, receiver) pair the **receiver** owns a ring of `slots`
//! fixed-size slots in its memory. The sender places fragment `pos` in slot
//! `pos & mask` so that its payload *ends* where the slot's [`Trailer`]
//! begins, and the trailer ends exactly at the slot's end:
//!
//! ```text
//!  slot: [ ……… unused ……… | payload (len) | header 24 B | credit 8 B | stamp 8 B ]
//!                                           └────────── Trailer, 40 B ─────────┘
//! ```
//!
//! One write (an RDMA WRITE, or one write record of the TCP software NIC)
//! moves payload and trailer together, lowest address first, so the last
//! word to land is the **stamp**. The receiver polls only the stamp word of
//! its next slot: `stamp == pos + 1` means "fragment `pos` is here" (a value
//! no earlier lap of the slot ever held, so no clearing is needed), and the
//! Acquire load that sees it makes the payload and the rest of the trailer
//! visible ([`publish_trailer`] is the writer's side: body first, stamp last
//! with Release). Where a fabric does not place data in order, the transport
//! must not rely on this and uses its safe mode instead (see the verbs
//! backend).
//!
//! Credits ([`crate::flow`]): the sender may have at most `slots` fragments
//! unreleased, so a slot is never overwritten before the receiver released
//! it. The receiver returns its released count *piggybacked* in the
//! `credit` field of every trailer it sends the other way, or — when half
//! the window is released and unpublished — in an explicit credit write to
//! the sender's credit word ([`RingRx::credit_due`]).
//!
//! This module knows nothing about sockets or verbs: storage comes through
//! [`RingStore`] and every atomic through `crate::sync`, so `loom-tests/`
//! runs this very logic over ordinary memory (models 4 and 4b,
//! `loom-tests/src/ring.rs` and `ring_duplex.rs`).

use crate::error::ProtocolError;
use crate::flow::{CreditReturn, CreditWindow};
use crate::frame::FragHeader;
use crate::sync::mutant::{self, Mutant};
use crate::sync::{AtomicU64, Ordering};

/// Bytes of the trailer at the end of every slot.
pub const TRAILER_BYTES: usize = 40;

/// Offset of the stamp word inside the trailer.
pub const STAMP_OFFSET: usize = TRAILER_BYTES - 8;

/// What a trailer carries besides the stamp.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrailerBody {
    /// The fragment's header (the same as the shm transport's).
    pub header: FragHeader,
    /// Piggybacked credit: fragments the writer has released from the
    /// reader's sends so far (0: nothing new).
    pub credit: u64,
}

/// A whole trailer as it lies in memory and travels on the wire: body,
/// then the stamp, the last 8 bytes of the slot.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trailer {
    /// Header and piggybacked credit.
    pub body: TrailerBody,
    /// `pos + 1` for the fragment at ring position `pos`.
    pub stamp: u64,
}

static_assertions::assert_eq_size!(Trailer, [u8; TRAILER_BYTES]);

impl Trailer {
    /// Little-endian wire form (the in-memory layout on every supported
    /// target).
    pub fn to_bytes(self) -> [u8; TRAILER_BYTES] {
        let h = &self.body.header;
        let mut b = [0u8; TRAILER_BYTES];
        b[0..4].copy_from_slice(&h.src.to_le_bytes());
        b[4..8].copy_from_slice(&h.handler.to_le_bytes());
        b[8..12].copy_from_slice(&h.len.to_le_bytes());
        b[12..16].copy_from_slice(&h.flags.to_le_bytes());
        b[16..24].copy_from_slice(&h.total.to_le_bytes());
        b[24..32].copy_from_slice(&self.body.credit.to_le_bytes());
        b[32..40].copy_from_slice(&self.stamp.to_le_bytes());
        b
    }

    /// Parse the wire form (any bytes parse; the reader validates).
    pub fn from_bytes(b: &[u8; TRAILER_BYTES]) -> Trailer {
        let w = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let d = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(x)
        };
        Trailer {
            body: TrailerBody {
                header: FragHeader {
                    src: w(0),
                    handler: w(4),
                    len: w(8),
                    flags: w(12),
                    total: d(16),
                },
                credit: d(24),
            },
            stamp: d(32),
        }
    }
}

/// The geometry of one ring, agreed by both ends at connection set-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingGeometry {
    /// Slots (a power of two, at least 4: see [`RingRx::credit_due`]).
    pub slots: u32,
    /// Bytes per slot (a multiple of 64, more than [`TRAILER_BYTES`]).
    pub slot_bytes: u32,
}

impl RingGeometry {
    /// Check the ranges; `None` if the geometry is unusable.
    pub fn checked(slots: u32, slot_bytes: u32) -> Option<RingGeometry> {
        let ok = slots >= 4
            && slots.is_power_of_two()
            && slots <= 1 << 16
            && slot_bytes % 64 == 0
            && slot_bytes as usize > TRAILER_BYTES
            && slot_bytes <= 1 << 24;
        ok.then_some(RingGeometry { slots, slot_bytes })
    }

    /// Payload bytes one slot carries.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.slot_bytes as usize - TRAILER_BYTES
    }

    /// Bytes of the whole ring.
    #[inline]
    pub fn ring_bytes(&self) -> u64 {
        u64::from(self.slots) * u64::from(self.slot_bytes)
    }

    /// The slot of ring position `pos`.
    #[inline]
    pub fn slot_of(&self, pos: u64) -> u32 {
        (pos & u64::from(self.slots - 1)) as u32
    }

    /// Where the one write of a `len`-byte fragment at `pos` starts, as an
    /// offset from the ring's base; it runs to the slot's end.
    #[inline]
    pub fn write_start(&self, pos: u64, len: usize) -> u64 {
        let end = u64::from(self.slot_of(pos) + 1) * u64::from(self.slot_bytes);
        end - (len + TRAILER_BYTES) as u64
    }
}

/// Memory holding one ring. Implemented over a raw mapping by the
/// transports and over `loom` cells by the models.
pub trait RingStore {
    /// The ring's geometry.
    fn geometry(&self) -> RingGeometry;
    /// The stamp word of `slot` (the slot's last 8 bytes).
    fn stamp(&self, slot: u32) -> &AtomicU64;
    /// Read the trailer body of `slot`. Only called after an Acquire load
    /// of its stamp saw the fragment.
    fn read_body(&self, slot: u32) -> TrailerBody;
    /// Write the trailer body of `slot` (writer side, before the stamp).
    fn write_body(&self, slot: u32, body: &TrailerBody);
    /// Copy `data` so that it ends where `slot`'s trailer begins (writer
    /// side; used where the payload is not placed by a NIC directly).
    fn write_payload(&self, slot: u32, data: &[u8]);
    /// Where the `len` payload bytes of `slot` start (`len` at most the
    /// capacity).
    fn payload(&self, slot: u32, len: usize) -> *const u8;
}

/// The writer's last step for fragment `pos` (the software NIC's "trailer
/// last, with Release"; a hardware NIC does the same by placing in order):
/// the payload is already in place; write the trailer body, then the stamp.
#[inline]
pub fn publish_trailer<S: RingStore + ?Sized>(store: &S, slot: u32, trailer: &Trailer) {
    store.write_body(slot, &trailer.body);
    // SYNC POINT ring-stamp (release side): the payload and the body written
    // before are visible to the reader whose Acquire load sees this stamp
    // (`RingRx::try_take`, `RingWatch::ready`).
    // (MUTANT RingStampRelaxed, loom only: Relaxed.)
    let order = mutant::weaken(Mutant::RingStampRelaxed, Ordering::Release);
    store.stamp(slot).store(trailer.stamp, order);
}

/// Place a whole fragment locally (payload, body, stamp): what a remote
/// write amounts to, used by the loom models and by loopback tests.
pub fn place<S: RingStore + ?Sized>(store: &S, pos: u64, body: &TrailerBody, payload: &[u8]) {
    let g = store.geometry();
    let slot = g.slot_of(pos);
    store.write_payload(slot, payload);
    publish_trailer(
        store,
        slot,
        &Trailer {
            body: *body,
            stamp: pos + 1,
        },
    );
}

/// The stamp a reader at `head` waits for, and the word it reads: an empty
/// poll is one load and one compare. A ring taken out of service has no
/// word to watch: its watch never fires, whatever the writer stores.
#[derive(Debug, Clone, Copy)]
pub struct RingWatch<'a> {
    stamp: Option<&'a AtomicU64>,
    want: u64,
}

impl RingWatch<'_> {
    /// Whether the watched fragment has landed.
    #[inline(always)]
    pub fn ready(&self) -> bool {
        // SYNC POINT ring-stamp (acquire side), as in `RingRx::try_take`.
        self.stamp
            .is_some_and(|s| s.load(Ordering::Acquire) == self.want)
    }
}

/// A fragment taken from the ring: its position, trailer body, and where
/// its payload lies (valid until the fragment is released).
#[derive(Debug, Clone, Copy)]
pub struct Taken {
    /// Ring position.
    pub pos: u64,
    /// Header and piggybacked credit.
    pub body: TrailerBody,
    /// The payload, `body.header.len` bytes.
    pub data: *const u8,
}

/// The reader's side of one ring: where the next fragment lands, and the
/// credit owed to the writer.
#[derive(Debug, Clone)]
pub struct RingRx {
    geometry: RingGeometry,
    /// The rank that writes this ring.
    peer: u32,
    head: u64,
    released_pos: u64,
    /// Refused positions waiting for the ones before them to be released.
    refused: Vec<u64>,
    credit: CreditReturn,
    dead: bool,
}

impl RingRx {
    /// A reader of a fresh (zeroed) ring written by `peer`.
    pub fn new(geometry: RingGeometry, peer: u32) -> Self {
        RingRx {
            geometry,
            peer,
            head: 0,
            released_pos: 0,
            refused: Vec::new(),
            credit: CreditReturn::default(),
            dead: false,
        }
    }

    /// The next position to poll.
    #[inline]
    pub fn head(&self) -> u64 {
        self.head
    }

    /// The watch on the next slot.
    #[inline]
    pub fn watch<'a, S: RingStore + ?Sized>(&self, store: &'a S) -> RingWatch<'a> {
        RingWatch {
            // A dead ring's watch must not fire even if the writer stores
            // any value (u64::MAX included) in the stamp.
            stamp: (!self.dead).then(|| store.stamp(self.geometry.slot_of(self.head))),
            want: self.head + 1,
        }
    }

    /// Whether the ring is in service (a ring taken out of service by a
    /// bad stamp is never read again; its [`watch`](Self::watch) never
    /// fires).
    #[inline]
    pub fn in_service(&self) -> bool {
        !self.dead
    }

    /// Take the fragment at the head if it has landed, validating its
    /// trailer against the job (`world` ranks). `Ok(None)` even where a
    /// watch or a load of the stamp said "landed" a moment before: the
    /// writer may have stored another stamp since, or the ring is out of
    /// service; callers must treat it as "nothing yet". A fragment that fails
    /// validation is consumed and released at once (its credit returns);
    /// a stamp from neither this lap nor the last takes the ring out of
    /// service.
    ///
    /// # Errors
    /// [`ProtocolError::RingCorrupt`], or what [`FragHeader::check`] finds,
    /// or [`ProtocolError::WrongQueue`] when the trailer names another
    /// sender than the ring's writer.
    pub fn try_take<S: RingStore + ?Sized>(
        &mut self,
        store: &S,
        world: u32,
    ) -> Result<Option<Taken>, ProtocolError> {
        if self.dead {
            return Ok(None);
        }
        let slot = self.geometry.slot_of(self.head);
        // SYNC POINT ring-stamp (acquire side): pairs with the Release store
        // in `publish_trailer` (or with the NIC's in-order placement).
        // (MUTANT RingTakeRelaxed, loom only: Relaxed.)
        let order = mutant::weaken(Mutant::RingTakeRelaxed, Ordering::Acquire);
        let stamp = store.stamp(slot).load(order);
        let want = self.head + 1;
        let last_lap = want.saturating_sub(u64::from(self.geometry.slots));
        // (MUTANT RingTakesLastLap, loom only: a slot's earlier fragment
        // counts as this one, as in a length-flag ring that tests "flag
        // set" without ever clearing it.)
        let stale = mutant::on(Mutant::RingTakesLastLap) && stamp == last_lap && stamp != 0;
        let landed = stamp == want || stale;
        if !landed {
            // Last lap's stamp (0 in a fresh ring): nothing yet.
            if stamp == last_lap {
                return Ok(None);
            }
            self.dead = true;
            return Err(ProtocolError::RingCorrupt {
                src: self.peer,
                head: self.head,
                stamp,
            });
        }
        // Read the trailer body, then validate it.
        let body = store.read_body(slot);
        let pos = self.head;
        self.head += 1;
        let h = &body.header;
        let checked = h
            .check(world, self.geometry.capacity())
            .and(if h.src == self.peer {
                Ok(())
            } else {
                Err(ProtocolError::WrongQueue {
                    src: h.src,
                    queue: self.peer,
                })
            });
        if let Err(e) = checked {
            // Give the slot back now, or as soon as the fragments before it
            // are released (positions are released in order).
            if pos == self.released_pos {
                self.release(pos);
            } else {
                self.refused.push(pos);
            }
            return Err(e);
        }
        Ok(Some(Taken {
            pos,
            body,
            data: store.payload(slot, h.len as usize),
        }))
    }

    /// Check, without taking anything, that the stamp at the head is from
    /// this lap or the last (what an idle reader does now and then: the
    /// empty poll compares with one value only and would wait for ever);
    /// otherwise take the ring out of service.
    ///
    /// # Errors
    /// [`ProtocolError::RingCorrupt`], once.
    pub fn check<S: RingStore + ?Sized>(&mut self, store: &S) -> Result<(), ProtocolError> {
        if self.dead {
            return Ok(());
        }
        // Relaxed: only the value is judged; nothing is read through it.
        let stamp = store
            .stamp(self.geometry.slot_of(self.head))
            .load(Ordering::Relaxed);
        let want = self.head + 1;
        if stamp == want || stamp == want.saturating_sub(u64::from(self.geometry.slots)) {
            return Ok(());
        }
        self.dead = true;
        Err(ProtocolError::RingCorrupt {
            src: self.peer,
            head: self.head,
            stamp,
        })
    }

    /// Give position `pos` back (positions are released in order: the
    /// transport contract's rule 3).
    #[inline]
    pub fn release(&mut self, pos: u64) {
        debug_assert_eq!(pos, self.released_pos, "ring released out of order");
        self.released_pos = pos + 1;
        self.credit.release();
        while self.refused.first() == Some(&self.released_pos) {
            self.refused.remove(0);
            self.released_pos += 1;
            self.credit.release();
        }
    }

    /// The released count to piggyback on a trailer going to the writer,
    /// marking it published (0: nothing new).
    #[inline]
    pub fn piggyback(&mut self) -> u64 {
        self.credit.take_publish().unwrap_or(0)
    }

    /// Whether an explicit credit write is due: half the window is
    /// released and not yet published (or, with `force`, anything is).
    /// Returns the count to write, marking it published.
    ///
    /// Why half is enough to never deadlock: a blocked writer has all
    /// `slots` fragments unreturned; the reader holds at most one of them
    /// unreleased per stalled handler (a partly read fragment), so at
    /// least `slots - 1 >= slots / 2` are released and a write is due.
    #[inline]
    pub fn credit_due(&mut self, force: bool) -> Option<u64> {
        let threshold = if force {
            1
        } else {
            u64::from(self.geometry.slots / 2).max(1)
        };
        if self.credit.unpublished() >= threshold {
            self.credit.take_publish()
        } else {
            None
        }
    }
}

/// The writer's side of one ring: positions and credit.
#[derive(Debug, Clone)]
pub struct RingTx {
    geometry: RingGeometry,
    window: CreditWindow,
}

impl RingTx {
    /// A writer of a fresh ring.
    pub fn new(geometry: RingGeometry) -> Self {
        RingTx {
            geometry,
            window: CreditWindow::new(geometry.slots),
        }
    }

    /// The geometry.
    #[inline]
    pub fn geometry(&self) -> RingGeometry {
        self.geometry
    }

    /// Take the next position if credit allows, re-reading the reader's
    /// returned count through `returned` only when out of credit.
    #[inline]
    pub fn try_reserve(&mut self, returned: impl FnOnce() -> u64) -> Option<u64> {
        if !self.window.try_take() {
            self.window.update(returned());
            if !self.window.try_take() {
                return None;
            }
        }
        Some(self.window.sent() - 1)
    }

    /// Record a returned count that arrived piggybacked on a trailer.
    #[inline]
    pub fn returned(&mut self, count: u64) {
        if count != 0 {
            self.window.update(count);
        }
    }

    /// Whether a position could be reserved with `returned` as the
    /// reader's latest count.
    #[inline]
    pub fn has_credit(&self, returned: u64) -> bool {
        self.window.available() > 0
            || returned > self.window.sent() - u64::from(self.geometry.slots)
    }

    /// The trailer of fragment `pos`.
    #[inline]
    pub fn trailer(&self, pos: u64, header: FragHeader, credit: u64) -> Trailer {
        Trailer {
            body: TrailerBody { header, credit },
            stamp: pos + 1,
        }
    }
}

mod placements;
#[cfg(not(loom))]
mod region;
pub use placements::{Placements, Scan, ScanGate};
#[cfg(not(loom))]
pub use region::RingRegion;

#[cfg(all(test, not(loom)))]
mod tests;
