//! The readiness word of the TCP wire: what the NIC thread tells the rank
//! about its sockets, so that the rank's empty poll is one load instead of
//! a system call (`epoll_wait`).
//!
//! The NIC thread (`transport::tcp::nic`) watches every socket of the rank
//! (edge-triggered epoll) and, when one becomes readable, sets that peer's
//! bit ([`Readiness::mark_readable`]); whoever places a ring write (rank or
//! thread) sets [`PLACED`] ([`Readiness::mark_placed`]). The rank:
//! - polls with one load ([`Readiness::get`]): zero means no socket has
//!   anything new and no ring write was placed since its last scan;
//! - drains the sockets whose bits are set *after* clearing them
//!   ([`Readiness::drain_readable`]: clear-then-drain, so an arrival
//!   between the two sets the bit again and is never lost);
//! - clears [`PLACED`] *before* it scans its rings
//!   ([`Readiness::take_placed`]), so a write placed during the scan
//!   leaves the bit set for the next poll.
//!
//! Peers share bits modulo 63 (a set bit drains every peer of its class).
//! This module opens no socket and every atomic goes through
//! `crate::sync`, so `loom-tests/src/ready.rs` runs this very code.

use crate::sync::mutant::{self, Mutant};
use crate::sync::{AtomicU64, Ordering};

/// The bit saying a ring write was placed since the rank's last scan.
pub const PLACED: u64 = 1 << 63;

/// Bits for peers (the rest of the word).
const PEER_BITS: usize = 63;

/// The readiness word. See the module docs.
#[derive(Debug, Default)]
pub struct Readiness {
    word: AtomicU64,
}

impl Readiness {
    /// A word with nothing ready.
    pub fn new() -> Readiness {
        Readiness::default()
    }

    /// Peer `k`'s bit.
    #[inline]
    pub fn bit(k: usize) -> u64 {
        1 << (k % PEER_BITS)
    }

    /// Whether the bits `bits` (from [`drain_readable`](Self::drain_readable))
    /// name peer `k`.
    #[inline]
    pub fn names(bits: u64, k: usize) -> bool {
        bits & Self::bit(k) != 0
    }

    /// NIC thread: peer `k`'s socket became readable (or ended).
    #[inline]
    pub fn mark_readable(&self, k: usize) {
        // SYNC POINT ready-word (release side): what the thread did before
        // (placing, recording a link's end) is visible to the rank whose
        // clear sees the bit; pairs with `drain_readable`.
        self.word.fetch_or(Self::bit(k), Ordering::Release);
    }

    /// Whoever placed a ring write: the rank's next poll scans its rings.
    #[inline]
    pub fn mark_placed(&self) {
        // SYNC POINT ready-placed (release side): the placed write (its
        // bytes, its stamp) is visible to the rank whose clear sees the
        // bit; pairs with `take_placed`.
        // (MUTANT ReadyPlacedRelaxed, loom only: Relaxed.)
        let order = mutant::weaken(Mutant::ReadyPlacedRelaxed, Ordering::Release);
        self.word.fetch_or(PLACED, order);
    }

    /// The poll's one load: zero while nothing is new. A hint: the clears
    /// below synchronise.
    #[inline(always)]
    pub fn get(&self) -> u64 {
        self.word.load(Ordering::Relaxed)
    }

    /// Rank: clear the peers' bits, then `drain(bits)` the peers they
    /// name (clear-then-drain: an arrival after the clear sets its bit
    /// again). [`PLACED`] is left as it is. Returns `drain`'s result.
    #[inline]
    pub fn drain_readable<R>(&self, drain: impl FnOnce(u64) -> R) -> R {
        if mutant::on(Mutant::ReadyDrainBeforeClear) {
            // (MUTANT ReadyDrainBeforeClear, loom only: drain, then clear
            // whatever is set by then — an arrival between is lost.)
            let r = drain(self.word.load(Ordering::Relaxed) & !PLACED);
            // SYNC POINT ready-word (acquire side), as below.
            self.word.fetch_and(PLACED, Ordering::Acquire);
            return r;
        }
        // SYNC POINT ready-word (acquire side): pairs with `mark_readable`.
        let bits = self.word.fetch_and(PLACED, Ordering::Acquire) & !PLACED;
        drain(bits)
    }

    /// Rank: clear [`PLACED`] before scanning the rings; whether it was set.
    #[inline]
    pub fn take_placed(&self) -> bool {
        // SYNC POINT ready-placed (acquire side): pairs with `mark_placed`.
        // (MUTANT ReadyPlacedRelaxed, loom only: Relaxed.)
        let order = mutant::weaken(Mutant::ReadyPlacedRelaxed, Ordering::Acquire);
        self.word.fetch_and(!PLACED, order) & PLACED != 0
    }
}
