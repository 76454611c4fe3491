//! What a peer did wrong on the wire or in shared memory: [`ProtocolError`].
//!
//! Bad input from another process or the network is always one of these
//! (or a [`SegmentError`](super::SegmentError) for a segment file), never a panic.

/// A peer broke the wire protocol (or memory it shares with us was
/// corrupted). The offending fragment has been dropped and its frame
/// released.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The header names a sender outside the job.
    #[error("fragment claims to come from rank {src}, but the job has {world} ranks")]
    BadSource {
        /// Claimed sender.
        src: u32,
        /// Ranks in the job.
        world: u32,
    },
    /// Unknown flag bits.
    #[error("fragment from rank {src} has unknown flag bits {flags:#x}")]
    BadFlags {
        /// Sender.
        src: u32,
        /// The flags found.
        flags: u32,
    },
    /// The payload length runs past the frame (or slot).
    #[error("fragment from rank {src} says {len} bytes, but a frame holds at most {max}")]
    FrameTooLong {
        /// Sender.
        src: u32,
        /// Length claimed.
        len: usize,
        /// Frame capacity.
        max: usize,
    },
    /// Fragment lengths do not add up to the message length.
    #[error("message from rank {src} declared {total} bytes but its fragments carry {got}")]
    LengthMismatch {
        /// Sender.
        src: u32,
        /// Declared message length.
        total: u64,
        /// Bytes seen so far.
        got: u64,
    },
    /// The handler id is not in the registry.
    #[error("message from rank {src} names handler id {id}, but only {registered} handlers are registered")]
    UnknownHandler {
        /// Sender.
        src: u32,
        /// The id found.
        id: u32,
        /// Registry size.
        registered: u32,
    },
    /// A continuation fragment arrived with no message in progress.
    #[error("rank {src} sent a continuation fragment with no message in progress")]
    MissingFirst {
        /// Sender.
        src: u32,
    },
    /// A first fragment arrived while the previous message was unfinished.
    #[error("rank {src} started a new message before finishing the previous one")]
    UnexpectedFirst {
        /// Sender.
        src: u32,
    },
    /// The descriptor names a frame that does not exist.
    #[error("fragment from rank {src} names frame {frame}, but the queue has {count} frames")]
    BadFrame {
        /// Sender.
        src: u32,
        /// Frame index found.
        frame: u32,
        /// Frames in the queue.
        count: u32,
    },
    /// A queue slot's stamp is one the protocol never leaves at the
    /// consumer's position: from neither this lap nor the last, or one
    /// lap old once the consumer recycled every slot it read.
    /// Found (on a shared queue) by a send of this rank that had claimed
    /// its position on another rank's shared queue and waited there, it
    /// also ends this rank's part in the job: that position stays empty,
    /// so this rank says it left, and that rank reports a
    /// [`QueueHole`](Self::QueueHole). On a shared queue this rank reads,
    /// it ends this rank's part too (it says it left): the queue's other
    /// senders would otherwise wait for its credit for ever.
    #[error("receive queue {queue} (written by {}) is corrupt: slot stamp {seq} at position {head}; the queue is taken out of service", match sender { Some(r) => format!("rank {r}"), None => "several ranks".to_owned() })]
    QueueCorrupt {
        /// Queue index on this rank.
        queue: u32,
        /// The rank that writes it, if the queue has one sender.
        sender: Option<u32>,
        /// Consumer position.
        head: u64,
        /// Stamp found.
        seq: u64,
    },
    /// The credit line through which this rank returns a sender's credit
    /// held a count it never published (only this rank writes it): the
    /// right count was published again, so the sender does not wait for
    /// credit for ever.
    #[error("the credit line through which this rank returns rank {src}'s credit was overwritten: it held {found}, this rank had published {released}; the count was published again")]
    CreditLineCorrupt {
        /// The sender whose credit the line returns.
        src: u32,
        /// The count found.
        found: u64,
        /// The count this rank published.
        released: u64,
    },
    /// More frames of a shared receive queue are flagged in use than its
    /// senders hold credits, while this rank holds none of them: flags
    /// the protocol never leaves set. The queue is taken out of service.
    /// Found (on a shared queue) by a send of this rank that had claimed
    /// its position on another rank's shared queue and waited there, it
    /// also ends this rank's part in the job: that position stays empty,
    /// so this rank says it left, and that rank reports a
    /// [`QueueHole`](Self::QueueHole). On a shared queue this rank reads,
    /// it ends this rank's part too (it says it left): the queue's other
    /// senders would otherwise wait for its credit for ever.
    #[error("receive queue {queue} is corrupt: {in_use} of its frames are flagged in use, but its senders hold at most {credits} credits and this rank holds no frame; the queue is taken out of service")]
    QueueFramesCorrupt {
        /// Queue index on this rank.
        queue: u32,
        /// Frames found flagged in use.
        in_use: u64,
        /// Credits its senders hold at most.
        credits: u64,
    },
    /// The receive queue through which this rank's messages to itself go
    /// was found corrupt (`why`): they cannot be delivered any more, nor
    /// what waits for them (a close among them). Reported by every
    /// blocking wait from then on.
    #[error("receive queue {queue}, which carries this rank's messages to itself, is corrupt ({why}); nothing this rank sends itself can be delivered")]
    OwnQueueCorrupt {
        /// Queue index on this rank.
        queue: u32,
        /// What was found.
        why: String,
    },
    /// A shared receive queue's tail (the count of positions its senders
    /// claimed) is below the consumer's head or more than the queue's
    /// capacity above it: values the credit protocol never allows. The
    /// queue is taken out of service.
    /// Found (on a shared queue) by a send of this rank that had claimed
    /// its position on another rank's shared queue and waited there, it
    /// also ends this rank's part in the job: that position stays empty,
    /// so this rank says it left, and that rank reports a
    /// [`QueueHole`](Self::QueueHole). On a shared queue this rank reads,
    /// it ends this rank's part too (it says it left): the queue's other
    /// senders would otherwise wait for its credit for ever.
    #[error("receive queue {queue} is corrupt: its tail says {tail} positions were claimed, with the head at {head} and {capacity} slots (the tail stays within the slots above the head); the queue is taken out of service")]
    QueueTailCorrupt {
        /// Queue index on this rank.
        queue: u32,
        /// Consumer position.
        head: u64,
        /// Tail found.
        tail: u64,
        /// Slots in the queue.
        capacity: u64,
    },
    /// A shared receive queue's head position was claimed but never
    /// written for a second after a rank that writes on the queue died or
    /// left without closing: most likely that rank died between claiming
    /// the position and writing it, or gave up that send on an error (a
    /// rank whose send gives up over a corrupt queue, its own or this one,
    /// says it left at once, for this report; one that gave up this very
    /// position over this queue's stamp names it, and the hole is reported
    /// at once). The fragments other
    /// ranks published behind it cannot be read (the queue is read in
    /// order), and their senders wait for credit that will not come: said
    /// once, and this rank leaves the job (it says it left), which ends
    /// those senders' waits. The queue is left as it is (a sender merely
    /// stopped, under a debugger say, may still write the position).
    #[error("receive queue {queue}: position {head} was claimed but is not written, and rank {died}, which writes on this queue, died or left without closing (most likely mid-send, or giving the position up over a stamp it found corrupt); what other ranks sent behind it cannot be delivered, and this rank leaves the job")]
    QueueHole {
        /// Queue index on this rank.
        queue: u32,
        /// The position that stays empty.
        head: u64,
        /// A rank that writes on the queue and died or left without
        /// closing.
        died: u32,
    },
    /// A send found the receive queue it writes on another rank corrupt:
    /// the slot it must fill (shared queues) holds a stamp the protocol
    /// never leaves there while a sender waits, or a slot it filled
    /// (dedicated queues, whose stamps only it writes) no longer holds the
    /// stamp it wrote. The fragment was not sent; the rank is taken as
    /// failed. On a shared queue, the position this rank claimed stays
    /// empty, and the receiver may not see why (its own release can
    /// overwrite the stamp found with a sound one): this rank leaves the
    /// job (it says it left, naming the position), and the receiver
    /// reports a [`QueueHole`](Self::QueueHole) there.
    #[error("the receive queue that this rank writes on rank {dest} is corrupt: slot stamp {seq} for position {pos}; rank {dest} is taken as failed")]
    PeerQueueCorrupt {
        /// The receiving rank.
        dest: u32,
        /// The position this rank was to publish at.
        pos: u64,
        /// The stamp found.
        seq: u64,
    },
    /// A send found the frames of the shared receive queue it writes on
    /// another rank corrupt: a frame's in-use flag holds a value the
    /// protocol never writes. The fragment was not sent; the rank is taken
    /// as failed.
    #[error("the receive queue that this rank writes on rank {dest} is corrupt: frame {frame} has in-use flag {flag}; rank {dest} is taken as failed")]
    PeerFramesCorrupt {
        /// The receiving rank.
        dest: u32,
        /// The frame.
        frame: u32,
        /// The flag found.
        flag: u32,
    },
    /// A send found the credit line through which another rank returns
    /// this rank's credit holding a count that rank never publishes:
    /// below one already seen (the count only grows) or above the
    /// fragments sent. The fragment was not sent; the rank is taken as
    /// failed.
    #[error("the credit line through which rank {dest} returns this rank's credit is corrupt: it holds {found}, with {sent} fragments sent and {returned} already returned; rank {dest} is taken as failed")]
    PeerCreditCorrupt {
        /// The receiving rank.
        dest: u32,
        /// The count found.
        found: u64,
        /// Fragments this rank has sent it.
        sent: u64,
        /// The count last accepted.
        returned: u64,
    },
    /// A send waited on the shared receive queue it writes on another rank
    /// while a value that the protocol leaves there only for a moment
    /// stayed unchanged (no free frame in whole laps of the free list),
    /// the rank alive: something
    /// outside the protocol wrote it. The fragment was not sent; the rank
    /// is taken as failed.
    #[error("the receive queue that this rank writes on rank {dest} is corrupt: {what} stayed unchanged for {waited_ms} ms while rank {dest} lives (the protocol leaves it only for a moment); rank {dest} is taken as failed")]
    PeerQueueStuck {
        /// The receiving rank.
        dest: u32,
        /// What stayed (the slot and its stamp, or the frames).
        what: String,
        /// How long it stayed, in milliseconds.
        waited_ms: u64,
    },
    /// A sender used a queue it is not assigned to (shared queues only).
    #[error("rank {src} wrote to receive queue {queue}, which is not its queue")]
    WrongQueue {
        /// Sender.
        src: u32,
        /// Queue index.
        queue: u32,
    },
    /// A ring slot's stamp is from neither this lap nor the last (network
    /// rings): the ring is taken out of service.
    #[error("receive ring of rank {src} is corrupt: stamp {stamp} at position {head}; the ring is taken out of service")]
    RingCorrupt {
        /// The rank that writes the ring.
        src: u32,
        /// Reader position.
        head: u64,
        /// Stamp found.
        stamp: u64,
    },
    /// A control message announces more bytes than any of its kind can
    /// hold: refused at its first fragment, before anything is buffered
    /// for it; the rest of it is dropped.
    #[error(
        "control message ({op}) from rank {src} announces {len} bytes, but one holds at most {max}"
    )]
    ControlTooLong {
        /// Sender.
        src: u32,
        /// The control operation.
        op: &'static str,
        /// Bytes announced.
        len: u64,
        /// The most that operation's message holds.
        max: u64,
    },
    /// A system (control) message had an unexpected shape.
    #[error("control message from rank {src} is malformed: {what}")]
    BadControl {
        /// Sender.
        src: u32,
        /// What was wrong.
        what: &'static str,
    },
}
