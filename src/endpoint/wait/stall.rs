//! Saying that a wait waits on a peer's credit when it waits long.
//!
//! A destination that takes none of this rank's messages while it lives —
//! busy without polling, stopped in a debugger, hung — returns no credit,
//! and a send to it waits however long (it is not failed on a clock: only
//! its death, its host's silence or a protocol error ends the wait). So
//! that such a wait does not look like a hang, it says so: a warning
//! naming the rank, the peer, what waits and how long, after the
//! endpoint's `close_warn` (`FASTMSG_CLOSE_WARN`, the delay of `close`'s
//! and the collectives' warnings) and again at each doubling of the wait
//! ([`LongWait`]), so a wait of an hour logs about nine lines. Any
//! progress towards the peer (credit returned, parked bytes written out)
//! restarts the clock.
//!
//! Two waits keep a [`CreditStall`]: a send waiting for credit towards
//! its destination, and every other blocking wait (`wait_until`, the
//! parked-send bound, quiescence) for sends parked for a destination that
//! gives no credit. The clock is read only on a wait's idle rounds.

use crate::id::Rank;
use crate::log::LongWait;
use std::time::Duration;

/// The clock of one wait on one peer's credit.
#[derive(Debug)]
pub(in crate::endpoint) struct CreditStall {
    first: Duration,
    /// The peer waited on, its progress count when the clock started, and
    /// the clock.
    on: Option<(Rank, u64, LongWait)>,
}

impl CreditStall {
    /// A clock that first says "due" after `first` without progress.
    pub(in crate::endpoint) fn new(first: Duration) -> CreditStall {
        CreditStall { first, on: None }
    }

    /// The wait found no credit towards `dest`, whose progress count is
    /// `progress`: how long it has waited when a warning is due (past the
    /// first delay, then past each doubling). Another peer or a moved count
    /// restarts the clock.
    pub(in crate::endpoint) fn stalled(&mut self, dest: Rank, progress: u64) -> Option<Duration> {
        match &mut self.on {
            Some((d, p, clock)) if *d == dest && *p == progress => clock.due(),
            _ => {
                self.on = Some((dest, progress, LongWait::new(self.first)));
                None
            }
        }
    }

    /// Credit came: the clock stops.
    pub(in crate::endpoint) fn moved(&mut self) {
        self.on = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (When it is due again, at each doubling, is `LongWait`'s, tested
    /// there with the time given.)
    #[test]
    fn due_after_the_delay_and_restarted_by_progress_another_peer_or_credit() {
        let ms = Duration::from_millis;
        let mut c = CreditStall::new(ms(30));
        assert_eq!(c.stalled(Rank(1), 0), None, "the clock starts");
        std::thread::sleep(ms(35));
        assert!(
            c.stalled(Rank(1), 0).is_some_and(|w| w >= ms(30)),
            "past 30 ms"
        );
        std::thread::sleep(ms(35));
        assert_eq!(c.stalled(Rank(1), 7), None, "progress restarts it");
        std::thread::sleep(ms(35));
        assert_eq!(c.stalled(Rank(2), 7), None, "another peer restarts it");
        std::thread::sleep(ms(35));
        c.moved();
        assert_eq!(c.stalled(Rank(2), 7), None, "credit restarts it");
        let mut hour = CreditStall::new(Duration::from_secs(3600));
        assert_eq!(hour.stalled(Rank(1), 0), None);
        assert_eq!(hour.stalled(Rank(1), 0), None, "not before the delay");
    }
}
