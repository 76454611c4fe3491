//! What this rank knows about its peers' failures: a sticky state per
//! peer, fed by the watchdog's alarm (see [`crate::watch`]).
//!
//! The semantics every call follows are in the endpoint's module docs
//! ("When a peer fails"); this module keeps the state they read: one
//! verdict per peer, written once, and the first failed peer (what
//! blocking waits report).

use crate::error::{ExtractError, NetError, ProtocolError};
use crate::id::Rank;
use std::cell::{Cell, RefCell};

/// How a peer went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::endpoint) enum Failure {
    /// Left after the close barrier (not a failure).
    Closed,
    /// Dropped its endpoint without `close`.
    Left,
    /// Died (or exited without dropping its endpoint); `pid` as it
    /// recorded it.
    Died { pid: u32 },
    /// Its network connection failed.
    Net(NetError),
    /// The shared queue we write on it was found corrupt by a send
    /// (`PeerQueueCorrupt`, `PeerFramesCorrupt`, `PeerCreditCorrupt`).
    Corrupt(ProtocolError),
}

impl Failure {
    /// The error this failure is reported as (none for an orderly close).
    pub(in crate::endpoint) fn error(&self, rank: Rank) -> Option<ExtractError> {
        match self {
            Failure::Closed => None,
            Failure::Left => Some(ExtractError::PeerLeft { rank }),
            Failure::Died { pid } => Some(ExtractError::PeerDied { rank, pid: *pid }),
            Failure::Net(e) => Some(ExtractError::Network(e.clone())),
            Failure::Corrupt(e) => Some(ExtractError::Protocol(e.clone())),
        }
    }

    /// The failure an error names, if it names one.
    pub(in crate::endpoint) fn of_error(e: &ExtractError) -> Option<(Rank, Failure)> {
        let rank = e.failed_peer()?;
        Some(match e {
            ExtractError::PeerDied { pid, .. } => (rank, Failure::Died { pid: *pid }),
            ExtractError::PeerLeft { .. } => (rank, Failure::Left),
            ExtractError::Network(n) => (rank, Failure::Net(n.clone())),
            ExtractError::Protocol(p) => (rank, Failure::Corrupt(p.clone())),
            _ => return None,
        })
    }
}

/// Which failures a blocking wait stops for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::endpoint) enum Scope {
    /// Any peer's (what it waits for may involve anyone).
    Any,
    /// Only this peer's (waiting for its credit).
    Peer(Rank),
}

/// The sticky per-peer state.
#[derive(Debug)]
pub(in crate::endpoint) struct Health {
    peers: RefCell<Vec<Option<Failure>>>,
    /// Some peer is closed or failed (sends check their destination).
    any_gone: Cell<bool>,
    /// The first peer that failed (not closed): what waits report.
    first: Cell<Option<Rank>>,
    /// This rank's own `close` has returned: no send goes out any more.
    closed: Cell<bool>,
}

impl Health {
    pub(in crate::endpoint) fn new(size: u32) -> Self {
        Health {
            peers: RefCell::new(vec![None; size as usize]),
            any_gone: Cell::new(false),
            first: Cell::new(None),
            closed: Cell::new(false),
        }
    }

    /// This rank's `close` returned: every later send fails at once.
    pub(in crate::endpoint) fn set_self_closed(&self) {
        self.closed.set(true);
        self.any_gone.set(true);
    }

    /// Whether this rank's `close` returned.
    pub(in crate::endpoint) fn self_closed(&self) -> bool {
        self.closed.get()
    }

    /// Record how `rank` went; false if it was already known (a failure
    /// also replaces an earlier `Closed`, which cannot happen in order).
    pub(in crate::endpoint) fn record(&self, rank: Rank, how: Failure) -> bool {
        let mut peers = self.peers.borrow_mut();
        let Some(slot) = peers.get_mut(rank.index()) else {
            return false;
        };
        if slot.is_some() {
            return false;
        }
        if how != Failure::Closed && self.first.get().is_none() {
            self.first.set(Some(rank));
        }
        *slot = Some(how);
        self.any_gone.set(true);
        true
    }

    /// Whether `dest` is closed or failed, or this rank closed (one cached
    /// load when no peer is).
    #[inline(always)]
    pub(in crate::endpoint) fn is_gone(&self, dest: Rank) -> bool {
        self.any_gone.get()
            && (self.closed.get()
                || self
                    .peers
                    .borrow()
                    .get(dest.index())
                    .is_some_and(Option::is_some))
    }

    /// Why `rank`'s host was taken as dead, if it failed by falling
    /// silent on the network.
    pub(in crate::endpoint) fn silence(&self, rank: Rank) -> Option<String> {
        match self.peers.borrow().get(rank.index())? {
            Some(Failure::Net(NetError::HostSilent { why, .. })) => Some(why.clone()),
            _ => None,
        }
    }

    /// The error a wait in `scope` must stop with, if any.
    pub(in crate::endpoint) fn stop_for(&self, scope: Scope) -> Option<ExtractError> {
        let rank = match scope {
            Scope::Any => self.first.get()?,
            Scope::Peer(r) => r,
        };
        self.peers.borrow().get(rank.index())?.as_ref()?.error(rank)
    }

    /// The failed ranks (closed ones excluded), in rank order.
    pub(in crate::endpoint) fn failed(&self) -> Vec<Rank> {
        self.peers
            .borrow()
            .iter()
            .enumerate()
            .filter(|(_, f)| f.as_ref().is_some_and(|f| *f != Failure::Closed))
            .map(|(r, _)| Rank(r as u32))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A network peer whose ring was found corrupt has failed: a send
    /// waiting for its credit (a wait scoped to that peer) stops with it,
    /// instead of waiting until its connection closes.
    #[test]
    fn a_corrupt_ring_fails_its_writer() {
        let e = ExtractError::Protocol(ProtocolError::RingCorrupt {
            src: 2,
            head: 0,
            stamp: 1000,
        });
        let (rank, how) = Failure::of_error(&e).expect("a failure of the ring's writer");
        assert_eq!(rank, Rank(2));
        let h = Health::new(4);
        assert!(h.record(rank, how));
        assert!(h.is_gone(Rank(2)));
        assert!(matches!(
            h.stop_for(Scope::Peer(Rank(2))),
            Some(ExtractError::Protocol(ProtocolError::RingCorrupt {
                src: 2,
                ..
            }))
        ));
    }

    #[test]
    fn failures_are_sticky_and_closed_is_not_a_failure() {
        let h = Health::new(4);
        assert!(!h.is_gone(Rank(1)));
        assert!(h.stop_for(Scope::Any).is_none());
        assert!(h.record(Rank(3), Failure::Closed));
        assert!(h.is_gone(Rank(3)));
        assert!(h.stop_for(Scope::Any).is_none(), "closed is orderly");
        assert!(h.record(Rank(1), Failure::Died { pid: 42 }));
        assert!(!h.record(Rank(1), Failure::Left), "first verdict stays");
        assert!(h.record(Rank(2), Failure::Left));
        for _ in 0..3 {
            assert!(matches!(
                h.stop_for(Scope::Any),
                Some(ExtractError::PeerDied {
                    rank: Rank(1),
                    pid: 42
                })
            ));
        }
        assert!(matches!(
            h.stop_for(Scope::Peer(Rank(2))),
            Some(ExtractError::PeerLeft { rank: Rank(2) })
        ));
        assert!(h.stop_for(Scope::Peer(Rank(0))).is_none());
        assert_eq!(h.failed(), vec![Rank(1), Rank(2)]);
    }
}
