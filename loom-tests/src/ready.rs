//! Model 9: the TCP wire's readiness word (`fastmsg::internal::ready`):
//! the NIC thread tells the polling rank that a socket became readable or
//! that a ring write was placed; the rank's empty poll loads the word
//! alone, and it sleeps on its doorbell with "is the word set?" as the
//! re-check (as `RmaTransport::has_arrivals` does).
//!
//! Two models, each the shipped `Readiness` and `Doorbell`; under loom the
//! doorbell's sleep has no timeout, so a lost notice leaves the rank
//! asleep for ever (loom: deadlock):
//! - **arrivals**: the socket is a counter behind a lock (the kernel's
//!   receive queue); the NIC thread queues two arrivals, each followed by
//!   `mark_readable` and a ring (an edge-triggered epoll event per
//!   arrival). The rank drains the socket through `drain_readable` when
//!   the word is set (clear-then-drain) and must receive both.
//!   `ReadyDrainBeforeClear` (drain, then clear) loses the second arrival.
//! - **placements**: the NIC thread places two ring writes (a stamp stored
//!   with Release, as `ring::publish_trailer`), each followed by
//!   `mark_placed` and a ring. The rank clears the placed bit with
//!   `take_placed` before it scans the stamps (with Acquire), scans again
//!   while a scan finds one, and must take both. `ReadyPlacedRelaxed` (the
//!   bit set and cleared Relaxed) lets the scan after the clear read a
//!   stale stamp: the rank stops scanning and sleeps with the write placed.

use crate::harness::spawn_with;
use fastmsg::internal::ready::Readiness;
use fastmsg::internal::wake::Doorbell;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::{Arc, Mutex};
use std::mem::ManuallyDrop;
use std::time::Duration;

const ARRIVALS: u64 = 2;

struct Arrivals {
    ready: Readiness,
    bell: Doorbell,
    /// Bytes queued on peer 0's socket.
    socket: Mutex<u64>,
}

fn arrivals() {
    // Released only on a normal return (see `harness::spawn_with`: a
    // deadlock report unwinds this thread, which may hold the last handle).
    let s = ManuallyDrop::new(Arc::new(Arrivals {
        ready: Readiness::new(),
        bell: Doorbell::new(),
        socket: Mutex::new(0),
    }));
    let nic = spawn_with(&s, |s| {
        for _ in 0..ARRIVALS {
            *s.socket.lock().unwrap() += 1;
            s.ready.mark_readable(0);
            s.bell.ring();
        }
    });
    let mut got = 0;
    while got < ARRIVALS {
        if s.ready.get() != 0 {
            got += s.ready.drain_readable(|bits| {
                if Readiness::names(bits, 0) {
                    std::mem::take(&mut *s.socket.lock().unwrap())
                } else {
                    0
                }
            });
            continue;
        }
        s.bell.sleep(Duration::from_secs(1), || s.ready.get() != 0);
    }
    assert_eq!(got, ARRIVALS);
    nic.join().unwrap();
    drop(ManuallyDrop::into_inner(s));
}

const WRITES: usize = 2;

struct Placements {
    ready: Readiness,
    bell: Doorbell,
    /// Per ring write: its stamp (1 once placed).
    stamps: [AtomicU64; WRITES],
}

fn placements() {
    // Released only on a normal return, as in `arrivals`.
    let s = ManuallyDrop::new(Arc::new(Placements {
        ready: Readiness::new(),
        bell: Doorbell::new(),
        stamps: [AtomicU64::new(0), AtomicU64::new(0)],
    }));
    let nic = spawn_with(&s, |s| {
        for stamp in &s.stamps {
            stamp.store(1, Ordering::Release);
            s.ready.mark_placed();
            s.bell.ring();
        }
    });
    let mut taken = 0;
    let mut rescan = true;
    while taken < WRITES {
        if s.ready.get() != 0 {
            s.ready.take_placed();
            rescan = true;
        }
        if rescan {
            if s.stamps[taken].load(Ordering::Acquire) == 1 {
                taken += 1;
                continue;
            }
            rescan = false;
            continue;
        }
        s.bell.sleep(Duration::from_secs(1), || s.ready.get() != 0);
    }
    nic.join().unwrap();
    drop(ManuallyDrop::into_inner(s));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{assert_caught, check, says};
    use fastmsg::internal::mutant::Mutant;

    #[test]
    fn no_lost_arrival() {
        check(arrivals);
    }

    #[test]
    fn no_lost_placement() {
        check(placements);
    }

    #[test]
    fn mutant_drain_before_clear_is_caught() {
        assert_caught(Mutant::ReadyDrainBeforeClear, &[says::DEADLOCK], arrivals);
    }

    #[test]
    fn mutant_placed_relaxed_is_caught() {
        assert_caught(Mutant::ReadyPlacedRelaxed, &[says::DEADLOCK], placements);
    }
}
