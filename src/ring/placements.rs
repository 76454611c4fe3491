//! Skipping the rings of a wire that places ring writes itself.
//!
//! On RDMA the adapter writes a peer's fragments into our rings at any
//! time, so the poll must look at every connected ring's stamp on every
//! call. The TCP wire is different: a ring write lands only when someone
//! on this host applies it — the rank in its progress, or its NIC thread
//! (`transport::tcp::nic`). Such a placer counts its placements
//! ([`Placements::count_after`]: after the trailers it published), and the
//! poll ([`ScanGate::begin`]) skips the rings while the count is where it stood
//! when a scan last found them all empty: an empty poll costs one load
//! however many peers are connected, not one per ring.
//!
//! The protocol (model 9, `loom-tests/src/placements.rs`):
//! - placer: publish trailers (stamp last, Release), *then* count (a
//!   Release read-modify-write: two placers may count at once);
//! - poller: load the count (Acquire) *before* scanning; a scan that finds
//!   nothing records that count ([`ScanGate::found_empty`]); a later poll
//!   scans again only when the count moved. A trailer published before a
//!   count the poller saw is visible to its scan (the count's Release and
//!   Acquire order it); one published after moves the count again.
//! - Anything that changes the rings besides a placement (a ring that
//!   joins the poll) calls [`ScanGate::reset`].

use crate::sync::mutant::{self, Mutant};
use crate::sync::{AtomicU64, Ordering};
use std::cell::Cell;

/// The placement count of one rank's rings (shared by its placers and its
/// poll).
#[derive(Debug, Default)]
pub struct Placements {
    count: AtomicU64,
}

impl Placements {
    /// No placement yet.
    pub fn new() -> Placements {
        Placements::default()
    }

    /// Placer: run `place`, which returns what it did and whether it
    /// published any ring trailer; if it did, count it — after, so that a
    /// poll that sees the count sees the trailers.
    #[inline]
    pub fn count_after<R>(&self, place: impl FnOnce() -> (R, bool)) -> R {
        if mutant::on(Mutant::PlacementCountedFirst) {
            // SYNC POINT ring-placed (release side), as below (the mutant:
            // counted before the placement).
            self.count.fetch_add(1, Ordering::Release);
            return place().0;
        }
        let (r, published) = place();
        if published {
            // SYNC POINT ring-placed (release side): every trailer published
            // before is visible to whoever Acquire-loads this count or a
            // later one.
            let order = mutant::weaken(Mutant::PlacementCountRelaxed, Ordering::Release);
            self.count.fetch_add(1, order);
        }
        r
    }

    /// Poller: the count now.
    #[inline]
    pub fn mark(&self) -> u64 {
        // SYNC POINT ring-placed (acquire side): pairs with `count_after`.
        self.count.load(Ordering::Acquire)
    }
}

/// The poll's memory of its last empty scan.
#[derive(Debug)]
pub struct ScanGate {
    /// The count at which a scan found every ring empty (`u64::MAX`: none).
    empty_at: Cell<u64>,
}

impl Default for ScanGate {
    fn default() -> Self {
        ScanGate {
            empty_at: Cell::new(u64::MAX),
        }
    }
}

/// A scan the gate let through, with the count loaded before it (`None`:
/// the wire counts nothing).
#[derive(Clone, Copy, Debug)]
#[must_use = "a scan that finds nothing tells the gate (`ScanGate::found_empty`)"]
pub struct Scan {
    mark: Option<u64>,
}

impl ScanGate {
    /// Scan at the first poll.
    pub fn new() -> ScanGate {
        ScanGate::default()
    }

    /// Before a scan, the count being `mark` (loaded before the scan;
    /// `None` where the wire counts nothing: always scan): the scan to
    /// make, or `None` while nothing was placed since a scan found every
    /// ring empty.
    #[inline]
    pub fn begin(&self, mark: Option<u64>) -> Option<Scan> {
        match mark {
            Some(m) if m == self.empty_at.get() => None,
            _ => Some(Scan { mark }),
        }
    }

    /// `scan` found every ring empty.
    #[inline]
    pub fn found_empty(&self, scan: Scan) {
        if let Some(m) = scan.mark {
            self.empty_at.set(m);
        }
    }

    /// The rings changed otherwise (one joined the poll): scan next time.
    pub fn reset(&self) {
        self.empty_at.set(u64::MAX);
    }
}
