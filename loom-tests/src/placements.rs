//! Model 9: the placement count of a wire that places ring writes itself
//! ([`fastmsg::internal::ring::Placements`], [`ScanGate`]), which lets the
//! TCP transport's poll skip its rings while nothing was placed.
//!
//! - **Two placers, one poll.** The rank's own progress and its NIC thread
//!   each apply one ring write on a different connection (as
//!   `transport::tcp::nic` does, under each connection's lock): the
//!   trailer's stamp stored with Release (as `ring::publish_trailer`),
//!   counted after with [`Placements::count_after`]. The rank polls twice
//!   meanwhile as `RmaTransport::poll` does — the count loaded first, the
//!   rings scanned only when [`ScanGate::begin`] lets a scan through, the stamps loaded with
//!   Acquire (as its `landed`), one fragment taken per poll, a scan that
//!   finds nothing recorded with [`ScanGate::found_empty`] — then, after the
//!   joins, until a poll takes nothing. Checked: both fragments are taken
//!   (a count seen before the stamp it follows would record an empty scan
//!   at a count that never moves again, and the fragment would wait for
//!   ever).

use crate::harness::spawn_with;
use fastmsg::internal::ring::{Placements, ScanGate};
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;

pub(crate) const LOST: &str = "a placed fragment was never taken: the poll skips its ring";

struct Rings {
    placements: Placements,
    /// Each ring's next stamp (1: the fragment is there).
    stamps: [AtomicU64; 2],
}

/// One placer: publish ring `i`'s trailer, then count it.
fn place(r: &Rings, i: usize) {
    r.placements.count_after(|| {
        r.stamps[i].store(1, Ordering::Release);
        ((), true)
    });
}

/// One poll; whether it took a fragment.
fn poll(r: &Rings, gate: &ScanGate, taken: &mut [bool; 2]) -> bool {
    let Some(scan) = gate.begin(Some(r.placements.mark())) else {
        return false;
    };
    for (stamp, took) in r.stamps.iter().zip(taken.iter_mut()) {
        if !*took && stamp.load(Ordering::Acquire) == 1 {
            *took = true;
            return true;
        }
    }
    gate.found_empty(scan);
    false
}

fn two_placers_one_poll() {
    let rings = Arc::new(Rings {
        placements: Placements::new(),
        stamps: [AtomicU64::new(0), AtomicU64::new(0)],
    });
    let a = spawn_with(&rings, |r| place(r, 0));
    let b = spawn_with(&rings, |r| place(r, 1));
    let gate = ScanGate::new();
    let mut taken = [false; 2];
    poll(&rings, &gate, &mut taken);
    poll(&rings, &gate, &mut taken);
    a.join().unwrap();
    b.join().unwrap();
    for _ in 0..3 {
        if !poll(&rings, &gate, &mut taken) {
            break;
        }
    }
    assert_eq!(taken, [true, true], "{LOST}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{assert_caught, check};
    use fastmsg::internal::mutant::Mutant;

    #[test]
    fn every_placed_fragment_is_taken() {
        check(two_placers_one_poll);
    }

    #[test]
    fn mutant_relaxed_count_is_caught() {
        assert_caught(Mutant::PlacementCountRelaxed, &[LOST], two_placers_one_poll);
    }

    #[test]
    fn mutant_count_before_placement_is_caught() {
        assert_caught(Mutant::PlacementCountedFirst, &[LOST], two_placers_one_poll);
    }
}
