//! Model 8: the lazy connector's words ([`fastmsg::internal::lazy_pairs`]):
//! who connects a pair, and how an accepted link reaches the rank's poll.
//! The sockets are left out: a dial is a handshake thread at the peer
//! (as `transport::net::connect` starts one per connection) that decides
//! on the peer's state word and answers; the channel that carries a link
//! to the rank is [`Mailbox`], one slot per peer written with Release and
//! read with Acquire, the least a channel promises (a receive sees every
//! send that happens before it, and may miss one that does not).
//!
//! - **Crossing dials.** Ranks 0 and 1 dial each other at once, each on
//!   its rank thread: claim its own word ([`LazyPairs::start_dial`]); if
//!   claimed, the handshake thread at the peer decides
//!   ([`LazyPairs::accept`]) and, when it takes the dial, answers and hands
//!   the link over under [`LazyPairs::settle`]; the dialer joins it (it
//!   waits for the answer; what follows the answer at the peer touches
//!   only the peer's words). A dial refused, or not started because the
//!   pair was taken, waits for the link in its own mailbox. Checked when
//!   every thread is done: each rank holds exactly one connection (its
//!   dial's, or one from its mailbox, never both, never none: a rank with
//!   none would wait until its timeout), both hold the same one, and the
//!   rank that got it from its mailbox has the flag up for its poll.
//! - **Hand-over.** A rank with two peers whose dials it accepts on two
//!   handshake threads at once, while its thread polls twice as the
//!   transport does (one load of the flag, then [`LazyPairs::take`] with
//!   the drain) and runs the close's check: a peer whose answer it can see
//!   (its dial returned) must be installed, or counted by
//!   [`LazyPairs::settling`]. After the joins, one more poll; then each
//!   link must have been installed exactly once (a flag lowered over a
//!   link the drain missed would leave it in the mailbox for ever).

use crate::harness::spawn_with;
use fastmsg::internal::lazy_pairs::LazyPairs;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;

pub(crate) const TWO: &str = "a rank holds two connections of one pair";
pub(crate) const NONE: &str = "a rank holds no connection: it would wait for ever";
pub(crate) const DISAGREE: &str = "the two ends hold different connections";
pub(crate) const UNFLAGGED: &str = "a link in the mailbox with the flag down";
pub(crate) const LOST: &str = "a handed-over link was never seen by the poll";
pub(crate) const LOST_AT_CLOSE: &str = "a dial returned, yet the close sees nothing settling";

/// The channel to a rank, one slot per peer (0: empty, else a link id).
struct Mailbox {
    slots: Vec<AtomicUsize>,
}

impl Mailbox {
    fn new(peers: usize) -> Mailbox {
        Mailbox {
            slots: (0..peers).map(|_| AtomicUsize::new(0)).collect(),
        }
    }

    /// Post link `id` from peer `k` (the handshake thread's `send`).
    fn post(&self, k: usize, id: usize) -> bool {
        self.slots[k].store(id, Ordering::Release);
        true
    }

    /// Every link seen now, as (peer, id), each once (only the rank's
    /// thread takes).
    fn drain(&self) -> Vec<(usize, usize)> {
        let mut got = Vec::new();
        for (k, s) in self.slots.iter().enumerate() {
            let id = s.load(Ordering::Acquire);
            if id != 0 {
                s.store(0, Ordering::Relaxed);
                got.push((k, id));
            }
        }
        got
    }
}

/// One rank of the crossing: its words (peer 0 is the other rank) and
/// its mailbox.
struct End {
    pairs: LazyPairs,
    mailbox: Mailbox,
}

/// How a rank's dial ended: the connection's id, or crossed.
fn dial(me: usize, ends: &Arc<[End; 2]>) -> Option<usize> {
    if !ends[me].pairs.start_dial(0) {
        return None;
    }
    let id = me + 1;
    // The connection reaches the peer's listener: its handshake thread.
    let at = 1 - me;
    let taken = spawn_with(ends, move |ends| {
        let peer = &ends[at];
        if !peer.pairs.accept(0, me as u32) {
            return false;
        }
        peer.pairs
            .settle(|| peer.pairs.hand_over(|| peer.mailbox.post(0, id)));
        true
    })
    .join()
    .unwrap();
    if taken {
        ends[me].pairs.dialed(0);
        Some(id)
    } else {
        None
    }
}

/// Both ranks dial at once; check what each ends up holding.
fn both_dial() {
    let ends = Arc::new([
        End {
            pairs: LazyPairs::new(0, 1),
            mailbox: Mailbox::new(1),
        },
        End {
            pairs: LazyPairs::new(1, 1),
            mailbox: Mailbox::new(1),
        },
    ]);
    let lower = {
        let ends = ends.clone();
        loom::thread::spawn(move || dial(0, &ends))
    };
    let dialed_higher = dial(1, &ends);
    let dialed = [lower.join().unwrap(), dialed_higher];
    let mut held = [0usize; 2];
    for (r, end) in ends.iter().enumerate() {
        // A crossed dial waits on the channel (`Connector::wait`).
        let arrived = end.pairs.arrived();
        let got: Vec<usize> = end.mailbox.drain().into_iter().map(|l| l.1).collect();
        if !got.is_empty() {
            assert!(arrived, "{UNFLAGGED}");
        }
        let all: Vec<usize> = dialed[r].into_iter().chain(got).collect();
        match all[..] {
            [] => panic!("{NONE}: rank {r}"),
            [id] => held[r] = id,
            _ => panic!("{TWO}: rank {r} holds {all:?}"),
        }
    }
    assert_eq!(held[0], held[1], "{DISAGREE}");
}

/// The rank's thread in the hand-over model.
struct Accepting {
    pairs: LazyPairs,
    mailbox: Mailbox,
    /// Per peer: the accept answer went out (the dial returned).
    answered: Vec<AtomicUsize>,
}

fn hand_over() {
    // Rank 2, peers 0 and 1 (ranks 0 and 1), both dialing it.
    let a = Arc::new(Accepting {
        pairs: LazyPairs::new(2, 2),
        mailbox: Mailbox::new(2),
        answered: (0..2).map(|_| AtomicUsize::new(0)).collect(),
    });
    let handshakes: Vec<_> = (0..2usize)
        .map(|k| {
            spawn_with(&a, move |a| {
                assert!(a.pairs.accept(k, k as u32), "an idle end takes a dial");
                a.pairs.settle(|| {
                    // The ACCEPT byte: the dialer's dial returns.
                    a.answered[k].store(1, Ordering::Release);
                    a.pairs.hand_over(|| a.mailbox.post(k, k + 1))
                });
            })
        })
        .collect();
    let mut installed = [0u32; 2];
    let poll = |installed: &mut [u32; 2]| {
        if a.pairs.arrived() {
            for (k, _) in a.pairs.take(|| a.mailbox.drain()) {
                installed[k] += 1;
            }
        }
    };
    for _ in 0..2 {
        poll(&mut installed);
        // The close's check (`quiesce`): a peer whose dial returned counts
        // on this rank's flush, so it must be installed or settling.
        for k in 0..2 {
            if a.answered[k].load(Ordering::Acquire) == 1 {
                assert!(
                    installed[k] > 0 || a.pairs.settling(),
                    "{LOST_AT_CLOSE}: peer {k}"
                );
            }
        }
    }
    for h in handshakes {
        h.join().unwrap();
    }
    poll(&mut installed);
    assert_eq!(installed, [1, 1], "{LOST}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{assert_caught, check};
    use fastmsg::internal::mutant::Mutant;

    #[test]
    fn crossing_dials_leave_exactly_one_connection() {
        check(both_dial);
    }

    #[test]
    fn every_handed_over_link_is_installed_and_settling_until_then() {
        check(hand_over);
    }

    #[test]
    fn mutant_accept_without_exchange_is_caught() {
        assert_caught(Mutant::PairAcceptLooksThenStores, &[TWO], both_dial);
    }

    #[test]
    fn mutant_tie_break_inverted_at_the_lower_end_is_caught() {
        assert_caught(Mutant::PairTieBreakInvertedAtLower, &[TWO], both_dial);
    }

    #[test]
    fn mutant_tie_break_inverted_at_the_higher_end_is_caught() {
        assert_caught(Mutant::PairTieBreakInvertedAtHigher, &[NONE], both_dial);
    }

    #[test]
    fn mutant_relaxed_raise_is_caught() {
        assert_caught(Mutant::HandoverRelaxed, &[LOST, LOST_AT_CLOSE], hand_over);
    }

    #[test]
    fn mutant_plain_raise_is_caught() {
        assert_caught(
            Mutant::HandoverPlainRaise,
            &[LOST, LOST_AT_CLOSE],
            hand_over,
        );
    }

    #[test]
    fn mutant_plain_lower_is_caught() {
        assert_caught(
            Mutant::HandoverPlainLower,
            &[LOST, LOST_AT_CLOSE],
            hand_over,
        );
    }

    #[test]
    fn mutant_settle_counted_late_is_caught() {
        assert_caught(Mutant::SettleCountedLate, &[LOST_AT_CLOSE], hand_over);
    }

    #[test]
    fn mutant_settle_relaxed_is_caught() {
        assert_caught(Mutant::SettleRelaxed, &[LOST_AT_CLOSE], hand_over);
    }
}
