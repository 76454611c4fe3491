//! The words a rank's lazy connector shares between its threads
//! (`transport::net::connect` owns the sockets and threads around them):
//! who connects each pair, and how an accepted link reaches the rank.
//!
//! - **One state word per peer** (`IDLE`, `DIALING`, `ACCEPTING`, `DONE`):
//!   the rank's thread claims it to dial ([`LazyPairs::start_dial`]); the
//!   accepting side decides a peer's incoming dial on it
//!   ([`LazyPairs::accept`]): taken when idle, or when this end is dialing
//!   too and the peer is the lower rank (the lower rank's connection wins,
//!   the same rule at both ends). Both sides change it only by
//!   compare-exchange, so exactly one of them moves it out of `IDLE`, and
//!   the accepting side decides on the value it replaces, never on an
//!   earlier look.
//! - **The hand-over flag**: raised after a link is posted to the rank's
//!   mailbox ([`LazyPairs::hand_over`]), read by the rank's poll with one
//!   load ([`LazyPairs::arrived`]), lowered before the mailbox is drained
//!   ([`LazyPairs::take`]). Every write of it is a read-modify-write, so the
//!   poll that lowers it acquires every post whose flag it lowers, however
//!   many accepting threads raced (a plain store on either side can lose a
//!   link: `loom-tests/src/lazy_pairs.rs`).
//! - **The settling count**: links accepted (the dialer may have its
//!   answer) and not yet posted; the rank's close waits while it is
//!   non-zero ([`LazyPairs::settling`]).
//!
//! The mailbox is the caller's (a channel in the transport): this module
//! asks of it only that a receive sees every post that happens before it.
//! Every atomic goes through `crate::sync`, so the loom model runs this
//! very code.

use crate::sync::mutant::{self, Mutant};
use crate::sync::{AtomicBool, AtomicU32, Ordering};

/// A pair end's state: nobody has started.
pub const IDLE: u32 = 0;
/// This rank's thread is dialing the peer.
pub const DIALING: u32 = 1;
/// The accepting side took the peer's connection.
pub const ACCEPTING: u32 = 2;
/// This rank's dial connected.
pub const DONE: u32 = 3;

/// One rank's lazy-connection words, for its peers `0..n`.
#[derive(Debug)]
pub struct LazyPairs {
    /// This rank.
    me: u32,
    /// Per peer: this end's state.
    states: Vec<AtomicU32>,
    /// A link waits in the mailbox.
    arrived: AtomicBool,
    /// Links accepted and not yet in the mailbox.
    settling: AtomicU32,
}

impl LazyPairs {
    /// Rank `me`, `peers` peers, all idle.
    pub fn new(me: u32, peers: usize) -> LazyPairs {
        LazyPairs {
            me,
            states: (0..peers).map(|_| AtomicU32::new(IDLE)).collect(),
            arrived: AtomicBool::new(false),
            settling: AtomicU32::new(0),
        }
    }

    /// Peer `k`'s state word as it stands.
    pub fn state(&self, k: usize) -> u32 {
        // Relaxed: the state word only decides who connects (its
        // read-modify-writes are totally ordered); no data rides on it.
        self.states[k].load(Ordering::Relaxed)
    }

    /// Rank thread: claim peer `k` for a dial. `false`: the peer's own
    /// connection is being (or was) accepted, its link comes through the
    /// mailbox.
    pub fn start_dial(&self, k: usize) -> bool {
        // Relaxed: as in `state`.
        self.states[k]
            .compare_exchange(IDLE, DIALING, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// Rank thread: the dial of peer `k` connected.
    pub fn dialed(&self, k: usize) {
        // Relaxed: as in `state`.
        self.states[k].store(DONE, Ordering::Relaxed);
    }

    /// Rank thread, after a dial of peer `k` failed: whether the accepting
    /// side took the pair over meanwhile (then its link comes through the
    /// mailbox and the failure is no failure).
    pub fn taken_over(&self, k: usize) -> bool {
        self.state(k) != DIALING
    }

    /// Whether peer `k`'s connection was accepted here.
    pub fn accepted(&self, k: usize) -> bool {
        self.state(k) == ACCEPTING
    }

    /// Accepting side: decide the dial that peer `k` (rank `their`) made.
    /// `true`: it is taken (answer it, then [`hand_over`](Self::hand_over)
    /// its link); `false`: the pair's other connection wins (refuse it).
    pub fn accept(&self, k: usize, their: u32) -> bool {
        let state = &self.states[k];
        // Relaxed: as in `state`. Decided on the value the exchange finds
        // (the rank may start its dial between a look and the exchange).
        let mut cur = state.load(Ordering::Relaxed);
        if mutant::on(Mutant::PairAcceptLooksThenStores) {
            let ours = self.takes(cur, their);
            if ours {
                state.store(ACCEPTING, Ordering::Relaxed);
            }
            return ours;
        }
        loop {
            if !self.takes(cur, their) {
                return false;
            }
            match state.compare_exchange(cur, ACCEPTING, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// The rule: a dial from `their` is taken in state `cur` if this end
    /// is idle, or dialing too and `their` is the lower rank.
    fn takes(&self, cur: u32, their: u32) -> bool {
        let mut lower_wins = their < self.me;
        if mutant::on(Mutant::PairTieBreakInvertedAtLower) && their > self.me {
            lower_wins = true;
        }
        if mutant::on(Mutant::PairTieBreakInvertedAtHigher) && their < self.me {
            lower_wins = false;
        }
        cur == IDLE || (cur == DIALING && lower_wins)
    }

    /// Accepting side: run `answer` (which answers the dialer, then hands
    /// the link over) counted as settling, from before the dialer can have
    /// its answer until the link is in the mailbox.
    pub fn settle<R>(&self, answer: impl FnOnce() -> R) -> R {
        let late = mutant::on(Mutant::SettleCountedLate);
        if !late {
            // SYNC POINT lazy-settle (release side): counted before the
            // dialer can have its answer (see `settling`).
            self.settling.fetch_add(1, Ordering::AcqRel);
        }
        let r = answer();
        if late {
            // SYNC POINT lazy-settle (release side), as above (the mutant).
            self.settling.fetch_add(1, Ordering::AcqRel);
        }
        // SYNC POINT lazy-settle (release side): the link (if any) is in
        // the mailbox and flagged before the count drops.
        let order = mutant::weaken(Mutant::SettleRelaxed, Ordering::AcqRel);
        self.settling.fetch_sub(1, order);
        r
    }

    /// Accepting side: `post` puts a link in the rank's mailbox (`false`:
    /// the rank is gone); if it did, raise the flag. Returns what `post`
    /// returned (ring the rank's doorbell then).
    pub fn hand_over(&self, post: impl FnOnce() -> bool) -> bool {
        if !post() {
            return false;
        }
        // SYNC POINT lazy-link (release side): the link is in the mailbox
        // before the flag says so. A read-modify-write, so that the poll's
        // lowering (`take`) acquires this post even when it reads another
        // accepting thread's raise, later in the flag's order.
        let order = mutant::weaken(Mutant::HandoverRelaxed, Ordering::Release);
        if mutant::on(Mutant::HandoverPlainRaise) {
            self.arrived.store(true, order);
        } else {
            self.arrived.fetch_or(true, order);
        }
        true
    }

    /// Rank's poll: whether a link waits in the mailbox (one load).
    #[inline]
    pub fn arrived(&self) -> bool {
        // SYNC POINT lazy-link (acquire side): pairs with `hand_over`.
        self.arrived.load(Ordering::Acquire)
    }

    /// Rank: lower the flag, then `drain` the mailbox. Every link whose
    /// raise the lowering replaced is in what `drain` finds; a link posted
    /// after raises the flag again.
    pub fn take<T>(&self, drain: impl FnOnce() -> T) -> T {
        if mutant::on(Mutant::HandoverPlainLower) {
            self.arrived.store(false, Ordering::Relaxed);
        } else {
            // SYNC POINT lazy-link (acquire side): pairs with `hand_over`'s
            // raise (and, through the flag's read-modify-writes, every raise
            // before it since the last lowering).
            self.arrived.swap(false, Ordering::Acquire);
        }
        drain()
    }

    /// Whether a link is accepted or waits in the mailbox: a peer whose
    /// dial returned is in the mailbox or about to be (the close waits).
    pub fn settling(&self) -> bool {
        // SYNC POINT lazy-settle (acquire side): pairs with `settle`.
        self.settling.load(Ordering::Acquire) > 0 || self.arrived()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_dial_claims_an_idle_pair_once() {
        let p = LazyPairs::new(1, 2);
        assert!(p.start_dial(0));
        assert!(!p.start_dial(0), "claimed already");
        assert!(!p.taken_over(0));
        p.dialed(0);
        assert_eq!(p.state(0), DONE);
        assert!(p.start_dial(1), "peers are independent");
    }

    #[test]
    fn the_lower_ranks_dial_wins_a_crossing_at_both_ends() {
        // Rank 1 dialing: rank 0's dial is taken, rank 2's refused.
        let p = LazyPairs::new(1, 2);
        assert!(p.start_dial(0) && p.start_dial(1));
        assert!(p.accept(0, 0), "lower peer wins");
        assert!(p.taken_over(0) && p.accepted(0));
        assert!(!p.accept(1, 2), "higher peer refused");
        assert_eq!(p.state(1), DIALING);
        // An idle end takes any dial, and a taken pair no second one.
        let q = LazyPairs::new(1, 1);
        assert!(q.accept(0, 2));
        assert!(!q.accept(0, 2));
        assert!(!q.start_dial(0), "the pair is accepted");
    }

    #[test]
    fn the_flag_goes_up_only_when_posted_and_down_before_the_drain() {
        let p = LazyPairs::new(0, 1);
        assert!(!p.hand_over(|| false), "rank gone: nothing posted");
        assert!(!p.arrived());
        let counted = p.settle(|| {
            assert!(p.settling(), "counted while answering");
            p.hand_over(|| true)
        });
        assert!(counted && p.arrived() && p.settling());
        let seen = p.take(|| p.arrived());
        assert!(!seen, "lowered before the drain");
        assert!(!p.settling());
    }
}
