//! The bound on a sender's wait for a free frame of a shared receive
//! queue.
//!
//! A sender into a shared queue may wait for two values another process
//! writes: its slot's stamp (recycled by the receiver) and a free frame
//! (an in-use flag cleared by the receiver). The receiver's lifeline ends
//! either wait when the receiver is gone. The values seen end it when
//! they are ones no process following the protocol leaves there: a
//! garbage flag (`ClaimStalled::Corrupt`), a stamp the slot cannot hold
//! while a sender holding a credit waits (`PublishStalled::Corrupt`,
//! judged in `shared_send::OddStamp`, with no clock: only "published, not
//! yet recycled" may stay, for as long as the receiver holds the
//! fragment). What is left is every frame flagged in use, a value the
//! protocol writes, left there for good by something that does not follow
//! it, while the receiver lives. The protocol bounds how long it can
//! legitimately last: a sender holds a credit, and frames are released
//! before their credit returns, so a free frame exists at every instant
//! (a walk of the free list can only miss it under unfair scheduling).
//! The receiver's own audit (`audit`) finds more frames in use than its
//! senders hold credits, when it looks.
//!
//! A lap can also miss every free frame because other senders took each
//! one the receiver freed during it: there may be no spare frame (a queue
//! has `next_power_of_two(credits × senders)`), and under fan-in with
//! more ranks than cores one walk can lose lap after lap. That is a queue
//! at work, so what the clock watches is the queue's progress
//! (`TxPeer::progress`: the positions its senders claimed, each after
//! taking a frame, plus the credit returned to this sender), not the
//! flags: any progress restarts it.
//!
//! So once no free frame has been found, and the queue has made no
//! progress, for [`STUCK_AFTER`], over at least [`STUCK_LAPS`] whole laps
//! of the list, the wait ends, the receiver is taken as failed and
//! [`ProtocolError::PeerQueueStuck`] names the queue, the peer and the
//! value. Both bounds must be passed: the time keeps a fast walk from
//! giving up on a receiver merely descheduled between two releases; the
//! laps keep a walk that was itself descheduled (more ranks than cores)
//! from giving up after two unlucky looks far apart in time. Frames
//! flagged in use for good while other senders keep the queue moving
//! with inline fragments (which take no frame) keep restarting the
//! clock: the receiver's audit names that queue. Before that, a waiting
//! sender also
//! audits its own queues (`shared_send::OwnLook`): a rank whose frames
//! were all flagged in use is usually found by its own audit first (more
//! frames in use than its senders hold credits), within tens of
//! milliseconds, even while it is itself waiting in a send.
//!
//! The clock is read only in the wait's slow path (every lap of the
//! walk): nothing on the send's fast path.
//!
//! [`ProtocolError::PeerQueueStuck`]: crate::error::ProtocolError::PeerQueueStuck

use std::time::{Duration, Instant};

/// How long a sender may find no free frame before the queue is taken as
/// corrupt: far beyond any descheduling of a live receiver between two
/// releases, and short enough that the failure is reported within a
/// second.
pub(super) const STUCK_AFTER: Duration = Duration::from_millis(500);

/// How many whole laps of the free list without a free frame, at least,
/// before the queue is taken as corrupt (each lap is followed by a yield).
pub(super) const STUCK_LAPS: u32 = 64;

/// What a waiting sender last saw, since when, and in how many looks.
#[derive(Debug, Default)]
pub(super) struct StallClock {
    seen: Option<(u64, Instant)>,
    looks: u32,
    /// The wait ended because the value stayed too long.
    pub(super) stuck: Option<(u64, Duration)>,
}

impl StallClock {
    /// The wait saw `value`; `bounded` says whether the protocol leaves it
    /// only briefly. True once a bounded value has stayed unchanged for
    /// [`STUCK_AFTER`] and [`STUCK_LAPS`] looks (recorded in `stuck`).
    pub(super) fn stuck_at(&mut self, value: u64, bounded: bool) -> bool {
        let now = Instant::now();
        match self.seen {
            Some((v, since)) if v == value && bounded => {
                self.looks = self.looks.saturating_add(1);
                let waited = now.duration_since(since);
                if waited >= STUCK_AFTER && self.looks >= STUCK_LAPS {
                    self.stuck = Some((value, waited));
                    return true;
                }
            }
            _ => {
                self.seen = Some((value, now));
                self.looks = 0;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock that has seen `value` for [`STUCK_AFTER`] already, in
    /// `looks` looks.
    fn aged(value: u64, looks: u32) -> StallClock {
        StallClock {
            seen: Some((value, Instant::now() - STUCK_AFTER)),
            looks,
            stuck: None,
        }
    }

    #[test]
    fn only_a_bounded_value_left_unchanged_is_stuck() {
        let mut c = StallClock::default();
        assert!(!c.stuck_at(5, true));
        assert!(!c.stuck_at(5, true), "not yet");
        let mut c = aged(5, STUCK_LAPS);
        assert!(c.stuck_at(5, true));
        assert_eq!(c.stuck.map(|s| s.0), Some(5));
        let mut c = aged(5, STUCK_LAPS);
        assert!(!c.stuck_at(6, true), "a change restarts the clock");
        let mut c = aged(7, STUCK_LAPS);
        assert!(!c.stuck_at(7, false), "unbounded values wait");
    }

    /// Two looks far apart (a walk descheduled in between) are not enough.
    #[test]
    fn a_long_wait_in_few_looks_is_not_stuck() {
        let mut c = aged(5, 0);
        for _ in 1..STUCK_LAPS {
            assert!(!c.stuck_at(5, true));
        }
        assert!(c.stuck_at(5, true), "the last look needed");
    }
}
