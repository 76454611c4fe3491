//! The periodic audit of queue words other processes write, for values
//! the hot paths do not judge because judging them there would cost a
//! load or a compare per message.
//!
//! Each check rests on the credit protocol: a sender takes a credit
//! before it claims or fills a position and gets it back only after the
//! receiver released that position, and a queue has at least as many
//! slots as its senders have credits. From that:
//!
//! - a shared queue's tail is never below the consumer's head, nor more
//!   than `capacity` above it (every claimed, unpopped position holds a
//!   credit);
//! - the slot at a shared queue's head holds, once the consumer recycled
//!   the slot's previous position, the head's own position (recycled for
//!   it, not yet published) or the next (published): the consumer wrote
//!   the first itself. While the consumer still holds that previous
//!   position (popped, not yet released), no sender can have written the
//!   slot since it was published: it holds exactly that position's
//!   published stamp. Anything else — a stamp one lap older, which looks
//!   like "not yet published" to the poll — would leave the poll waiting
//!   for ever, and the sender waiting for credit the consumer never
//!   returns. The consumer knows which positions it recycled
//!   (`ShmTransport::recycled_at`), so this holds whatever it holds, however
//!   long a handler keeps a fragment;
//! - a dedicated queue's stamps are written by its one sender only, and
//!   the receiver never writes them: every position the sender filled and
//!   has not had credited back holds exactly `position + 1`, the sender's
//!   own last write. Any other value there (one lap old, say) makes the
//!   receiver wait for ever at that position while the sender waits for
//!   its credit;
//! - a credit line is written by its receiver only, with the count it
//!   released: it holds exactly that count.
//!
//! [`ShmTransport::check_peers`] runs the audit (every blocking wait makes
//! that look each `HEALTH_EVERY`); a queue found corrupt is taken out of
//! service (receive side: a shared queue's owner then leaves the job, see
//! `leave_over_queue`) or its receiver taken as failed (send side).
//! The audit costs the hot paths one store per shared-queue release
//! (`ShmTransport::recycled_at`) and one per reservation (`ShmTransport::open`, not on
//! the whole-message fast path).

use super::shared_send::TxStalled;
use super::{ShmTransport, Watch};
use crate::error::ProtocolError;
use crate::id::Rank;
use crate::queue::{FrameStore, PublishStalled};
use crate::sync::Ordering;
use crate::transport::Transport;

impl ShmTransport {
    /// The first corruption the audit finds (see the module docs), once.
    pub(super) fn audit(&mut self) -> Option<ProtocolError> {
        if let Some(e) = self.audit_received() {
            return Some(e);
        }
        if let Some(e) = self.audit_credit_lines() {
            return Some(e);
        }
        self.audit_sent()
    }

    /// Our shared queues (see [`own_queue_fault`](Self::own_queue_fault));
    /// a queue found corrupt is taken out of service.
    fn audit_received(&mut self) -> Option<ProtocolError> {
        let (qi, error) = self.own_queue_fault()?;
        self.take_out_of_service(qi, &error);
        Some(error)
    }

    /// The first of our shared queues in service found corrupt, with its
    /// error: the stamp at the head from neither this lap nor the last
    /// (`RecvQueue::check`), or what [`judge`](Self::judge) finds. Reads
    /// only: also what a send waiting on a peer's shared queue asks
    /// (`shared_send::OwnLook`).
    pub(super) fn own_queue_fault(&self) -> Option<(usize, ProtocolError)> {
        for (qi, rq) in self.rx.iter().enumerate() {
            if rq.watch.is_never() || !rq.q.is_shared() {
                continue;
            }
            if let Some(e) = self.head_stamp_fault(qi) {
                return Some((qi, e));
            }
            if let Some(e) = self.judge(qi) {
                return Some((qi, e));
            }
        }
        None
    }

    /// Our queue `qi`'s head stamp, if it is from neither this lap nor
    /// the last (`RecvQueue::check`): the empty poll compares with one
    /// value only and would wait for it for ever. The error names the
    /// queue's sender when it has only one.
    pub(super) fn head_stamp_fault(&self, qi: usize) -> Option<ProtocolError> {
        let rq = &self.rx[qi];
        let c = rq.q.check(rq.head).err()?;
        Some(ProtocolError::QueueCorrupt {
            queue: qi as u32,
            sender: rq.sole_sender.map(|s| self.rank_of_smt[s as usize]),
            head: c.head,
            seq: c.seq,
        })
    }

    /// Our shared queue `qi`: the tail within a capacity of the head; the
    /// head's stamp one the slot can hold given what this rank holds; no
    /// more frames in use than the senders hold credits.
    fn judge(&self, qi: usize) -> Option<ProtocolError> {
        let rq = &self.rx[qi];
        let queue = qi as u32;
        let (head, capacity) = (rq.head, rq.q.capacity());
        let tail = rq.q.claimed();
        if tail < head || tail - head > capacity {
            return Some(ProtocolError::QueueTailCorrupt {
                queue,
                head,
                tail,
                capacity,
            });
        }
        let seq = rq.q.stamp(head);
        let sound = if self.recycled_at[qi].holds_lap_before(head, capacity) {
            // Still ours, so no sender can have stamped it since.
            seq == head.wrapping_sub(capacity) + 1
        } else {
            seq == head || seq == head + 1
        };
        if !sound {
            return Some(ProtocolError::QueueCorrupt {
                queue,
                sender: None,
                head,
                seq,
            });
        }
        let credits = self.credits_into(queue);
        // Relaxed: only the values are counted. While this rank counts it
        // releases nothing, so the count is at most what the senders hold
        // at its end (the frames this rank holds keep their senders'
        // credits until released).
        let in_use = (0..rq.frames.count())
            .filter(|&f| rq.frames.in_use(f).load(Ordering::Relaxed) != 0)
            .count() as u64;
        (in_use > credits).then_some(ProtocolError::QueueFramesCorrupt {
            queue,
            in_use,
            credits,
        })
    }

    /// The credit lines we return credit through: each holds the count
    /// we last published, as only we write it. A line set back (to a
    /// count its sender has already seen, say) would leave the sender
    /// waiting for credit we never publish again once we hold nothing of
    /// its: the count is published anew (the line is ours) and the
    /// overwrite reported.
    fn audit_credit_lines(&mut self) -> Option<ProtocolError> {
        for (smt, s) in self.sources.iter().enumerate() {
            let (found, released) = (s.line.read(), s.returns.released());
            if found != released {
                s.line.publish(released);
                self.ringer.ring(s.bell);
                return Some(ProtocolError::CreditLineCorrupt {
                    src: self.rank_of_smt[smt],
                    found,
                    released,
                });
            }
        }
        None
    }

    /// How many credits the senders of our queue `queue` hold at most
    /// together.
    fn credits_into(&self, queue: u32) -> u64 {
        let p = &self.layout.params;
        let senders = (0..p.local)
            .filter(|&s| self.layout.queue_of_sender(s) == queue)
            .count() as u64;
        senders * u64::from(p.credits)
    }

    /// Stop polling our queue `qi`, found corrupt (`why`). If this rank
    /// writes on it too, see [`own_queue_broken`](Self::own_queue_broken).
    /// A shared queue's senders are not told by the queue: see
    /// [`leave_over_queue`](Self::leave_over_queue).
    pub(super) fn take_out_of_service(&mut self, qi: usize, why: &ProtocolError) {
        let rq = &self.rx[qi];
        let shared = rq.q.is_shared();
        self.rx[qi].watch = Watch::never(rq.q.watch(rq.head).stamp_ref());
        if shared {
            self.leave_over_queue(why);
        }
        if self.layout.queue_of_sender(self.me_smt) == qi as u32 {
            self.own_queue_broken(qi as u32, why);
        }
    }

    /// One of our shared queues is out of service (corrupt) or stopped at
    /// a hole: what its senders sent behind that point is never read, so
    /// the credit they hold for it never comes back, and a sender waiting
    /// for that credit judges nothing of the queue (the words it could
    /// judge are this rank's). Two such ranks, each waiting in a send for
    /// the other's credit, would wait for ever, whatever each found. So
    /// this rank leaves the job (its lifeline says `Left`, as when it
    /// drops its endpoint): every peer takes it as gone, and a send
    /// waiting for its credit ends with `PeerGone`, its wait with the
    /// peer's departure; this rank reports the queue's error itself, the
    /// first `why`, from every later wait (`left_over`).
    pub(super) fn leave_over_queue(&mut self, why: &ProtocolError) {
        self.life.set_left();
        self.left_over.get_or_insert_with(|| why.clone());
    }

    /// Our queue `queue`, the one this rank's sends to itself go through,
    /// was found corrupt (`why`), by its sends or its polls: those sends
    /// cannot be delivered any more, and whatever waits for them (the
    /// close rounds, rank 0's own report among them) would wait for ever.
    /// This rank is taken as gone for its own sends, and every later
    /// `check_peers` reports [`ProtocolError::OwnQueueCorrupt`], so that
    /// every blocking wait ends with it.
    pub(super) fn own_queue_broken(&mut self, queue: u32, why: &ProtocolError) {
        self.gone[self.me_smt as usize] = true;
        if self.own_broken.is_none() {
            self.own_broken = Some(ProtocolError::OwnQueueCorrupt {
                queue,
                why: why.to_string(),
            });
        }
    }

    /// The dedicated queues we write: every position filled and not yet
    /// credited back stamped as we stamped it.
    fn audit_sent(&mut self) -> Option<ProtocolError> {
        let mut bad = None;
        for (rank, peer) in self.tx.iter().enumerate() {
            let Some(peer) = peer else { continue };
            if peer.q.is_shared() || self.open[rank] != 0 || self.is_gone(Rank(rank as u32)) {
                continue;
            }
            let sent = peer.window.sent();
            let from = peer
                .window
                .returned()
                .max(sent.saturating_sub(peer.q.capacity()));
            if let Some(pos) = (from..sent).find(|&p| peer.q.stamp(p) != p + 1) {
                let seq = peer.q.stamp(pos);
                bad = Some((Rank(rank as u32), pos, seq));
                break;
            }
        }
        let (dest, pos, seq) = bad?;
        self.refuse(dest, TxStalled::Queue(PublishStalled::Corrupt { pos, seq }));
        self.take_refusal()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::{ShmConfig, ShmJob, ShmTransport};
    use crate::error::{ExtractError, ProtocolError};
    use crate::frame::{FragFlags, FragHeader};
    use crate::id::Rank;
    use crate::sync::Ordering;
    use crate::transport::{RxFragment, Transport};
    use std::path::Path;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Rank 1 of the job, on its own thread (its lifeline is held by the
    /// thread that connected), driven by the test's thread.
    pub(in crate::transport::shm) struct Peer {
        pub(in crate::transport::shm) orders: mpsc::Sender<Option<Order>>,
        pub(in crate::transport::shm) done: mpsc::Receiver<()>,
    }

    pub(in crate::transport::shm) type Order = Box<dyn FnOnce(&mut ShmTransport) + Send>;

    impl Peer {
        /// Run `f` on rank 1's transport, and wait for it.
        pub(in crate::transport::shm) fn run(
            &self,
            f: impl FnOnce(&mut ShmTransport) + Send + 'static,
        ) {
            self.orders.send(Some(Box::new(f))).expect("rank 1 lives");
            self.done.recv().expect("rank 1 ran it");
        }

        /// Rank 1 drops its transport without closing (its lifeline says
        /// `Left`), and waits.
        pub(in crate::transport::shm) fn leave(&self) {
            self.orders.send(None).expect("rank 1 lives");
            self.done.recv().expect("rank 1 left");
        }
    }

    /// `body` with rank 0 of a two-rank job and rank 1 ([`Peer`]), one
    /// shared queue each (`FASTMSG_QUEUES=1`), 3 credits per pair: 8
    /// slots.
    pub(in crate::transport::shm) fn with_pair(body: impl FnOnce(&mut ShmTransport, &Peer)) {
        let job = crate::bootstrap::fresh_job_id();
        let connect = |rank: u32| {
            let job = ShmJob {
                dir: Path::new("/dev/shm"),
                job: &job,
                host: "audit-test",
                rank: Rank(rank),
                world: 2,
                local_rank: rank,
                local_size: 2,
                doorbells: false,
                timeout: Duration::from_secs(10),
                window_bytes: 64,
                abort: None,
            };
            let cfg = ShmConfig {
                queues: Some(1),
                credits: 3,
                ..ShmConfig::default()
            };
            ShmTransport::connect(&job, &cfg).expect("connect")
        };
        std::thread::scope(|s| {
            let (orders, taken) = mpsc::channel::<Option<Order>>();
            let (ran, done) = mpsc::channel();
            s.spawn(move || {
                let mut one = connect(1);
                while let Ok(Some(order)) = taken.recv() {
                    order(&mut one);
                    ran.send(()).expect("the test waits");
                }
                drop(one);
                let _ = ran.send(());
            });
            let mut zero = connect(0);
            body(&mut zero, &Peer { orders, done });
        });
    }

    /// The header of an empty one-fragment message from rank 1.
    pub(in crate::transport::shm) fn empty_from_one() -> FragHeader {
        FragHeader {
            src: 1,
            handler: 0,
            len: 0,
            flags: FragFlags::FIRST.0 | FragFlags::LAST.0,
            total: 0,
        }
    }

    /// Rank 1 sends one empty message to rank 0.
    pub(in crate::transport::shm) fn send(one: &Peer) {
        one.run(|t| {
            assert!(t.try_send_inline(Rank(0), empty_from_one(), &[]), "credit");
        });
    }

    /// Rank 0 pops the next fragment (held until released).
    pub(in crate::transport::shm) fn pop(zero: &mut ShmTransport) -> RxFragment {
        zero.poll().expect("a fragment").expect("sound")
    }

    /// Rank 0 holds rank 1's first message (popped, not released) while
    /// the rest of a lap passes, so that rank 1's next send claims the
    /// held fragment's slot one lap on. The queue's capacity and the held
    /// fragment.
    pub(in crate::transport::shm) fn hold_one_pass_a_lap(
        zero: &mut ShmTransport,
        one: &Peer,
    ) -> (u64, RxFragment) {
        let cap = zero.rx[0].q.capacity();
        send(one);
        let held = pop(zero);
        pass(zero, one, cap as usize - 1);
        (cap, held)
    }

    /// Rank 1 sends and rank 0 takes and releases `n` messages.
    pub(in crate::transport::shm) fn pass(zero: &mut ShmTransport, one: &Peer, n: usize) {
        for _ in 0..n {
            send(one);
            let f = pop(zero);
            zero.release(&f.token);
        }
    }

    /// Rank 0 holds a fragment (an async handler waiting for the rest of
    /// its message), the next one is published, and its stamp is set
    /// back one lap — "published one lap earlier", which the poll reads
    /// as "not yet published": the receiver would wait for it for ever
    /// and its sender for the credit. The audit names it while the
    /// fragment is held.
    #[test]
    fn a_stamp_set_back_behind_a_held_fragment_is_found() {
        with_pair(|zero, one| {
            let cap = zero.rx[0].q.capacity();
            pass(zero, one, cap as usize + 3);
            send(one);
            send(one);
            let held = pop(zero);
            let head = zero.rx[0].head;
            assert_eq!(zero.rx[0].q.stamp(head), head + 1, "published");
            assert!(zero.check_peers().is_ok(), "sound while held");
            // Relaxed: a scribble, ordered with nothing.
            zero.rx[0]
                .q
                .watch(head)
                .stamp_ref()
                .store(head + 1 - cap, Ordering::Relaxed);
            let e = zero.check_peers().expect_err("the audit finds it");
            let want = ProtocolError::QueueCorrupt {
                queue: 0,
                sender: None,
                head,
                seq: head + 1 - cap,
            };
            assert!(
                matches!(&e, ExtractError::Protocol(p) if *p == want),
                "{e:?}"
            );
            // Its senders' credit for what lies behind never returns: the
            // rank leaves, so that their credit waits end.
            assert_eq!(
                zero.lives[zero.me_smt as usize].state(),
                super::super::liveness::Life::Left
            );
            zero.release(&held.token);
        });
    }

    /// While rank 0 holds position `p`, the slot of `p + capacity` keeps
    /// `p`'s published stamp — one lap old from the head's view — for as
    /// long as the fragment is held: sound, not reported.
    #[test]
    fn a_held_fragments_own_stamp_is_sound() {
        with_pair(|zero, one| {
            let cap = zero.rx[0].q.capacity();
            pass(zero, one, 5);
            send(one);
            let held = pop(zero);
            pass(zero, one, cap as usize - 1);
            let head = zero.rx[0].head;
            assert_eq!(head, held.token.pos + cap);
            assert_eq!(zero.rx[0].q.stamp(head), held.token.pos + 1);
            assert!(zero.check_peers().is_ok(), "held");
            zero.release(&held.token);
            assert!(zero.check_peers().is_ok(), "recycled for the head");
            send(one);
            assert!(zero.check_peers().is_ok(), "published at the head");
        });
    }

    /// Every frame flagged in use (a value the protocol writes) while
    /// rank 0 holds a fragment: more frames in use than the senders hold
    /// credits, reported whatever rank 0 holds.
    #[test]
    fn frames_flagged_in_use_behind_a_held_fragment_are_found() {
        with_pair(|zero, one| {
            pass(zero, one, 3);
            send(one);
            let held = pop(zero);
            one.run(|t| t.scribble_frames(Rank(0), 1));
            let e = zero.check_peers().expect_err("the audit finds it");
            assert!(
                matches!(
                    e,
                    ExtractError::Protocol(ProtocolError::QueueFramesCorrupt {
                        queue: 0,
                        in_use: 8,
                        credits: 6,
                    })
                ),
                "{e:?}"
            );
            zero.release(&held.token);
        });
    }

    /// A claimed, unwritten head while this rank still holds the fragment
    /// one lap before it is a live sender waiting for that fragment's
    /// release, not a hole, even once a writer of the queue has left:
    /// no `QueueHole` while held. Released, the same claimed head is a
    /// hole, reported after the grace.
    #[test]
    fn a_head_claimed_behind_a_held_fragment_is_no_hole() {
        with_pair(|zero, one| {
            let (_, held) = hold_one_pass_a_lap(zero, one);
            one.run(|t| t.claim_raw(Rank(0)));
            one.leave();
            assert!(zero.find_hole().is_none(), "first look");
            std::thread::sleep(super::super::holes::HOLE_GRACE + Duration::from_millis(100));
            assert!(zero.find_hole().is_none(), "held: a sender waits on it");
            zero.release(&held.token);
            assert!(zero.find_hole().is_none(), "the clock starts");
            std::thread::sleep(super::super::holes::HOLE_GRACE + Duration::from_millis(100));
            assert!(
                matches!(
                    zero.find_hole(),
                    Some(ProtocolError::QueueHole {
                        queue: 0,
                        died: 1,
                        ..
                    })
                ),
                "released: a hole left by rank 1"
            );
        });
    }
}
