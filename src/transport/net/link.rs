//! The links of the TCP wire: each peer's connection state as whoever
//! reads the socket (the rank, or the NIC thread: `transport::tcp::nic`)
//! publishes it and the application thread reads it.
//!
//! One word per peer crosses between the threads, and one for all:
//! - the link **state** (`UP`, then `BYE`, `LEFT` or `FAILED`), with the
//!   error behind a lock, stored by the NIC when the connection ends;
//! - the **alert** count, bumped after every state change, so that the
//!   application's check reads one word while nothing happens and scans
//!   the links only when it moved ([`Links::check`]).
//!
//! This module opens no socket and every atomic goes through
//! `crate::sync`, so `loom-tests/src/link.rs` runs this very code.

use crate::error::NetError;
use crate::id::Rank;
use crate::sync::mutant::{self, Mutant};
use crate::sync::{AtomicU32, AtomicU64, Mutex, Ordering};

/// Link states.
pub const UP: u32 = 0;
/// The peer said goodbye after the close barrier released it.
pub const BYE: u32 = 1;
/// The peer failed; see [`Links::error`].
pub const FAILED: u32 = 2;
/// The peer said goodbye without having closed (its endpoint was dropped
/// without `close`).
pub const LEFT: u32 = 3;

/// One peer's connection, written by the NIC thread.
#[derive(Debug)]
struct Link {
    rank: Rank,
    state: AtomicU32,
    error: Mutex<Option<NetError>>,
}

/// Every network peer's link, in peer order, and the alert count.
#[derive(Debug)]
pub struct Links {
    links: Vec<Link>,
    /// Bumped whenever a link leaves `UP`.
    alerts: AtomicU64,
}

/// A link that left `UP`, as [`Links::check`] reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum Departure {
    /// The peer failed with this error.
    Failed(NetError),
    /// The peer said goodbye without having closed.
    Left(Rank),
}

impl Links {
    /// All `UP`, for the peers `ranks` (peer `k` is `ranks[k]`).
    pub fn new(ranks: &[Rank]) -> Links {
        Links {
            links: ranks
                .iter()
                .map(|&rank| Link {
                    rank,
                    state: AtomicU32::new(UP),
                    error: Mutex::new(None),
                })
                .collect(),
            alerts: AtomicU64::new(0),
        }
    }

    /// Peer `k`'s rank.
    pub fn rank(&self, k: usize) -> Rank {
        self.links[k].rank
    }

    /// NIC side: record a failure of peer `k` (the first end wins).
    pub fn fail(&self, k: usize, e: NetError) {
        let link = &self.links[k];
        // SYNC POINT link-state (acquire side): pairs with `announce`'s
        // Release store (only this thread stores the state; any ordering
        // would do, Acquire costs nothing on a load).
        if link.state.load(Ordering::Acquire) == UP {
            *link.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            self.announce(k, FAILED);
        }
    }

    /// NIC side: peer `k` said goodbye, after the close barrier (`closed`)
    /// or without having closed.
    pub fn leave(&self, k: usize, closed: bool) {
        self.announce(k, if closed { BYE } else { LEFT });
    }

    /// Store peer `k`'s new state, then bump the alert count.
    fn announce(&self, k: usize, state: u32) {
        let link = &self.links[k];
        let bump = || {
            // SYNC POINT link-alert (release side): the state stored just
            // before is visible to whoever Acquire-loads the bumped count
            // (`check`, the watchdog's probe).
            let order = mutant::weaken(Mutant::LinkAlertRelaxed, Ordering::Release);
            self.alerts.fetch_add(1, order);
        };
        if mutant::on(Mutant::LinkAlertFirst) {
            bump();
        }
        // SYNC POINT link-state (release side): the error (set before, under
        // its lock) is visible to whoever sees FAILED.
        link.state.store(state, Ordering::Release);
        if !mutant::on(Mutant::LinkAlertFirst) {
            bump();
        }
    }

    /// Peer `k`'s state.
    pub fn state(&self, k: usize) -> u32 {
        // SYNC POINT link-state (acquire side): pairs with `announce`.
        self.links[k].state.load(Ordering::Acquire)
    }

    /// The error peer `k` failed with (once its state is `FAILED`).
    pub fn error(&self, k: usize) -> Option<NetError> {
        self.links[k]
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The alert count (for a watchdog that only wants to know whether
    /// anything changed).
    pub fn alerts(&self) -> u64 {
        // SYNC POINT link-alert (acquire side): pairs with `announce`.
        self.alerts.load(Ordering::Acquire)
    }

    /// Application side: report a link that left `UP` and is not yet
    /// `gone` (one per call, marking it gone). `seen` is the alert count
    /// of the last check that found nothing more; `gone` yields each peer's
    /// flag, in peer order. A goodbye after close only marks the peer gone.
    ///
    /// # Errors
    /// The first departure found.
    pub fn check<'a>(
        &self,
        seen: &mut u64,
        gone: impl IntoIterator<Item = &'a mut bool>,
    ) -> Result<(), Departure> {
        // SYNC POINT link-alert (acquire side): pairs with `announce`; a
        // count that moved makes the state stored before it visible.
        let alerts = self.alerts.load(Ordering::Acquire);
        if alerts == *seen {
            return Ok(());
        }
        for (k, gone) in gone.into_iter().enumerate() {
            if *gone {
                continue;
            }
            match self.state(k) {
                UP => {}
                FAILED => {
                    *gone = true;
                    if let Some(e) = self.error(k) {
                        return Err(Departure::Failed(e));
                    }
                }
                LEFT => {
                    *gone = true;
                    return Err(Departure::Left(self.links[k].rank));
                }
                _ => *gone = true,
            }
        }
        // Only now: an early return above leaves the rest for the next call.
        *seen = alerts;
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn dropped(rank: u32) -> NetError {
        NetError::Disconnected {
            rank: Rank(rank),
            mid_record: true,
        }
    }

    #[test]
    fn each_departure_is_reported_once_in_peer_order() {
        let links = Links::new(&[Rank(1), Rank(2), Rank(3)]);
        let (mut seen, mut gone) = (0, [false; 3]);
        assert_eq!(links.check(&mut seen, gone.iter_mut()), Ok(()));
        links.leave(2, false);
        links.fail(0, dropped(1));
        links.fail(0, dropped(9)); // the first end wins
        links.leave(1, true);
        assert_eq!(
            links.check(&mut seen, gone.iter_mut()),
            Err(Departure::Failed(dropped(1)))
        );
        // A goodbye after close only marks the peer gone.
        assert_eq!(
            links.check(&mut seen, gone.iter_mut()),
            Err(Departure::Left(Rank(3)))
        );
        assert_eq!(seen, 0, "not seen while a report was returned");
        assert_eq!(links.check(&mut seen, gone.iter_mut()), Ok(()));
        assert_eq!((seen, gone), (3, [true; 3]));
        assert_eq!(links.alerts(), 3);
        assert_eq!(
            [links.state(0), links.state(1), links.state(2)],
            [FAILED, BYE, LEFT]
        );
    }
}
