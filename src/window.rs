//! One-sided windows: memory each rank exposes for other ranks to write
//! into with `put` / `put_u64`, without a handler running on the target —
//! what flag-based barriers (VIA-BARRIER) and put/get layers need.
//!
//! Every rank registers the same windows, by name and size, before start
//! (checked with the handler tables). A rank's windows live in the host's
//! shared segment, so a peer on the same host writes them directly; a
//! network transport applies remote puts to the same memory. A window is
//! addressed by its [`WindowId`] and a byte offset; 8-byte words written
//! with `put_u64` and read with `read_u64` are atomic (Release / Acquire),
//! so a flag written after data makes the data visible to whoever sees
//! the flag.
//!
//! A window may be registered owner-only: then only the rank it belongs
//! to writes its own area (its handlers apply the updates other ranks
//! send it), which lets it update words with a plain load and a Release
//! store ([`update_word_unshared`]) instead of a locked instruction.
//! The property is part of the table every rank compares at start, and a
//! write by another rank — `put`, `put_u64`, a direct `update_u64` — is
//! refused as [`PutError::OwnerOnly`]; reads stay allowed. Checking at
//! the writer is enough: every rank holds the same table.
//!
//! The word protocol is [`store_word`] / [`load_word`], over any
//! [`WindowMemory`]: the rank's area in the shared segment, written by a
//! peer on this host or by the TCP NIC, or, under `--cfg loom`, the model
//! memory of `loom-tests/src/window.rs`, which runs these functions.

#![allow(unsafe_code)]
// Under loom only the word protocol is used (the tables and the raw area
// belong to the endpoint, which loom builds leave out).
#![cfg_attr(loom, allow(dead_code))]

use crate::error::PutError;
use crate::id::{Rank, WindowId};
use crate::sync::mutant::{self, Mutant};
use crate::sync::{AtomicU64, Ordering};

/// A registered window: name, offset in the rank's window area, size,
/// and whether only its owner writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WindowSpec {
    pub(crate) name: String,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    pub(crate) owner_only: bool,
}

/// The windows registered before start, in id order.
#[derive(Clone, Debug, Default)]
pub(crate) struct WindowTable {
    specs: Vec<WindowSpec>,
    bytes: u64,
}

impl WindowTable {
    /// Add a window of `len` bytes (rounded up to a cache line), written
    /// only by its owner when `owner_only`. Sizes add up saturating: a
    /// total past what a segment holds is refused by its layout at start,
    /// as a typed error, never an overflow here.
    pub(crate) fn register(&mut self, name: &str, len: usize, owner_only: bool) -> WindowId {
        let id = WindowId(self.specs.len() as u32);
        let len = len as u64;
        self.specs.push(WindowSpec {
            name: name.to_owned(),
            offset: self.bytes,
            len,
            owner_only,
        });
        self.bytes = self
            .bytes
            .saturating_add(len.div_ceil(64).saturating_mul(64));
        id
    }

    /// Bytes of every window together (a multiple of 64).
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Names, sizes and who writes each, for the cross-rank table check.
    pub(crate) fn describe(&self) -> Vec<String> {
        self.specs
            .iter()
            .map(|s| {
                let writers = if s.owner_only {
                    "written by its owner only"
                } else {
                    "written by every rank"
                };
                format!("window {:?} of {} bytes, {writers}", s.name, s.len)
            })
            .collect()
    }

    /// The window `id`'s registration.
    fn spec(&self, id: WindowId) -> Result<&WindowSpec, PutError> {
        self.specs
            .get(id.0 as usize)
            .ok_or(PutError::UnknownWindow {
                id: id.0,
                registered: self.specs.len() as u32,
            })
    }

    /// Whether `writer` may write window `id` of `dest`: any rank, unless
    /// the window is owner-only and `dest` is not `writer`.
    ///
    /// # Errors
    /// [`PutError::UnknownWindow`], [`PutError::OwnerOnly`].
    pub(crate) fn check_writer(
        &self,
        id: WindowId,
        writer: Rank,
        dest: Rank,
    ) -> Result<(), PutError> {
        let s = self.spec(id)?;
        if s.owner_only && writer != dest {
            return Err(PutError::OwnerOnly {
                window: s.name.clone(),
                owner: dest,
            });
        }
        Ok(())
    }

    /// Whether window `id` is owner-only (its owner may update its words
    /// as their only writer).
    ///
    /// # Errors
    /// [`PutError::UnknownWindow`], [`PutError::NotOwnerOnly`].
    pub(crate) fn check_owner_only(&self, id: WindowId) -> Result<(), PutError> {
        let s = self.spec(id)?;
        if !s.owner_only {
            return Err(PutError::NotOwnerOnly {
                window: s.name.clone(),
            });
        }
        Ok(())
    }

    /// Resolve `(id, offset, len)` to an offset in the window area.
    pub(crate) fn locate(&self, id: WindowId, offset: usize, len: usize) -> Result<u64, PutError> {
        let s = self.spec(id)?;
        let end = (offset as u64).checked_add(len as u64);
        if end.is_none_or(|e| e > s.len) {
            return Err(PutError::OutOfBounds {
                window: s.name.clone(),
                offset,
                len,
                size: s.len,
            });
        }
        Ok(s.offset + offset as u64)
    }

    /// Bytes of window `id`.
    pub(crate) fn len_of(&self, id: WindowId) -> Result<usize, PutError> {
        self.spec(id).map(|s| s.len as usize)
    }

    /// The name window `id` was registered with.
    pub(crate) fn name_of(&self, id: WindowId) -> Result<String, PutError> {
        self.spec(id).map(|s| s.name.clone())
    }

    /// As `locate`, for an aligned 8-byte word.
    pub(crate) fn locate_word(&self, id: WindowId, offset: usize) -> Result<u64, PutError> {
        let at = self.locate(id, offset, 8)?;
        if at % 8 != 0 {
            return Err(PutError::Misaligned { offset });
        }
        Ok(at)
    }
}

/// Memory that holds a window area: 8-byte words reached atomically, the
/// rest as bytes.
pub trait WindowMemory {
    /// The aligned 8-byte word at byte `at`.
    fn word(&self, at: u64) -> &AtomicU64;
    /// Copy `data` to byte `at`.
    fn copy_in(&self, at: u64, data: &[u8]);
    /// Copy the bytes at `at` into `buf`.
    fn copy_out(&self, at: u64, buf: &mut [u8]);
}

/// Release-store `v` in the word at `at` (`put_u64` lands here).
pub fn store_word<M: WindowMemory + ?Sized>(mem: &M, at: u64, v: u64) {
    // SYNC POINT window-word (release side): earlier writes (a `put`'s
    // data) are visible to whoever Acquire-loads this word (`load_word`).
    let order = mutant::weaken(Mutant::WindowStoreRelaxed, Ordering::Release);
    mem.word(at).store(v, order);
}

/// Acquire-load the word at `at` (`read_u64`).
pub fn load_word<M: WindowMemory + ?Sized>(mem: &M, at: u64) -> u64 {
    // SYNC POINT window-word (acquire side): pairs with `store_word`.
    let order = mutant::weaken(Mutant::WindowLoadRelaxed, Ordering::Acquire);
    mem.word(at).load(order)
}

/// A read-modify-write of one aligned 8-byte window word (a remote
/// atomic). Every form returns the word's previous value.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum WordOp {
    /// Add (wrapping) to the word as a `u64`.
    FetchAdd(u64),
    /// Store a new value.
    Swap(u64),
    /// Store `new` if the word holds `current` (the previous value says
    /// whether it did: it equals `current`).
    CompareSwap {
        /// The value the word must hold.
        current: u64,
        /// The value stored if it does.
        new: u64,
    },
    /// Add to the word as an `f64` (its bits; a compare-and-swap loop).
    AddF64(f64),
}

/// Apply `op` to the word at `at` atomically; the word's previous value.
pub fn update_word<M: WindowMemory + ?Sized>(mem: &M, at: u64, op: WordOp) -> u64 {
    let w = mem.word(at);
    // SYNC POINT window-word (release side): an update publishes what this
    // rank wrote before it, like `store_word`. SYNC POINT window-word
    // (acquire side): and sees what the word's earlier writers published.
    let order = Ordering::AcqRel;
    match op {
        WordOp::FetchAdd(v) => w.fetch_add(v, order),
        WordOp::Swap(v) => w.swap(v, order),
        WordOp::CompareSwap { current, new } => w
            // SYNC POINT window-word, in `update_word` above (a failed
            // compare only reads: Acquire).
            .compare_exchange(current, new, order, Ordering::Acquire)
            .unwrap_or_else(|held| held),
        WordOp::AddF64(_) => {
            // SYNC POINT window-word, in `update_word` above (the loop's
            // first read; the exchange publishes).
            let mut old = w.load(Ordering::Acquire);
            loop {
                let new = next_value(op, old);
                // SYNC POINT window-word, in `update_word` above.
                match w.compare_exchange_weak(old, new, order, Ordering::Acquire) {
                    Ok(prev) => return prev,
                    Err(held) => old = held,
                }
            }
        }
    }
}

/// The value `op` leaves in a word that held `old` (what [`update_word`]
/// and [`update_word_unshared`] store).
#[inline]
pub(crate) fn next_value(op: WordOp, old: u64) -> u64 {
    match op {
        WordOp::FetchAdd(v) => old.wrapping_add(v),
        WordOp::Swap(v) => v,
        WordOp::CompareSwap { current, new } if old == current => new,
        WordOp::CompareSwap { .. } => old,
        WordOp::AddF64(x) => (f64::from_bits(old) + x).to_bits(),
    }
}

/// Apply `op` to the word at `at` for its only writer: a load and a
/// Release store, no locked instruction; the word's previous value.
/// Readers see the old or the new word whole, never a torn one, but an
/// update another writer makes meanwhile would be lost: only for words
/// that one rank alone updates (an owner applying the updates it is sent).
pub(crate) fn update_word_unshared<M: WindowMemory + ?Sized>(mem: &M, at: u64, op: WordOp) -> u64 {
    let w = mem.word(at);
    // The only writer reads its own last store: no ordering needed.
    let old = w.load(Ordering::Relaxed);
    // SYNC POINT window-word (release side): as `store_word`, pairs with
    // `load_word`.
    w.store(next_value(op, old), Ordering::Release);
    old
}

/// A rank's window area in memory (its own, or a peer's on this host).
#[cfg(not(loom))]
#[derive(Clone, Copy, Debug)]
pub(crate) struct WindowArea {
    base: *mut u8,
    len: u64,
}

#[cfg(not(loom))]
impl WindowArea {
    /// An area of `len` bytes at `base`.
    ///
    /// # Safety
    /// `base` must be valid for reads and writes of `len` bytes, 8-byte
    /// aligned, for as long as the area is used; other writers must only
    /// use 8-byte atomics on the words this area accesses atomically.
    pub(crate) unsafe fn new(base: *mut u8, len: u64) -> Self {
        WindowArea { base, len }
    }

    /// Base address and length (for a network transport that places
    /// remote puts into this area).
    pub(crate) fn raw(&self) -> (*mut u8, u64) {
        (self.base, self.len)
    }

    /// Acquire-load the word at `at` ([`load_word`]).
    pub(crate) fn load_u64(&self, at: u64) -> u64 {
        load_word(self, at)
    }

    /// Release-store `v` at `at` ([`store_word`]).
    pub(crate) fn store_u64(&self, at: u64, v: u64) {
        store_word(self, at, v)
    }

    /// Apply `op` atomically to the word at `at` ([`update_word`]).
    pub(crate) fn update_u64(&self, at: u64, op: WordOp) -> u64 {
        update_word(self, at, op)
    }

    /// Apply `op` to the word at `at` as its only writer
    /// ([`update_word_unshared`]).
    pub(crate) fn update_u64_unshared(&self, at: u64, op: WordOp) -> u64 {
        update_word_unshared(self, at, op)
    }

    /// Ask the CPU to bring the line of byte `at` into the cache (a hint:
    /// no architectural read, cannot fault; nothing on other targets). A
    /// locked update waits for earlier loads, not for prefetches, so
    /// updates issued after prefetches of their words find them cached
    /// instead of paying their misses one after another.
    #[inline(always)]
    pub(crate) fn prefetch(&self, at: u64) {
        #[cfg(target_arch = "x86_64")]
        if at < self.len {
            // SAFETY: `at` is inside the area (checked above), so the
            // address is in bounds of the mapping `new` was given; a
            // prefetch has no architectural effect.
            unsafe {
                use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>(self.base.add(at as usize) as *const i8);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = at;
    }

    /// Copy `data` to `at`.
    pub(crate) fn write(&self, at: u64, data: &[u8]) {
        self.copy_in(at, data)
    }

    /// Copy bytes at `at` into `buf`.
    pub(crate) fn read(&self, at: u64, buf: &mut [u8]) {
        self.copy_out(at, buf)
    }
}

/// A window area together with the owner of its memory, which the view
/// keeps alive: what a network transport holds to place remote puts into
/// a rank's area (the owner is the host's segment mapping), so the area
/// stays valid for as long as any holder needs it, whatever is dropped
/// first.
#[cfg(not(loom))]
#[derive(Clone)]
pub(crate) struct WindowView {
    area: WindowArea,
    _owner: std::sync::Arc<dyn Send + Sync>,
}

#[cfg(not(loom))]
impl WindowView {
    /// The area of `len` bytes at `base`, inside memory kept by `owner`.
    ///
    /// # Safety
    /// `base` must be valid for reads and writes of `len` bytes, 8-byte
    /// aligned, for as long as `owner` lives; other writers must only use
    /// 8-byte atomics on the words the area accesses atomically.
    pub(crate) unsafe fn new(
        owner: std::sync::Arc<dyn Send + Sync>,
        base: *mut u8,
        len: u64,
    ) -> Self {
        WindowView {
            // SAFETY: the caller's promise, for as long as `owner` lives,
            // and the view holds it.
            area: unsafe { WindowArea::new(base, len) },
            _owner: owner,
        }
    }
}

#[cfg(not(loom))]
impl std::ops::Deref for WindowView {
    type Target = WindowArea;
    #[inline(always)]
    fn deref(&self) -> &WindowArea {
        &self.area
    }
}

/// One rank's window as 8-byte words, resolved once
/// ([`Ctx::window_words`](crate::Ctx::window_words)): a read or a prefetch
/// of word `i` is then an address computation and one access, without the
/// per-call look-ups of [`Ctx::get_u64`](crate::Ctx::get_u64) — for a
/// library that issues many reads to the same ranks and overlaps their
/// cache misses (prefetch now, read a few items later). It keeps the
/// memory mapped (it stays valid after the endpoint is dropped) but does
/// not follow the owner's health: a rank that has failed leaves its last
/// words behind, so ask [`Ctx::is_gone`](crate::Ctx::is_gone) before
/// taking a value as the owner's. Cheap to clone (a reference count).
#[cfg(not(loom))]
#[derive(Clone, Debug)]
pub struct WindowWords {
    view: WindowView,
    /// Byte offset of the window in the rank's area.
    base: u64,
    /// Words in the window.
    words: u64,
    rank: Rank,
}

#[cfg(not(loom))]
impl WindowWords {
    /// The words of the window at byte `base` of `view`, `len` bytes long,
    /// belonging to `rank` (`base` 8-byte aligned, inside the area).
    pub(crate) fn new(view: WindowView, base: u64, len: u64, rank: Rank) -> Self {
        debug_assert!(base % 8 == 0 && base + len <= view.len);
        WindowWords {
            view,
            base,
            words: len / 8,
            rank,
        }
    }

    /// The rank whose window this is.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// Words in the window.
    pub fn words(&self) -> u64 {
        self.words
    }

    /// Acquire-load word `index` (as
    /// [`Ctx::get_u64`](crate::Ctx::get_u64) at offset `8 × index`);
    /// `None` past the window.
    #[inline]
    pub fn load(&self, index: u64) -> Option<u64> {
        (index < self.words).then(|| load_word(&*self.view, self.base + index * 8))
    }

    /// A hint that word `index` is about to be read: the CPU starts
    /// bringing its cache line in. No effect past the window.
    #[inline]
    pub fn prefetch(&self, index: u64) {
        if index < self.words {
            self.view.prefetch(self.base + index * 8);
        }
    }
}

#[cfg(not(loom))]
impl std::fmt::Debug for WindowView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowView")
            .field("area", &self.area)
            .finish_non_exhaustive()
    }
}

// SAFETY: the area's words are reached with 8-byte atomics and its bytes by
// copies that the window protocol orders, from any thread (and process);
// the owner is `Send + Sync` and held by the view.
#[cfg(not(loom))]
unsafe impl Send for WindowView {}
// SAFETY: as above.
#[cfg(not(loom))]
unsafe impl Sync for WindowView {}

#[cfg(not(loom))]
impl WindowMemory for WindowArea {
    #[inline]
    fn word(&self, at: u64) -> &AtomicU64 {
        assert!(
            at % 8 == 0 && at + 8 <= self.len,
            "window word {at} out of the area"
        );
        // SAFETY: in bounds and aligned (asserted; `base` is aligned per
        // `new`); the memory is valid for the area's lifetime.
        unsafe { AtomicU64::from_ptr(self.base.add(at as usize) as *mut u64) }
    }

    fn copy_in(&self, at: u64, data: &[u8]) {
        assert!(
            at + data.len() as u64 <= self.len,
            "window write out of the area"
        );
        // SAFETY: in bounds (asserted); the area is valid for writes.
        unsafe {
            core::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(at as usize), data.len())
        }
    }

    fn copy_out(&self, at: u64, buf: &mut [u8]) {
        assert!(
            at + buf.len() as u64 <= self.len,
            "window read out of the area"
        );
        // SAFETY: in bounds (asserted); the area is valid for reads.
        unsafe {
            core::ptr::copy_nonoverlapping(self.base.add(at as usize), buf.as_mut_ptr(), buf.len())
        }
    }
}

/// Check a put's destination.
pub(crate) fn check_dest(dest: Rank, size: u32) -> Result<(), PutError> {
    if dest.0 >= size {
        Err(PutError::BadDestination { dest, size })
    } else {
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Whether a window is owner-only is part of its description (so the
    /// start check compares it) and decides who may write it.
    #[test]
    fn an_owner_only_window_is_described_and_written_by_its_owner_alone() {
        let mut t = WindowTable::default();
        let shared = t.register("w", 64, false);
        let own = t.register("w", 64, true);
        let d = t.describe();
        assert_ne!(d[0], d[1], "the description says which is owner-only");
        assert!(t.check_writer(shared, Rank(0), Rank(1)).is_ok());
        assert!(t.check_writer(own, Rank(1), Rank(1)).is_ok());
        assert_eq!(
            t.check_writer(own, Rank(0), Rank(1)),
            Err(PutError::OwnerOnly {
                window: "w".into(),
                owner: Rank(1)
            })
        );
        assert_eq!(
            t.check_owner_only(shared),
            Err(PutError::NotOwnerOnly { window: "w".into() })
        );
        assert!(t.check_owner_only(own).is_ok());
        assert!(matches!(
            t.check_writer(WindowId(2), Rank(0), Rank(0)),
            Err(PutError::UnknownWindow {
                id: 2,
                registered: 2
            })
        ));
    }

    /// `update_word` and `update_word_unshared` leave the value
    /// `next_value` gives, for every form.
    #[test]
    fn window_word_updates_leave_next_value() {
        struct Words([AtomicU64; 1]);
        impl WindowMemory for Words {
            fn word(&self, at: u64) -> &AtomicU64 {
                &self.0[at as usize / 8]
            }
            fn copy_in(&self, _at: u64, _data: &[u8]) {}
            fn copy_out(&self, _at: u64, _buf: &mut [u8]) {}
        }
        let one = 1.5f64.to_bits();
        let ops = [
            WordOp::FetchAdd(3),
            WordOp::Swap(9),
            WordOp::CompareSwap {
                current: one,
                new: 4,
            },
            WordOp::CompareSwap { current: 0, new: 4 },
            WordOp::AddF64(0.25),
        ];
        for op in ops {
            let want = next_value(op, one);
            for unshared in [false, true] {
                let m = Words([AtomicU64::new(one)]);
                let prev = if unshared {
                    update_word_unshared(&m, 0, op)
                } else {
                    update_word(&m, 0, op)
                };
                assert_eq!(prev, one, "{op:?}");
                assert_eq!(load_word(&m, 0), want, "{op:?} unshared={unshared}");
            }
        }
        assert_eq!(next_value(WordOp::AddF64(0.25), one), 1.75f64.to_bits());
    }
}
