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
//! - once the consumer of a shared queue holds no popped position (all
//!   recycled), the slot at its head holds the head's own position
//!   (recycled for it, not yet published) or the next (published): the
//!   consumer wrote the first itself. A stamp one lap older looks like
//!   "not yet published" to the poll, which would wait for ever;
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
//! service (receive side) or its receiver taken as failed (send side).
//! The audit costs the hot paths one counter per shared-queue release
//! (`RxQueue::recycled`) and one per reservation (`ShmTransport::open`, not on
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

    /// Our shared queues (see [`judge`](Self::judge)); a queue found
    /// corrupt is taken out of service.
    fn audit_received(&mut self) -> Option<ProtocolError> {
        for qi in 0..self.rx.len() {
            let rq = &self.rx[qi];
            if rq.watch.is_never() || !rq.q.is_shared() {
                continue;
            }
            if let Some(error) = self.judge(qi) {
                self.take_out_of_service(qi, &error);
                return Some(error);
            }
        }
        None
    }

    /// Our shared queue `qi`: the tail within a capacity of the head; once
    /// this rank holds no popped position, the head's stamp the head's own
    /// or the next, and no more frames in use than the senders hold
    /// credits.
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
        if rq.head != rq.recycled {
            return None;
        }
        let seq = rq.q.stamp(head);
        if seq != head && seq != head + 1 {
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
        // at its end.
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
    pub(super) fn take_out_of_service(&mut self, qi: usize, why: &ProtocolError) {
        let rq = &self.rx[qi];
        self.rx[qi].watch = Watch::never(rq.q.watch(rq.head).stamp_ref());
        if self.layout.queue_of_sender(self.me_smt) == qi as u32 {
            self.own_queue_broken(qi as u32, why);
        }
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
