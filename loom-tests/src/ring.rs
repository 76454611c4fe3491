//! Model 4: the network transports' end-of-frame length-flag ring
//! ([`fastmsg::internal::ring`]) — single writer, single poller, credits.
//!
//! A ring of four slots (the smallest [`RingGeometry::checked`] allows),
//! so [`RingTx`]'s credit window is four fragments; eight fragments, so
//! every slot carries two laps and the reader meets last lap's stamp (its
//! "nothing yet") on each. Storage is [`LoomRing`], whose payload and
//! trailer-body bytes loom tracks.
//!
//! - The writer is what the TCP transport's send path and its NIC thread
//!   amount to on one machine: [`RingTx::try_reserve`] for a position
//!   (re-reading the credit word only when out of credit), then
//!   [`place`]: payload, trailer body, and the stamp last with Release
//!   ([`fastmsg::internal::ring::publish_trailer`]). Fragment `pos` carries
//!   `len(pos)` bytes derived from `pos` and names `pos` as its handler.
//! - The poller is the real reader: [`RingRx::try_take`] (Acquire on the
//!   stamp, validation of the trailer), waiting on [`RingRx::watch`] after
//!   an empty take, then it reads the payload through the pointer it was
//!   handed, releases the position ([`RingRx::release`]) and returns
//!   credit the way the transport's `flush` does: [`RingRx::credit_due`]
//!   once half the window is released, written to the writer's credit
//!   word. That word stands for the TCP NIC's `CREDIT` record (stored with
//!   Release where it lands) or the verbs backend's inline RDMA write, and
//!   the writer reads it with Acquire, as `TcpTransport::try_reserve` does.
//!   (The other return path, credit piggybacked on trailers of the
//!   opposite ring, needs traffic both ways; [`RingTx::returned`] is a
//!   plain counter update after `try_take`, so this model covers the
//!   synchronisation it relies on: the stamp's.)
//!
//! Checked: the poller never sees a stamp without the trailer body and
//! payload written before it (loom reports the race on the cells, and the
//! bytes are compared with what fragment `pos` carries); every fragment
//! arrives exactly once and in order, none stale or torn; after the last
//! one the next take finds last lap's stamp and nothing else; the writer
//! never has more than the window in flight and never writes a slot the
//! poller still reads (loom reports that race); the credit returned ends
//! equal to what was sent, without a forced write (so the half-window
//! rule alone never leaves the writer waiting).

use crate::harness::spawn_with;
use crate::ring_store::LoomRing;
use fastmsg::internal::frame::{FragFlags, FragHeader};
use fastmsg::internal::ring::{place, RingGeometry, RingRx, RingTx, Taken};
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

const SLOTS: u32 = 4;
/// The smallest slot (64 bytes): 24 payload bytes and the 40-byte trailer.
const SLOT_BYTES: u32 = 64;
const FRAGMENTS: u64 = 8;
/// The ring's writer, in a job of two ranks.
const WRITER: u32 = 1;
const WORLD: u32 = 2;

pub(crate) const NOT_FIFO: &str = "fragment out of order, lost or duplicated";
pub(crate) const STALE: &str = "trailer or payload from another fragment";
pub(crate) const REJECTED: &str = "the reader rejected a trailer the writer wrote";
pub(crate) const OVER_WINDOW: &str = "more fragments in flight than the window";

struct State {
    ring: LoomRing,
    /// The writer's credit word: the reader's released total.
    credit: AtomicU64,
    /// Fragments reserved and not yet released (model bookkeeping: Relaxed
    /// read-modify-writes, which add no happens-before edge).
    in_flight: AtomicU64,
}

fn len_of(pos: u64) -> u32 {
    1 + (pos % 3) as u32
}

/// The bytes fragment `pos` carries (1 to 3, so that a fragment of
/// another lap differs in length as well as in value).
pub(crate) fn payload(pos: u64) -> Vec<u8> {
    vec![0x10 + pos as u8; len_of(pos) as usize]
}

/// The header of fragment `pos` written by rank `src`.
pub(crate) fn header(src: u32, pos: u64) -> FragHeader {
    FragHeader {
        src,
        handler: pos as u32,
        len: len_of(pos),
        flags: (FragFlags::FIRST | FragFlags::LAST).0,
        total: u64::from(len_of(pos)),
    }
}

/// Take the fragment at the reader's head, waiting for it.
pub(crate) fn take(rx: &mut RingRx, ring: &LoomRing, world: u32) -> Taken {
    loop {
        match rx.try_take(ring, world) {
            Ok(Some(t)) => return t,
            // Nothing yet: wait on the stamp word alone, as a transport's
            // empty poll does, then take again.
            Ok(None) => {
                while !rx.watch(ring).ready() {
                    thread::yield_now();
                }
            }
            Err(e) => panic!("{REJECTED}: {e}"),
        }
    }
}

/// Assert that `t` is fragment `head` of rank `src`, whole: its position,
/// its trailer's header, and its payload, read through the pointer
/// `try_take` handed out.
pub(crate) fn expect_fragment(ring: &LoomRing, t: &Taken, src: u32, head: u64) {
    assert_eq!(t.pos, head, "{NOT_FIFO}");
    assert_eq!(t.body.header, header(src, head), "{STALE}");
    assert_eq!(ring.read_taken(t), payload(head), "{STALE}");
}

fn run() {
    let geometry = RingGeometry::checked(SLOTS, SLOT_BYTES).expect("geometry");
    let s = Arc::new(State {
        ring: LoomRing::new(geometry),
        credit: AtomicU64::new(0),
        in_flight: AtomicU64::new(0),
    });

    let writer = spawn_with(&s, move |s| {
        let mut tx = RingTx::new(geometry);
        for k in 0..FRAGMENTS {
            let pos = loop {
                // SYNC POINT credit-return (acquire side), as in
                // `TcpTransport::try_reserve`: pairs with the reader's
                // store below.
                if let Some(pos) = tx.try_reserve(|| s.credit.load(Ordering::Acquire)) {
                    break pos;
                }
                thread::yield_now();
            };
            assert_eq!(pos, k, "{NOT_FIFO}");
            let n = s.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
            assert!(n <= u64::from(SLOTS), "{OVER_WINDOW}");
            // Nothing comes the other way in this model, so nothing to
            // piggyback.
            let t = tx.trailer(pos, header(WRITER, pos), 0);
            place(&s.ring, pos, &t.body, &payload(pos));
        }
    });

    let mut rx = RingRx::new(geometry, WRITER);
    for head in 0..FRAGMENTS {
        let t = take(&mut rx, &s.ring, WORLD);
        expect_fragment(&s.ring, &t, WRITER, head);
        assert_eq!(t.body.credit, 0, "{STALE}");
        s.in_flight.fetch_sub(1, Ordering::Relaxed);
        rx.release(t.pos);
        if let Some(total) = rx.credit_due(false) {
            // SYNC POINT credit-return (release side), as the TCP NIC's
            // store of a CREDIT record: the reads of the released slots
            // happen before the writer's next writes to them.
            s.credit.store(total, Ordering::Release);
        }
    }
    writer.join().unwrap();
    // Every fragment arrived once: the next slot holds last lap's stamp.
    assert!(
        matches!(rx.try_take(&s.ring, WORLD), Ok(None)),
        "{NOT_FIFO}"
    );
    assert!(!rx.watch(&s.ring).ready(), "{NOT_FIFO}");
    // The half-window rule published everything released.
    assert_eq!(rx.credit_due(true), None, "credit left unpublished");
    assert_eq!(s.credit.load(Ordering::Relaxed), FRAGMENTS, "credit lost");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{assert_caught, check, says};
    use fastmsg::internal::mutant::Mutant;

    #[test]
    fn one_writer_one_poller_four_slots_two_laps() {
        check(run);
    }

    #[test]
    fn mutant_relaxed_stamp_store_is_caught() {
        assert_caught(Mutant::RingStampRelaxed, &[says::RACE], run);
    }

    #[test]
    fn mutant_relaxed_stamp_load_is_caught() {
        assert_caught(Mutant::RingTakeRelaxed, &[says::RACE], run);
    }

    #[test]
    fn mutant_last_lap_taken_as_landed_is_caught() {
        assert_caught(Mutant::RingTakesLastLap, &[STALE, says::RACE], run);
    }

    #[test]
    fn mutant_take_one_credit_too_many_is_caught() {
        assert_caught(
            Mutant::CreditTakeOffByOne,
            &[OVER_WINDOW, REJECTED, says::RACE],
            run,
        );
    }
}
