//! Model 2b: a *dedicated* receive queue — one producer, no atomic
//! read-modify-write, slot and frame reuse ordered by credits alone.
//!
//! Two slots and two frames, a credit window of two, six fragments: every
//! slot is used on three laps and frame 1 carries fragments 1, 3 and 5, exactly
//! as the shared-memory transport does it (position `p` uses slot and frame
//! `p & mask`; even fragments travel inline, odd ones in the frame). The
//! producer takes a credit, re-reading the receiver's [`CreditLine`] only
//! when it has none; the consumer reads the descriptor, the frame, and the
//! descriptor again, then returns the credit (`CreditReturn::release`,
//! `CreditLine::publish`), which is the only thing that tells the producer
//! the slot and the frame are free again.
//!
//! Checked: every fragment arrives once and in order, with its own bytes
//! (no stale lap), the stamps never look corrupt, never more than the
//! window in flight, and — the design argument of dedicated queues — the
//! consumer's reads of a slot and a frame happen before the producer's next
//! writes to them (loom reports a race on the slot's or the frame's cell
//! otherwise).

use crate::frames::LoomFrames;
use fastmsg::internal::flow::{CreditLine, CreditReturn, CreditWindow};
use fastmsg::internal::frame::FragHeader;
use fastmsg::internal::queue::{FrameStore, RecvQueue, Slot, SlotBody, INLINE_BYTES, NO_FRAME};
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

const SLOTS: u64 = 2;
const WINDOW: u32 = 2;
const FRAGMENTS: u64 = 6;
const BYTES: usize = 4;
const NOT_FIFO: &str = "fragment out of order, lost or duplicated";
const STALE: &str = "payload from another fragment";
const OVER_WINDOW: &str = "more fragments in flight than the window";

struct State {
    slots: Vec<Slot>,
    tail: AtomicU64,
    frames: LoomFrames<BYTES>,
    credit: CreditLine,
    /// Fragments taken and not yet released (model bookkeeping: Relaxed
    /// read-modify-writes, which add no happens-before edge).
    in_flight: AtomicU64,
}

fn payload(k: u64) -> u8 {
    0x10 + k as u8
}

fn run() {
    let s = Arc::new(State {
        slots: (0..SLOTS).map(Slot::new).collect(),
        tail: AtomicU64::new(0),
        frames: LoomFrames::new(SLOTS as u32),
        credit: CreditLine::new(),
        in_flight: AtomicU64::new(0),
    });

    let producer = {
        let s = s.clone();
        thread::spawn(move || {
            let q = RecvQueue::new(&s.slots, &s.tail, false);
            let mut window = CreditWindow::new(WINDOW);
            for k in 0..FRAGMENTS {
                // Take a credit; only without one look at the returns.
                while !window.try_take() {
                    window.update(s.credit.read());
                    if window.available() == 0 {
                        thread::yield_now();
                    }
                }
                let n = s.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
                assert!(n <= u64::from(WINDOW), "{OVER_WINDOW}");
                // The queue position is our own fragment count.
                let pos = window.sent() - 1;
                assert_eq!(pos, k);
                let mut body = SlotBody {
                    header: FragHeader {
                        handler: k as u32,
                        len: BYTES as u32,
                        ..FragHeader::default()
                    },
                    frame: NO_FRAME,
                    inline: [0; INLINE_BYTES],
                };
                if k % 2 == 0 {
                    body.inline[..BYTES].fill(payload(k));
                } else {
                    // Frame `pos & mask` goes with slot `pos & mask`.
                    let frame = (pos & (SLOTS - 1)) as u32;
                    s.frames.write(frame, 0, &[payload(k); BYTES]);
                    body.frame = frame;
                }
                q.publish_dedicated(pos, &body);
            }
        })
    };

    let q = RecvQueue::new(&s.slots, &s.tail, false);
    let mut returns = CreditReturn::default();
    for head in 0..FRAGMENTS {
        // As the shm transport does: wait on the head slot's watch (its
        // Acquire load publishes the slot), then read the descriptor without
        // loading the stamp again.
        while !q.watch(head).ready() {
            thread::yield_now();
        }
        let body = q.read_watched(head, |b| *b);
        assert_eq!(u64::from(body.header.handler), head, "{NOT_FIFO}");
        let mut bytes = [0u8; BYTES];
        if body.frame == NO_FRAME {
            bytes.copy_from_slice(&body.inline[..BYTES]);
        } else {
            assert_eq!(u64::from(body.frame), head & (SLOTS - 1), "{STALE}");
            s.frames.read(body.frame, 0, &mut bytes);
        }
        assert_eq!(bytes, [payload(head); BYTES], "{STALE}");
        // The descriptor stays readable until the credit goes back.
        let again = q.try_pop_with(head, |b| *b).expect("stamp looks corrupt");
        assert_eq!(again, Some(body), "{STALE}");
        // Dedicated: recycle is a no-op; the credit gives slot and frame back.
        q.recycle(head);
        s.in_flight.fetch_sub(1, Ordering::Relaxed);
        returns.release();
        s.credit.publish(returns.released());
    }
    producer.join().unwrap();
    assert_eq!(s.credit.read(), FRAGMENTS);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{assert_caught, check, says};
    use fastmsg::internal::mutant::Mutant;

    #[test]
    fn one_producer_credits_three_laps() {
        check(run);
    }

    #[test]
    fn mutant_relaxed_credit_read_is_caught() {
        assert_caught(Mutant::CreditReadRelaxed, &[says::RACE], run);
    }

    #[test]
    fn mutant_relaxed_publish_is_caught() {
        assert_caught(Mutant::PublishRelaxed, &[says::RACE], run);
    }
}
