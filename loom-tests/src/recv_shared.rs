//! Model 2a: a *shared* receive queue — several producers, the seed's
//! fetch-and-increment on the tail and a Vyukov recycle stamp per slot.
//!
//! The consumer polls the way the transport does (a
//! [`Watch`](fastmsg::internal::queue::Watch) on the head slot, then `read_watched`),
//! reads the descriptor a second time before giving the slot back (the
//! transport leaves inline payloads in the slot until the handler is done),
//! and only then recycles. Two slots, so every slot serves two laps.
//!
//! Two configurations:
//!
//! - [`next_lap`]: the consumer's thread first fills both slots as a
//!   producer that then leaves, and a second producer publishes the next
//!   lap into them: each of its writes must wait for the recycle of an
//!   entry another producer wrote and the consumer is reading (SYNC POINT
//!   rq-recycle), and each of its entries must be seen whole (SYNC POINT
//!   rq-publish). Two threads, explored at the suite's preemption bound.
//! - [`two_producers`]: two producers racing for positions
//!   (fetch-and-increment) and slots, two entries each. Three threads that
//!   may all wait on one another; explored at preemption bound 1 (see
//!   [`two_producers`] for why).
//!
//! Checked: every entry arrives exactly once, the entries of one producer
//! arrive in the order sent, no entry is stale or torn (the inline bytes
//! match the header), the stamps never look corrupt, and no slot is written
//! while its previous entry is being read (loom reports the race).

use fastmsg::internal::frame::FragHeader;
use fastmsg::internal::queue::{RecvQueue, Slot, SlotBody, INLINE_BYTES, NO_FRAME};
use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use loom::thread;

const SLOTS: u64 = 2;
const NOT_FIFO: &str = "entry out of order, lost or duplicated";
const TORN: &str = "descriptor torn or stale";

struct State {
    slots: Vec<Slot>,
    tail: AtomicU64,
}

impl State {
    fn new() -> Arc<State> {
        Arc::new(State {
            slots: (0..SLOTS).map(Slot::new).collect(),
            tail: AtomicU64::new(0),
        })
    }

    fn queue(&self) -> RecvQueue<'_> {
        RecvQueue::new(&self.slots, &self.tail, true)
    }
}

/// Entry `seq` of producer `src`: the header names both, and every inline
/// byte repeats them, so a mixed or old descriptor is recognisable.
fn entry(src: u32, seq: u32) -> SlotBody {
    SlotBody {
        header: FragHeader {
            src,
            handler: seq,
            ..FragHeader::default()
        },
        frame: NO_FRAME,
        inline: [(src * 16 + seq) as u8; INLINE_BYTES],
    }
}

/// Producer `src` sends `count` entries: claim a position, publish there.
fn produce(q: &RecvQueue<'_>, src: u32, count: u32) {
    for seq in 0..count {
        let pos = q.claim();
        q.publish(pos, &entry(src, seq), || false)
            .expect("sound queue");
    }
}

/// Pop `sent[src]` entries of each producer, checking them as they come.
fn consume(q: &RecvQueue<'_>, sent: &[u32]) {
    let mut next = vec![0u32; sent.len()];
    for head in 0..u64::from(sent.iter().sum::<u32>()) {
        // The stamp belongs to this lap or the last, published or not.
        q.check(head).expect("stamp looks corrupt");
        // Idle poll: one load of the head slot's stamp.
        while !q.watch(head).ready() {
            thread::yield_now();
        }
        // The watch's Acquire load published the slot: read it without
        // loading the stamp again, as the shm transport does.
        let body = q.read_watched(head, |b| *b);
        assert_eq!(body.frame, NO_FRAME, "{TORN}");
        let (src, seq) = (body.header.src, body.header.handler);
        assert!(
            body.inline.iter().all(|&x| u32::from(x) == src * 16 + seq),
            "{TORN}"
        );
        assert_eq!(seq, next[src as usize], "{NOT_FIFO}");
        next[src as usize] += 1;
        // Read the descriptor again in place (payload left in the slot).
        let again = q.try_pop_with(head, |b| *b).expect("stamp looks corrupt");
        assert_eq!(again, Some(body), "{TORN}");
        // Give the slot back to the producer of the next lap.
        q.recycle(head);
    }
    assert_eq!(next, sent, "{NOT_FIFO}");
}

/// Producer 0 (the consumer's own thread, before the other starts) fills
/// lap 0; producer 1 publishes laps 1 and 2 while the consumer reads.
fn next_lap() {
    let s = State::new();
    produce(&s.queue(), 0, SLOTS as u32);
    let producer = {
        let s = s.clone();
        thread::spawn(move || produce(&s.queue(), 1, 2 * SLOTS as u32))
    };
    consume(&s.queue(), &[SLOTS as u32, 2 * SLOTS as u32]);
    producer.join().unwrap();
}

/// Two producers, two entries each, racing for positions: four positions
/// on two slots.
///
/// Run at preemption bound 1. At bound 2 or more loom's exploration of
/// this model does not end: a switch away from a thread that yields is not
/// counted as a preemption, so when two threads spin-wait (the consumer
/// for an entry, a producer for a recycle) on a third that was preempted,
/// loom keeps building longer schedules in which the third never runs,
/// until one exceeds its branch limit. The configuration [`next_lap`]
/// covers the cross-producer slot reuse with two threads at the full bound.
fn two_producers() {
    let s = State::new();
    let producers: Vec<_> = (0..2)
        .map(|src| {
            let s = s.clone();
            thread::spawn(move || produce(&s.queue(), src, 2))
        })
        .collect();
    consume(&s.queue(), &[2, 2]);
    for p in producers {
        p.join().unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{assert_caught, check, check_bounded, says};
    use fastmsg::internal::mutant::Mutant;

    #[test]
    fn shared_next_lap() {
        check(next_lap);
    }

    #[test]
    fn shared_two_producers() {
        check_bounded(1, two_producers);
    }

    #[test]
    fn mutant_relaxed_publish_is_caught() {
        assert_caught(Mutant::PublishRelaxed, &[says::RACE], next_lap);
    }

    #[test]
    fn mutant_missing_recycle_wait_is_caught() {
        assert_caught(
            Mutant::PublishSkipsRecycleWait,
            &[says::RACE, NOT_FIFO, TORN, "corrupt"],
            next_lap,
        );
    }

    #[test]
    fn mutant_relaxed_recycle_is_caught() {
        assert_caught(Mutant::RecycleRelaxed, &[says::RACE], next_lap);
    }
}
