//! Model 4b: two network rings, one each way, with credit returned only
//! *piggybacked* on the trailers going the other way (a ping-pong: rank 1
//! sends data, rank 0 answers each fragment).
//!
//! Model 4 ([`crate::ring`]) returns credit through the explicit credit
//! word; here neither side has one (`try_reserve` is given a count of 0,
//! which never adds credit), so the only way a writer learns that its
//! slots are free is the `credit` field of a trailer it takes from the
//! other ring: [`RingRx::piggyback`] when writing, [`RingTx::returned`]
//! after [`RingRx::try_take`], exactly as the TCP and verbs transports do
//! (`commit`, `try_send_inline`, `take`). Both rings have four slots; five
//! fragments each way, so each writer runs out of credit once and slot 0
//! of each ring carries two laps.
//!
//! - Rank 1 (a spawned thread) writes data fragment `k` when it has
//!   credit; without credit it polls its own ring for replies, takes and
//!   releases them and records their piggybacked counts, then tries again.
//!   At the end it drains the remaining replies.
//! - Rank 0 (the model's thread) takes data fragment `k`, records its
//!   piggybacked count, releases it and writes reply `k` carrying its own
//!   released count. It never polls for credit: the data it has taken must
//!   have brought enough (a writer out of credit for data `k` must have
//!   taken reply `k - 4` and so reports it on data `k`).
//!
//! Checked, on both rings: every fragment arrives once, in order, whole
//! (header and payload; loom reports a read racing a write on the cells);
//! a reply carries the count of data fragments released before it; never
//! more in flight than the window; no writer ever waits for ever.

use crate::harness::spawn_with;
use crate::ring::{expect_fragment, header, payload, take, OVER_WINDOW, REJECTED, STALE};
use crate::ring_store::LoomRing;
use fastmsg::internal::ring::{place, RingGeometry, RingRx, RingTx, Taken};
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

const SLOTS: u32 = 4;
const SLOT_BYTES: u32 = 64;
/// Fragments each way.
const FRAGMENTS: u64 = 5;
const DATA: u32 = 1;
const REPLY: u32 = 0;
const WORLD: u32 = 2;

const NO_CREDIT: &str = "piggybacked credit did not come back";
const PIGGYBACK: &str = "a trailer's piggybacked credit is not the released count";

struct State {
    /// Rank 0's ring, written by rank 1.
    to_0: LoomRing,
    /// Rank 1's ring, written by rank 0.
    to_1: LoomRing,
    /// Fragments reserved and not yet released, per ring (model
    /// bookkeeping: Relaxed read-modify-writes).
    in_flight_0: AtomicU64,
    in_flight_1: AtomicU64,
}

fn reserved(in_flight: &AtomicU64) {
    let n = in_flight.fetch_add(1, Ordering::Relaxed) + 1;
    assert!(n <= u64::from(SLOTS), "{OVER_WINDOW}");
}

fn run() {
    let geometry = RingGeometry::checked(SLOTS, SLOT_BYTES).expect("geometry");
    let s = Arc::new(State {
        to_0: LoomRing::new(geometry),
        to_1: LoomRing::new(geometry),
        in_flight_0: AtomicU64::new(0),
        in_flight_1: AtomicU64::new(0),
    });

    let rank1 = spawn_with(&s, move |s| {
        let mut tx = RingTx::new(geometry);
        let mut rx = RingRx::new(geometry, REPLY);
        let mut replies = 0;
        // Take reply `replies`: check it, record its credit, release it.
        let absorb = |rx: &mut RingRx, tx: &mut RingTx, replies: &mut u64, t: Taken| {
            expect_fragment(&s.to_1, &t, REPLY, *replies);
            // Rank 0 released data 0..=k before writing reply k.
            assert_eq!(t.body.credit, t.pos + 1, "{PIGGYBACK}");
            tx.returned(t.body.credit);
            s.in_flight_1.fetch_sub(1, Ordering::Relaxed);
            rx.release(t.pos);
            *replies += 1;
        };
        for k in 0..FRAGMENTS {
            let pos = loop {
                // No credit word: only replies bring credit back.
                if let Some(pos) = tx.try_reserve(|| 0) {
                    break pos;
                }
                match rx.try_take(&s.to_1, WORLD) {
                    Ok(Some(t)) => absorb(&mut rx, &mut tx, &mut replies, t),
                    Ok(None) => thread::yield_now(),
                    Err(e) => panic!("{REJECTED}: {e}"),
                }
            };
            assert_eq!(pos, k, "{STALE}");
            reserved(&s.in_flight_0);
            let t = tx.trailer(pos, header(DATA, pos), rx.piggyback());
            place(&s.to_0, pos, &t.body, &payload(pos));
        }
        while replies < FRAGMENTS {
            let t = take(&mut rx, &s.to_1, WORLD);
            absorb(&mut rx, &mut tx, &mut replies, t);
        }
        assert!(matches!(rx.try_take(&s.to_1, WORLD), Ok(None)), "{STALE}");
    });

    let mut tx = RingTx::new(geometry);
    let mut rx = RingRx::new(geometry, DATA);
    let mut credit_seen = 0;
    for k in 0..FRAGMENTS {
        let t = take(&mut rx, &s.to_0, WORLD);
        expect_fragment(&s.to_0, &t, DATA, k);
        // Counts only grow; 0 means nothing new.
        assert!(
            t.body.credit == 0 || t.body.credit > credit_seen,
            "{PIGGYBACK}"
        );
        credit_seen = credit_seen.max(t.body.credit);
        tx.returned(t.body.credit);
        s.in_flight_0.fetch_sub(1, Ordering::Relaxed);
        rx.release(t.pos);
        let pos = tx.try_reserve(|| 0).expect(NO_CREDIT);
        reserved(&s.in_flight_1);
        let t = tx.trailer(pos, header(REPLY, pos), rx.piggyback());
        place(&s.to_1, pos, &t.body, &payload(pos));
    }
    rank1.join().unwrap();
    assert!(matches!(rx.try_take(&s.to_0, WORLD), Ok(None)), "{STALE}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{assert_caught, check, says};
    use fastmsg::internal::mutant::Mutant;

    #[test]
    fn two_rings_piggybacked_credit() {
        check(run);
    }

    #[test]
    fn mutant_relaxed_stamp_store_is_caught() {
        assert_caught(Mutant::RingStampRelaxed, &[says::RACE], run);
    }

    #[test]
    fn mutant_stale_piggybacked_count_is_caught() {
        assert_caught(Mutant::CreditPublishStale, &[PIGGYBACK, NO_CREDIT], run);
    }
}
