//! Sends to a receive queue that several local ranks share (more ranks on
//! the host than `FASTMSG_QUEUES`): the slot and the frame come from
//! counters the senders share, so a sender may have to wait for the
//! receiver to recycle them. This module owns that wait's two ways out: a
//! stamp or flag no rank following the protocol writes (the segment was
//! scribbled on), and a receiver whose lifeline says it is gone; either
//! way nothing is published, the receiver is taken as gone, and a corrupt
//! queue's error is kept for `check_peers`. A dedicated queue's sender
//! waits on nothing in the receiver's memory and never comes here.

use super::stall::StallClock;
use super::*;
use crate::queue::{ClaimStalled, PublishStalled};

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
    /// A corrupt stamp, or the receiver gone while we waited: nothing is
    /// published (the claimed position stays empty; the queue is lost with
    /// its receiver).
    #[inline]
    pub(super) fn publish_shared(
        &self,
        write: impl FnOnce(&mut SlotBody),
    ) -> Result<(), TxStalled> {
        let pos = self.q.claim();
        let cap = self.q.capacity();
        let mut clock = StallClock::default();
        let r = self.q.publish_with(pos, write, || {
            if self.receiver_gone() {
                return true;
            }
            // Recycled for an earlier position of this slot: that
            // position's sender stamps it within moments (see `stall`).
            let seq = self.q.stamp(pos);
            clock.stuck_at(seq, seq < pos && (pos - seq) % cap == 0)
        });
        r.map_err(|e| match (e, clock.stuck) {
            (PublishStalled::GaveUp, Some((seq, waited))) => TxStalled::Stuck {
                at: StuckAt::Slot { pos, seq },
                waited,
            },
            (e, _) => TxStalled::Queue(e),
        })
    }

    /// As [`send_framed`](Self::send_framed), to a shared queue: the frame
    /// comes from the free list, the slot from the next claimed position.
    ///
    /// # Errors
    /// What the claim or the publication stalled on (nothing published).
    #[inline(never)]
    fn send_framed_shared(&self, header: FragHeader, pieces: &[&[u8]]) -> Result<(), TxStalled> {
        let mut clock = StallClock::default();
        // Asked after each whole lap without a free frame: with a credit
        // held, a free frame exists at every instant (see `stall`).
        let frame = FreeList::new(self.free_head, &self.frames)
            .claim(|| self.receiver_gone() || clock.stuck_at(0, true))
            .map_err(|e| match (e, clock.stuck) {
                (ClaimStalled::GaveUp, Some((_, waited))) => TxStalled::Stuck {
                    at: StuckAt::Frames,
                    waited,
                },
                (e, _) => TxStalled::Frames(e),
            })?;
        gather_into_frame(&self.frames, frame, pieces, header.len as usize);
        self.publish_shared(|b| fill_slot(b, header, frame, &[]))
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
    /// The slot of position `pos`, stamped `seq` (an earlier lap's).
    Slot { pos: u64, seq: u64 },
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
        let sent = if in_slot {
            // Checked before the claim: a panic in the gather after it
            // would leave the position claimed and never published.
            debug_assert!(pieces.iter().map(|p| p.len()).sum::<usize>() <= INLINE_BYTES);
            peer.publish_shared(|b| fill_slot(b, header, NO_FRAME, pieces))
        } else {
            peer.send_framed_shared(header, pieces)
        };
        match sent {
            Ok(()) => {
                self.ringer.ring(peer.bell);
                true
            }
            Err(e) => self.refuse(dest, e),
        }
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
                    StuckAt::Slot { pos, seq } => format!(
                        "the slot of position {pos} stamped {seq} (recycled for an earlier lap, never published)"
                    ),
                    StuckAt::Frames => "every frame flagged in use".to_owned(),
                },
                waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
            }),
            TxStalled::Queue(PublishStalled::GaveUp) | TxStalled::Frames(ClaimStalled::GaveUp) => {
                None
            }
        };
        self.tx_corrupt.extend(error);
        // The engine reads what happened at its next look at the alarm
        // (`extract`, any blocking wait), whether this send waits for
        // credit or parks.
        if let Some(alarm) = &self.alarm {
            alarm.raise();
        }
        false
    }
}
