//! Sends to a receive queue that several local ranks share (more ranks on
//! the host than `FASTMSG_QUEUES`): the slot and the frame come from
//! counters the senders share, so a sender may have to wait for the
//! receiver to recycle them. This module owns that wait's two ways out: a
//! stamp or flag no rank following the protocol writes (the segment was
//! scribbled on), and a receiver whose lifeline says it is gone; either
//! way nothing is published, the receiver is taken as gone, and a corrupt
//! queue's error is kept for `check_peers`. A dedicated queue's sender
//! waits on nothing in the receiver's memory and never comes here.
//!
//! A third way out is this rank's own fault ([`OwnLook`]): the receiver
//! may hold the slot a sender waits for as long as its handler keeps the
//! fragment, and that handler may wait for a fragment stuck behind a
//! corrupt stamp of the receiver's own queue, which only the receiver's
//! audit finds. If the receiver is itself waiting inside a send to us for
//! the same reason, neither rank ever audits: so a waiting send audits
//! this rank's own shared queues now and then ([`OWN_LOOK_EVERY`]), and
//! one found corrupt ends the wait with that queue's error.
//!
//! A send that gives up so after it claimed its position on the peer's
//! (healthy) queue leaves that position empty, and the queue is read in
//! order: the peer's other senders would wait behind it for ever, and
//! nothing in the protocol tells the peer it from a slow sender. The
//! position cannot be filled with something the receiver skips instead:
//! its slot may be written only once the receiver recycled it, which is
//! the very wait given up (for as long as the receiver holds a fragment,
//! perhaps one waiting on this rank). So this rank leaves the job at
//! once: its lifeline says `Left` (`LifeGuard::set_left`), every peer
//! takes it as gone, and the receiver reports the hole
//! (`ProtocolError::QueueHole`, see `holes`) after its grace.
//!
//! A send that gives up its claimed position over the receiver's own
//! stamp (`OddStamp`) leaves the job the same way, naming the position
//! on its lifeline (`ShmTransport::abandon`): the receiver may never see
//! that stamp (its own release can overwrite it with a sound one), and
//! reports the hole at once instead.

use super::stall::StallClock;
use super::*;
use crate::queue::{ClaimStalled, PublishStalled};
use std::time::{Duration, Instant};

/// How often a send waiting on a peer's shared queue audits this rank's
/// own shared queues (see the module docs): the audit reads every frame
/// flag of a queue, too much for every look of the wait.
pub(super) const OWN_LOOK_EVERY: Duration = Duration::from_millis(20);

/// A waiting send's look at this rank's own shared receive queues
/// ([`ShmTransport::own_queue_fault`]), every [`OWN_LOOK_EVERY`]. Reads
/// only: what it finds is acted on once the wait has ended
/// ([`ShmTransport::stalled`]).
pub(super) struct OwnLook<'a> {
    t: &'a ShmTransport,
    next: Option<Instant>,
    /// The queue found corrupt, and its error.
    pub(super) found: Option<(usize, ProtocolError)>,
}

impl<'a> OwnLook<'a> {
    /// A look for a send about to wait (no clock read until it does).
    #[inline(always)]
    pub(super) fn new(t: &'a ShmTransport) -> Self {
        OwnLook {
            t,
            next: None,
            found: None,
        }
    }

    /// Asked by the wait now and then: true once one of this rank's own
    /// shared queues was found corrupt (recorded in `found`).
    #[cold]
    pub(super) fn broken(&mut self) -> bool {
        let now = Instant::now();
        match self.next {
            Some(t) if now >= t => {}
            Some(_) => return false,
            None => {
                self.next = Some(now + OWN_LOOK_EVERY);
                return false;
            }
        }
        self.next = Some(now + OWN_LOOK_EVERY);
        self.found = self.t.own_queue_fault();
        self.found.is_some()
    }
}

impl TxPeer {
    /// Whether the receiver is gone (its lifeline's state word, as the
    /// watchdog left it): what a wait on its shared queue asks now and then.
    #[cold]
    pub(super) fn receiver_gone(&self) -> bool {
        self.life.state().is_gone()
    }

    /// Publish a body, written in place by `write`, on a shared queue at
    /// the next claimed position, after its slot was recycled. Out of
    /// line: the dedicated queue's publication
    /// (`RecvQueue::publish_dedicated_with`) waits for nothing.
    ///
    /// # Errors
    /// A corrupt stamp, the receiver gone, or one of our own queues found
    /// corrupt by `own` while we waited: nothing is published (the claimed
    /// position stays empty; the queue is lost with its receiver, or this
    /// rank leaves the job, see the module docs).
    #[inline]
    pub(super) fn publish_shared(
        &self,
        write: impl FnOnce(&mut SlotBody),
        own: &mut OwnLook<'_>,
    ) -> Result<(), TxStalled> {
        let pos = self.q.claim();
        let mut odd = OddStamp::default();
        let r = self.q.publish_with(pos, write, || {
            self.receiver_gone()
                || odd.seen_twice(self.q.capacity(), pos, self.q.stamp(pos))
                || own.broken()
        });
        r.map_err(|e| match (e, odd.found) {
            (PublishStalled::GaveUp, Some(seq)) => {
                TxStalled::Queue(PublishStalled::Corrupt { pos, seq })
            }
            (e, _) => TxStalled::Queue(e),
        })
    }

    /// A count that moves whenever the shared queue makes progress, as a
    /// waiting claim of a frame can see it: the positions claimed on the
    /// queue (each sender claims one after it took a frame, so frames
    /// other senders took during a lap move it) plus the credit returned
    /// to this rank (the receiver released one of our fragments). Both
    /// only grow. Read once a lap of a fruitless walk, never on the
    /// send's fast path.
    #[cold]
    fn progress(&self) -> u64 {
        self.q.claimed().wrapping_add(self.credit.read())
    }

    /// Claim a free frame of the shared queue for a fragment whose credit
    /// is held.
    ///
    /// # Errors
    /// A corrupt in-use flag, the receiver gone, one of our own queues
    /// found corrupt by `own`, or no free frame in whole laps of the free
    /// list for `STUCK_AFTER` while the queue made no
    /// [`progress`](Self::progress) (see `stall`): no frame is taken.
    #[inline]
    pub(super) fn claim_frame(&self, own: &mut OwnLook<'_>) -> Result<u32, TxStalled> {
        let mut clock = StallClock::default();
        // Asked after each whole lap without a free frame: with a credit
        // held, a free frame exists at every instant (see `stall`); the
        // clock runs only while the queue makes no progress.
        FreeList::new(self.free_head, &self.frames)
            .claim(|| self.receiver_gone() || own.broken() || clock.stuck_at(self.progress(), true))
            .map_err(|e| match (e, clock.stuck) {
                (ClaimStalled::GaveUp, Some((_, waited))) => TxStalled::Stuck {
                    at: StuckAt::Frames,
                    waited,
                },
                (e, _) => TxStalled::Frames(e),
            })
    }

    /// As [`send_framed`](Self::send_framed), to a shared queue: the frame
    /// comes from the free list, the slot from the next claimed position.
    ///
    /// # Errors
    /// What the claim or the publication stalled on (nothing published).
    #[inline(never)]
    fn send_framed_shared(
        &self,
        header: FragHeader,
        pieces: &[&[u8]],
        own: &mut OwnLook<'_>,
    ) -> Result<(), TxStalled> {
        let frame = self.claim_frame(own)?;
        gather_into_frame(&self.frames, frame, pieces, header.len as usize);
        self.publish_shared(|b| fill_slot(b, header, frame, &[]), own)
    }
}

/// A waiting sender's judgement of the stamps it sees that the credit
/// protocol rules out (those `RecvQueue::publish` itself lets pass, not
/// knowing of credit).
///
/// Every position claimed and not yet popped holds a credit of its
/// sender (taken before the claim, returned after the release), and the
/// queue has at least as many slots as its senders have credits. So
/// while the sender of `pos` waits, fewer than `capacity` positions from
/// the consumer's head on are claimed: the slot's previous position
/// `pos - capacity` has been popped, hence published. Its stamp is then
/// `pos - capacity + 1` (the consumer still holds it: a wait without
/// bound, as a consumer may hold a fragment as long as it likes, or be
/// stopped) or `pos` (recycled: the wait is over). Any other stamp —
/// `pos - capacity`, "recycled for the previous position, not yet
/// published", or one lap older than the protocol can leave it — was
/// written by something outside the protocol.
///
/// Judged when seen at two looks in a row (a yield apart), so that a
/// first look at the slot before this process's view of it caught up
/// is not taken for corruption.
#[derive(Debug, Default)]
pub(super) struct OddStamp {
    last: Option<u64>,
    /// The stamp found twice.
    pub(super) found: Option<u64>,
}

impl OddStamp {
    /// The waiting sender of `pos` sees `seq` on a queue of `cap` slots:
    /// true once a stamp the credit protocol rules out was seen at two
    /// looks in a row (recorded in `found`).
    pub(super) fn seen_twice(&mut self, cap: u64, pos: u64, seq: u64) -> bool {
        let allowed = seq == pos || seq == pos.wrapping_sub(cap).wrapping_add(1);
        if allowed {
            self.last = None;
            return false;
        }
        if self.last == Some(seq) {
            self.found = Some(seq);
            return true;
        }
        self.last = Some(seq);
        false
    }
}

/// Why a send to a shared queue published nothing.
#[derive(Clone, Copy, Debug)]
pub(super) enum TxStalled {
    /// The slot (`RecvQueue::publish`).
    Queue(PublishStalled),
    /// The free list (`FreeList::claim`).
    Frames(ClaimStalled),
    /// The credit line held a count its writer never publishes
    /// (`TxPeer::take_credit`).
    Credit {
        /// The count found.
        found: u64,
        /// Fragments sent.
        sent: u64,
        /// The count last accepted.
        returned: u64,
    },
    /// A value the protocol leaves only for a moment stayed (`stall`).
    Stuck {
        /// Which value.
        at: StuckAt,
        /// How long it stayed.
        waited: std::time::Duration,
    },
}

/// The value a stuck wait saw.
#[derive(Clone, Copy, Debug)]
pub(super) enum StuckAt {
    /// Every frame in use, lap after lap.
    Frames,
}

impl ShmTransport {
    /// `try_send_inline` to a shared queue, after the credit was taken:
    /// the slot (and frame) come from the counters several senders share,
    /// and the wait for them can stall (see [`refuse`](Self::refuse)). Out
    /// of line: the dedicated queue's send waits for nothing.
    #[inline(never)]
    pub(super) fn send_shared_taken(
        &mut self,
        dest: Rank,
        header: FragHeader,
        pieces: &[&[u8]],
        in_slot: bool,
    ) -> bool {
        let Some(peer) = self.tx.get(dest.index()).and_then(Option::as_ref) else {
            return false;
        };
        let mut own = OwnLook::new(self);
        let sent = if in_slot {
            // Checked before the claim: a panic in the gather after it
            // would leave the position claimed and never published.
            debug_assert!(pieces.iter().map(|p| p.len()).sum::<usize>() <= INLINE_BYTES);
            peer.publish_shared(|b| fill_slot(b, header, NO_FRAME, pieces), &mut own)
        } else {
            peer.send_framed_shared(header, pieces, &mut own)
        };
        match sent {
            Ok(()) => {
                self.ringer.ring(peer.bell);
                true
            }
            Err(e) => {
                let own = own.found;
                self.stalled(dest, e, own)
            }
        }
    }

    /// `try_reserve`'s frame on `dest`'s shared queue, after the credit
    /// was taken; `None` if the claim stalled (see
    /// [`stalled`](Self::stalled)).
    #[inline(never)]
    pub(super) fn claim_shared_frame(&mut self, dest: Rank) -> Option<u32> {
        let peer = self.tx.get(dest.index()).and_then(Option::as_ref)?;
        let mut own = OwnLook::new(self);
        match peer.claim_frame(&mut own) {
            Ok(frame) => Some(frame),
            Err(e) => {
                let own = own.found;
                self.stalled(dest, e, own);
                None
            }
        }
    }

    /// A send to `dest`'s shared queue stalled (`e`): because one of our
    /// own queues was found corrupt while it waited (`own`), or else see
    /// [`refuse`](Self::refuse). Returns false: the send did not happen.
    #[cold]
    #[inline(never)]
    pub(super) fn stalled(
        &mut self,
        dest: Rank,
        e: TxStalled,
        own: Option<(usize, ProtocolError)>,
    ) -> bool {
        let Some((queue, error)) = own else {
            if let TxStalled::Queue(PublishStalled::Corrupt { pos, seq }) = e {
                // A position claimed on `dest`'s queue stays empty, and
                // `dest` may never see why: see `abandon`.
                self.abandon(dest, pos, seq);
            }
            return self.refuse(dest, e);
        };
        if matches!(e, TxStalled::Queue(_)) {
            // A position was claimed on `dest`'s healthy queue and stays
            // empty (see the module docs): this rank leaves the job, so
            // that `dest` reports the hole instead of its other senders
            // waiting behind it for ever.
            self.leave_over_queue(&error);
        }
        // Whatever this rank sent `dest` later would wait behind that
        // position unread.
        self.mark_gone(dest);
        self.take_out_of_service(queue, &error);
        self.tx_corrupt.push(error);
        if let Some(alarm) = &self.alarm {
            alarm.raise();
        }
        false
    }

    /// This rank gave up a position it claimed on a peer's shared queue
    /// over a stamp it judged corrupt, and leaves the job (its lifeline
    /// says `Left`), as when it gives up over its own queue. The peer
    /// cannot tell by itself: the corrupt stamp may have been the one its
    /// own release overwrites — a stamp set back while the peer still
    /// held the slot's previous position (one lap older than "published,
    /// not yet recycled") becomes, at the release, the sound "recycled
    /// for this position" — and the position then looks to every audit
    /// like a sender about to write it. Its other senders would wait
    /// behind it for credit for ever. The lifeline's note names the
    /// position (`holes::abandoned_note`), so the peer reports the hole as
    /// soon as its head reaches it, with no grace (see `holes`).
    /// Every later wait of this rank reports the stamp found
    /// (`left_over`).
    #[cold]
    fn abandon(&mut self, dest: Rank, pos: u64, seq: u64) {
        let owner = self.smt_of_rank[dest.index()];
        self.life.set_left_noting(holes::abandoned_note(owner, pos));
        self.left_over
            .get_or_insert(ProtocolError::PeerQueueCorrupt {
                dest: dest.0,
                pos,
                seq,
            });
    }

    /// A send to `dest`'s shared queue stalled (`e`): take `dest` as gone
    /// (its sends fail from now on), keep a corrupt queue's error, and
    /// raise the endpoint's alarm; a receiver found gone is reported from
    /// its lifeline, as the watchdog's probe reports it.
    /// Returns false: the send did not happen.
    #[cold]
    #[inline(never)]
    pub(super) fn refuse(&mut self, dest: Rank, e: TxStalled) -> bool {
        self.mark_gone(dest);
        let dest = dest.0;
        let error = match e {
            TxStalled::Queue(PublishStalled::Corrupt { pos, seq }) => {
                Some(ProtocolError::PeerQueueCorrupt { dest, pos, seq })
            }
            TxStalled::Frames(ClaimStalled::Corrupt { frame, flag }) => {
                Some(ProtocolError::PeerFramesCorrupt { dest, frame, flag })
            }
            TxStalled::Credit {
                found,
                sent,
                returned,
            } => Some(ProtocolError::PeerCreditCorrupt {
                dest,
                found,
                sent,
                returned,
            }),
            TxStalled::Stuck { at, waited } => Some(ProtocolError::PeerQueueStuck {
                dest,
                what: match at {
                    StuckAt::Frames => "every frame flagged in use".to_owned(),
                },
                waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
            }),
            TxStalled::Queue(PublishStalled::GaveUp) | TxStalled::Frames(ClaimStalled::GaveUp) => {
                None
            }
        };
        match error {
            // Our own queue (sends to ourselves): see `own_queue_broken`.
            Some(e) if self.rank_of_smt[self.me_smt as usize] == dest => {
                let queue = self.layout.queue_of_sender(self.me_smt);
                self.own_queue_broken(queue, &e);
            }
            e => self.tx_corrupt.extend(e),
        }
        // The engine reads what happened at its next look at the alarm
        // (`extract`, any blocking wait), whether this send waits for
        // credit or parks.
        if let Some(alarm) = &self.alarm {
            alarm.raise();
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::super::audit::tests::{
        empty_from_one, hold_one_pass_a_lap, pass, pop, send, with_pair, Order,
    };
    use super::super::holes::HOLE_GRACE;
    use super::super::liveness::Life;
    use super::super::stall::STUCK_AFTER;
    use super::{OddStamp, OwnLook, StuckAt, TxStalled};
    use crate::error::ProtocolError;
    use crate::id::Rank;
    use crate::queue::FreeList;
    use crate::transport::shm::ShmTransport;
    use crate::transport::Transport;
    use std::time::{Duration, Instant};

    /// Every frame of rank 1's queue flagged in use for twice
    /// [`STUCK_AFTER`] while other senders keep claiming positions on it
    /// (as when they take every frame freed during each lap of rank 0's
    /// walk): the queue works, rank 0 waits on and takes the frame freed
    /// at last.
    #[test]
    fn a_queue_that_moves_is_not_stuck() {
        with_pair(|zero, one| {
            zero.scribble_frames(Rank(1), 1);
            let order: Order = Box::new(|t: &mut ShmTransport| {
                let end = Instant::now() + 2 * STUCK_AFTER;
                while Instant::now() < end {
                    t.rx[0].q.claim();
                    std::thread::sleep(Duration::from_millis(5));
                }
                let rq = &t.rx[0];
                FreeList::new(rq.free_head, &rq.frames).release(5);
            });
            one.orders.send(Some(order)).expect("rank 1 lives");
            let peer = zero.tx[1].as_ref().expect("local peer");
            let mut own = OwnLook::new(zero);
            let got = peer.claim_frame(&mut own);
            one.done.recv().expect("rank 1 ran it");
            assert!(matches!(got, Ok(5)), "{got:?}");
        });
    }

    /// Rank 1's send to rank 0 claims the slot of a fragment rank 0 still
    /// holds, and waits; meanwhile rank 1's own queue is found corrupt,
    /// so the send gives up and its position stays empty. Rank 1 says it
    /// left at once, and rank 0, once it released the fragment, reports
    /// the hole after the grace instead of waiting behind it for ever.
    #[test]
    fn a_send_given_up_over_our_own_queue_leaves_the_job() {
        with_pair(|zero, one| {
            let (cap, held) = hold_one_pass_a_lap(zero, one);
            // Rank 1's own queue: stamps no sender writes.
            zero.scribble_stamps(Rank(1), 0xdead_beef);
            one.run(|t| {
                assert!(
                    !t.try_send_inline(Rank(0), empty_from_one(), &[]),
                    "given up"
                );
                assert!(
                    matches!(
                        t.take_refusal(),
                        Some(ProtocolError::QueueCorrupt { queue: 0, .. })
                    ),
                    "its own queue's error"
                );
                assert_eq!(t.lives[t.me_smt as usize].state(), Life::Left);
            });
            assert_eq!(zero.rx[0].q.claimed(), cap + 1, "its position claimed");
            assert!(zero.find_hole().is_none(), "held");
            zero.release(&held.token);
            assert!(zero.find_hole().is_none(), "the clock starts");
            std::thread::sleep(HOLE_GRACE + Duration::from_millis(100));
            let hole = zero.find_hole();
            assert!(
                matches!(
                    hole,
                    Some(ProtocolError::QueueHole {
                        queue: 0,
                        died: 1,
                        ..
                    })
                ),
                "{hole:?}"
            );
        });
    }

    /// Rank 0 holds position `cap` (popped, not released) while rank 1's
    /// send claims position `2 cap` of the same slot and waits; the
    /// slot's stamp is set back one lap, from "published `cap`" to
    /// "published a lap earlier" (a value the protocol writes there, never
    /// while a sender of `2 cap` waits). Rank 1 judges it corrupt and
    /// gives up its position, which stays empty; rank 0's release then
    /// stamps the slot "recycled for `2 cap`", sound to every audit. Rank
    /// 1 has left the job noting the position, so rank 0 reports the hole
    /// at its first look, and leaves too (its other senders wait behind
    /// the hole). Before, nothing was ever reported: rank 1 lived on, and
    /// the hole looked like a sender about to write.
    #[test]
    fn a_position_given_up_over_a_stamp_the_receiver_then_overwrote_is_a_hole_at_once() {
        with_pair(|zero, one| {
            let cap = zero.rx[0].q.capacity();
            pass(zero, one, cap as usize);
            send(one);
            let held = pop(zero);
            assert_eq!(held.token.pos, cap);
            pass(zero, one, cap as usize - 1);
            let pos = 2 * cap;
            assert_eq!(zero.rx[0].q.stamp(pos), cap + 1, "published, held");
            // Relaxed: a scribble, ordered with nothing.
            zero.rx[0]
                .q
                .watch(pos)
                .stamp_ref()
                .store(1, crate::sync::Ordering::Relaxed);
            one.run(move |t| {
                assert!(
                    !t.try_send_inline(Rank(0), empty_from_one(), &[]),
                    "given up"
                );
                let e = t.take_refusal();
                assert!(
                    matches!(
                        e,
                        Some(ProtocolError::PeerQueueCorrupt { dest: 0, pos: p, seq: 1 }) if p == pos
                    ),
                    "{e:?}"
                );
                assert_eq!(t.lives[t.me_smt as usize].state(), Life::Left);
            });
            zero.release(&held.token);
            assert_eq!(zero.rx[0].q.stamp(pos), pos, "recycled: sound");
            assert!(zero.own_queue_fault().is_none(), "no audit finds it");
            assert_eq!(zero.lives[zero.me_smt as usize].state(), Life::Alive);
            let hole = zero.find_hole();
            assert!(
                matches!(
                    hole,
                    Some(ProtocolError::QueueHole {
                        queue: 0,
                        head,
                        died: 1,
                    }) if head == pos
                ),
                "{hole:?}"
            );
            assert_eq!(
                zero.lives[zero.me_smt as usize].state(),
                Life::Left,
                "its other senders are told"
            );
        });
    }

    /// The same frames, and nothing moves on the queue: the wait ends
    /// after [`STUCK_AFTER`], with the frames named.
    #[test]
    fn a_queue_that_does_not_move_is_stuck() {
        with_pair(|zero, _one| {
            zero.scribble_frames(Rank(1), 1);
            let peer = zero.tx[1].as_ref().expect("local peer");
            let mut own = OwnLook::new(zero);
            let got = peer.claim_frame(&mut own);
            assert!(
                matches!(
                    got,
                    Err(TxStalled::Stuck {
                        at: StuckAt::Frames,
                        waited,
                    }) if waited >= STUCK_AFTER
                ),
                "{got:?}"
            );
        });
    }

    /// Position 21 of an 8-slot queue waits on the stamp of position 13:
    /// 14 (published, held by the receiver) may stay; 21 ends the wait.
    /// Anything else is judged once seen twice in a row.
    #[test]
    fn only_stamps_the_credit_protocol_allows_are_waited_on() {
        let (cap, pos) = (8, 21);
        for allowed in [14, 21] {
            let mut odd = OddStamp::default();
            assert!(!odd.seen_twice(cap, pos, allowed));
            assert!(!odd.seen_twice(cap, pos, allowed), "{allowed} may stay");
            assert_eq!(odd.found, None);
        }
        // Recycled for position 13 (not yet published: ruled out once
        // position 21 was claimed), published one lap earlier, garbage.
        for odd_one in [13, 6, 0xdead_beef] {
            let mut odd = OddStamp::default();
            assert!(
                !odd.seen_twice(cap, pos, odd_one),
                "a first look may be stale"
            );
            assert!(odd.seen_twice(cap, pos, odd_one));
            assert_eq!(odd.found, Some(odd_one));
        }
        // A stamp that moves on between looks is judged afresh.
        let mut odd = OddStamp::default();
        assert!(!odd.seen_twice(cap, pos, 13));
        assert!(!odd.seen_twice(cap, pos, 14));
        assert!(!odd.seen_twice(cap, pos, 6));
        assert_eq!(odd.found, None);
    }
}
