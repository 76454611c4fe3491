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
//! So once no free frame has been found for [`STUCK_AFTER`] the wait
//! ends, the receiver is taken as failed and
//! [`ProtocolError::PeerQueueStuck`] names the queue, the peer and the
//! value.
//!
//! The clock is read only in the wait's slow path (every lap of the
//! walk): nothing on the send's fast path.
//!
//! [`ProtocolError::PeerQueueStuck`]: crate::error::ProtocolError::PeerQueueStuck

use std::time::{Duration, Instant};

/// How long a sender may find no free frame before the queue is taken as
/// corrupt: twice the hole watch's grace, so that what a dead sender left
/// is reported by the receiver first, and far beyond any descheduling of
/// a live walk.
pub(super) const STUCK_AFTER: Duration = Duration::from_secs(2);

/// What a waiting sender last saw, and since when.
#[derive(Debug, Default)]
pub(super) struct StallClock {
    seen: Option<(u64, Instant)>,
    /// The wait ended because the value stayed too long.
    pub(super) stuck: Option<(u64, Duration)>,
}

impl StallClock {
    /// The wait saw `value`; `bounded` says whether the protocol leaves it
    /// only briefly. True once a bounded value has stayed unchanged for
    /// [`STUCK_AFTER`] (recorded in `stuck`).
    pub(super) fn stuck_at(&mut self, value: u64, bounded: bool) -> bool {
        let now = Instant::now();
        match self.seen {
            Some((v, since)) if v == value && bounded => {
                let waited = now.duration_since(since);
                if waited >= STUCK_AFTER {
                    self.stuck = Some((value, waited));
                    return true;
                }
            }
            _ => self.seen = Some((value, now)),
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock that has seen `value` for [`STUCK_AFTER`] already.
    fn aged(value: u64) -> StallClock {
        StallClock {
            seen: Some((value, Instant::now() - STUCK_AFTER)),
            stuck: None,
        }
    }

    #[test]
    fn only_a_bounded_value_left_unchanged_is_stuck() {
        let mut c = StallClock::default();
        assert!(!c.stuck_at(5, true));
        assert!(!c.stuck_at(5, true), "not yet");
        let mut c = aged(5);
        assert!(c.stuck_at(5, true));
        assert_eq!(c.stuck.map(|s| s.0), Some(5));
        let mut c = aged(5);
        assert!(!c.stuck_at(6, true), "a change restarts the clock");
        let mut c = aged(7);
        assert!(!c.stuck_at(7, false), "unbounded values wait");
    }
}
