//! The bound on a sender's wait in a shared receive queue.
//!
//! A sender into a shared queue may wait for two values another process
//! writes: its slot's stamp (recycled by the receiver) and a free frame
//! (an in-use flag cleared by the receiver). The receiver's lifeline ends
//! the wait when the receiver is gone; the values seen end it when they
//! are ones no process following the protocol writes
//! (`PublishStalled::Corrupt`, `ClaimStalled::Corrupt`). What is left is a
//! value the protocol does write, left there for good by something that
//! does not follow it — a slot's stamp set back one lap, every frame
//! flagged in use — while the receiver lives. The protocol bounds how
//! long such a value can legitimately stay:
//!
//! - a stamp that says the slot was recycled for an earlier position of
//!   the slot (`pos - k * capacity`): that position's sender claimed it and
//!   stamps it a few instructions later (the claim-to-stamp window, the
//!   one the receiver's hole watch bounds with its grace);
//! - no free frame in whole laps of the free list: a sender holds a
//!   credit, and frames are released before their credit returns, so a
//!   free frame exists at every instant (the walk can only miss it under
//!   unfair scheduling).
//!
//! So once such a value has stayed unchanged for [`STUCK_AFTER`] the wait
//! ends, the receiver is taken as failed and
//! [`ProtocolError::PeerQueueStuck`] names the queue, the peer and the
//! value. A stamp that says "published, not yet recycled" is not bounded:
//! a receiver may hold a fragment (its handler still reading it) for as
//! long as it likes.
//!
//! The clock is read only in the wait's slow path (every lap of spins):
//! nothing on the send's fast path.
//!
//! [`ProtocolError::PeerQueueStuck`]: crate::error::ProtocolError::PeerQueueStuck

use std::time::{Duration, Instant};

/// How long a value the protocol leaves only for a few instructions may
/// stay unchanged before the queue is taken as corrupt: twice the hole
/// watch's grace, so that a sender that died between claim and stamp is
/// reported by the receiver first, as a hole.
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
