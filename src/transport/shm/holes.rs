//! Holes in shared receive queues: positions that a sender claimed and
//! never wrote.
//!
//! On a queue several local ranks write (`FASTMSG_QUEUES` below the local
//! rank count), a sender claims a position (a fetch-and-add on the tail)
//! and then stamps the slot. A sender killed between the two leaves the
//! position empty for good, and the queue is read in order: what the other
//! senders published behind it is never read, and they wait for credit.
//! Nothing in the protocol can tell such a hole from a sender that is
//! merely slow, so the queue is not repaired (skipping a position a live
//! sender still writes would break the queue). It is reported: once a rank
//! that writes on the queue has died or left without closing (a rank that
//! ends on an error may leave unwritten the send it was waiting in, see
//! `shared_send`) and the head has stayed claimed but
//! unwritten for [`HOLE_GRACE`], the next look ([`ShmTransport::check_peers`],
//! which every blocking wait makes each `HEALTH_EVERY`) returns
//! [`ProtocolError::QueueHole`], once per queue.
//!
//! A writer that gives up a position it claimed while it lives (it judged
//! the queue's stamp corrupt, see `shared_send`) leaves the job with a
//! note on its lifeline naming the queue's owner and the position
//! ([`abandoned_note`]): no writer can still write that position, so a
//! head stuck there is reported at once, without the grace.

use super::liveness::Life;
use super::ShmTransport;
use crate::error::ProtocolError;
use std::time::{Duration, Instant};

/// How long a claimed head may stay unwritten after a writer's death or
/// departure before it is reported: the claim-to-stamp window of a live sender is
/// a few instructions, unless the sender is descheduled.
pub(super) const HOLE_GRACE: Duration = Duration::from_secs(1);

/// How many consecutive positions an [`abandoned_note`] tells apart.
const NOTE_POSITIONS: u64 = 1 << 19;

// The note holds an SMT id in its top 12 bits.
const _: () = assert!(super::layout::MAX_LOCAL_RANKS <= 1 << 12);

/// The lifeline note (`LifeGuard::set_left_noting`) of a writer that
/// abandoned position `pos` of the queue it writes on SMT id `owner`:
/// the owner in the top 12 bits, the position's low 19 bits plus one
/// below (never 0, the lifeline's "no note").
pub(super) fn abandoned_note(owner: u32, pos: u64) -> u32 {
    (owner << 20) | ((pos % NOTE_POSITIONS) as u32 + 1)
}

/// Per receive queue: since when its head has been claimed and unwritten,
/// and whether its hole was reported.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct HoleWatch {
    stuck: Option<(u64, Instant)>,
    reported: bool,
}

impl ShmTransport {
    /// The first shared queue whose head is a hole (see the module docs),
    /// once per queue.
    pub(crate) fn find_hole(&mut self) -> Option<ProtocolError> {
        for qi in 0..self.rx.len() {
            let rq = &self.rx[qi];
            let watch = self.holes[qi];
            if !rq.q.is_shared() || watch.reported {
                continue;
            }
            let head = rq.head;
            // While this rank holds the fragment one lap before the head,
            // a live sender that claimed the head waits for it to be
            // released (`wait_recycled`): that is no hole.
            let stuck = !rq.watch.ready()
                && rq.q.claimed() > head
                && !self.recycled_at[qi].holds_lap_before(head, rq.q.capacity());
            if stuck {
                if let Some(left) = self.abandoner_of(qi, head) {
                    return Some(self.report_hole(qi, head, left));
                }
            }
            let since = match watch.stuck {
                Some((h, since)) if stuck && h == head => since,
                _ => {
                    self.holes[qi].stuck = stuck.then(|| (head, Instant::now()));
                    continue;
                }
            };
            if since.elapsed() < HOLE_GRACE {
                continue;
            }
            if let Some(died) = self.dead_writer_of(qi) {
                return Some(self.report_hole(qi, head, died));
            }
        }
        None
    }

    /// The hole at `head` of our queue `qi`, left by rank `died`: said
    /// once, and this rank leaves the job (`leave_over_queue`).
    fn report_hole(&mut self, qi: usize, head: u64, died: u32) -> ProtocolError {
        self.holes[qi].reported = true;
        let e = ProtocolError::QueueHole {
            queue: qi as u32,
            head,
            died,
        };
        self.leave_over_queue(&e);
        e
    }

    /// The rank that writes on our queue `qi` and left noting that it
    /// abandoned position `head` of it ([`abandoned_note`]). The note
    /// keeps only the position's low bits, which tell it from the head
    /// exactly: the head never passes the abandoned position, which lies
    /// below the tail, itself at most a capacity above the head (what the
    /// audit holds it to), and a capacity is at most [`NOTE_POSITIONS`]
    /// (else no note is trusted and the grace applies).
    fn abandoner_of(&self, qi: usize, head: u64) -> Option<u32> {
        if self.rx[qi].q.capacity() > NOTE_POSITIONS {
            return None;
        }
        let note = abandoned_note(self.me_smt, head);
        (0..self.lives.len())
            .filter(|&s| s as u32 != self.me_smt)
            .map(|s| (s, self.rank_of_smt[s]))
            .find(|&(s, rank)| {
                self.peer_of_rank[rank as usize].1 == qi as u32
                    && self.lives[s].state() == Life::Left
                    && self.lives[s].left_note() == note
            })
            .map(|(_, rank)| rank)
    }

    /// A rank that writes on our queue `qi` and whose lifeline says it
    /// died or left without closing: either may have claimed a position
    /// and never written it (a rank that ends on an error gives up the
    /// send it was waiting in, see `shared_send`). A rank that closed did
    /// not: the close barrier waits for every message.
    fn dead_writer_of(&self, qi: usize) -> Option<u32> {
        (0..self.lives.len())
            .filter(|&s| s as u32 != self.me_smt)
            .map(|s| (s, self.rank_of_smt[s]))
            .find(|&(s, rank)| {
                self.peer_of_rank[rank as usize].1 == qi as u32
                    && matches!(self.lives[s].state(), Life::Dead | Life::Left)
            })
            .map(|(_, rank)| rank)
    }
}
