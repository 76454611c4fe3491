//! [`CollError`]: everything a collective can fail with, each variant
//! naming the rank, group, instance or limit concerned.
//!
//! Bad input from a peer (a malformed or unexpected collective message) is
//! one of these, never a panic: the handler returns it (so `extract`
//! reports it as a handler error) and the instance it concerns fails with
//! it, so its `wait` reports it too.

use fastmsg::error::{ExtractError, PutError, SendError};
use fastmsg::Rank;

/// A collective failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CollError {
    /// Sending a collective message failed.
    #[error("collective send failed: {0}")]
    Send(#[from] SendError),
    /// A one-sided put or window read failed.
    #[error("collective window access failed: {0}")]
    Put(#[from] PutError),
    /// Progress failed while waiting for a collective.
    #[error("progress failed while waiting for a collective: {0}")]
    Extract(#[from] ExtractError),
    /// A message too short to hold the collective header.
    #[error(
        "collective message from rank {src} is {len} bytes, shorter than the {need}-byte header"
    )]
    ShortMessage {
        /// Sender.
        src: Rank,
        /// Its length.
        len: usize,
        /// Header length.
        need: usize,
    },
    /// The ranks called different collectives as the same instance (every
    /// member of a group must call the same collectives in the same order).
    #[error("collective #{seq} of group {group:#x}: this rank runs {ours}, rank {src} sent a message of {theirs}; every member must call the same collectives in the same order")]
    Mismatch {
        /// Group tag.
        group: u32,
        /// Instance number in the group.
        seq: u32,
        /// Our collective.
        ours: &'static str,
        /// What the message belongs to.
        theirs: &'static str,
        /// Sender.
        src: Rank,
    },
    /// The ranks called the same collective as one instance with different
    /// arguments: operator, element type, root, algorithm, or (one-sided
    /// algorithms) length.
    #[error("collective #{seq} of group {group:#x}: this rank called {ours}, rank {src} called {theirs}; every member must pass the same operator, element type, length, root and algorithm")]
    ArgsMismatch {
        /// Group tag.
        group: u32,
        /// Instance number in the group.
        seq: u32,
        /// This rank's call, in words.
        ours: String,
        /// The other rank's call, in words.
        theirs: String,
        /// The other rank.
        src: Rank,
    },
    /// Another member found this collective broken (a mismatch, a bad
    /// message, a failed send) and abandoned it; every member fails.
    #[error("collective #{seq} of group {group:#x} was abandoned: it failed on rank {by}: {why}")]
    Aborted {
        /// Group tag.
        group: u32,
        /// Instance number.
        seq: u32,
        /// The rank where it failed.
        by: Rank,
        /// Its error, in words.
        why: String,
    },
    /// A message the algorithm does not expect (wrong step, wrong sender,
    /// a duplicate, or for an instance already finished).
    #[error("collective #{seq} ({kind}) of group {group:#x}: unexpected message from rank {src} for step {step}: {why}")]
    Unexpected {
        /// Group tag.
        group: u32,
        /// Instance number.
        seq: u32,
        /// Collective kind.
        kind: &'static str,
        /// Sender.
        src: Rank,
        /// Step the message names.
        step: u16,
        /// What is wrong.
        why: &'static str,
    },
    /// A message of the wrong length (ranks passed different counts).
    #[error("collective #{seq} ({kind}): rank {src} sent {got} bytes for step {step}, expected {expected}; every member must pass the same element count and type")]
    LengthMismatch {
        /// Instance number.
        seq: u32,
        /// Collective kind.
        kind: &'static str,
        /// Sender.
        src: Rank,
        /// Step.
        step: u16,
        /// Bytes received.
        got: usize,
        /// Bytes expected.
        expected: usize,
    },
    /// The buffer for messages of instances not started yet is full; the
    /// message was dropped and the collective it belongs to cannot finish.
    #[error("early-message buffer full: {messages} messages / {bytes} bytes buffered (limits {max_messages} / {max_bytes}); dropped a message from rank {src} for collective #{seq} of group {group:#x}. Start fewer collectives ahead of this rank, or raise CollConfig::max_early_messages / max_early_bytes")]
    EarlyOverflow {
        /// Sender of the dropped message.
        src: Rank,
        /// Its group.
        group: u32,
        /// Its instance.
        seq: u32,
        /// Messages buffered.
        messages: usize,
        /// Bytes buffered.
        bytes: usize,
        /// Message limit.
        max_messages: usize,
        /// Byte limit.
        max_bytes: usize,
    },
    /// The collectives failed earlier, here or on a member (a dropped
    /// message, a one-sided failure, members that called a rooted
    /// collective with different arguments): they cannot be trusted to
    /// finish collectives any more, and every call fails with this, naming
    /// the first failure. (A call refused with it is aborted on every member
    /// of its group, so no member waits for this rank.)
    #[error("the collective engine failed earlier and is unusable: {0}")]
    Poisoned(String),
    /// This rank is not a member of the group.
    #[error("rank {rank} is not a member of the group {members:?}")]
    NotMember {
        /// This rank.
        rank: Rank,
        /// The group.
        members: Vec<Rank>,
    },
    /// A group definition is invalid.
    #[error("invalid group: {0}")]
    BadGroup(String),
    /// The chosen algorithm cannot run here.
    #[error("{algo} cannot run here: {why}")]
    Unavailable {
        /// The algorithm.
        algo: &'static str,
        /// Why not.
        why: String,
    },
    /// A reduction operator is not defined on the element type.
    #[error("operator {op} is not defined on {ty}")]
    OpUndefined {
        /// The operator.
        op: &'static str,
        /// The element type.
        ty: &'static str,
    },
    /// Arguments of the call are inconsistent.
    #[error("bad argument: {0}")]
    BadArgument(String),
    /// The request's endpoint is not the one the collectives are used on.
    #[error("collective #{seq}: no such instance (already waited for?)")]
    NoInstance {
        /// Instance number.
        seq: u32,
    },
}

impl CollError {
    /// A copy for a second reader (the instance keeps one, `extract`
    /// reports the other). Errors from the engine are flattened to text.
    pub(crate) fn duplicate(&self) -> CollError {
        match self {
            CollError::ShortMessage { src, len, need } => CollError::ShortMessage {
                src: *src,
                len: *len,
                need: *need,
            },
            CollError::Mismatch {
                group,
                seq,
                ours,
                theirs,
                src,
            } => CollError::Mismatch {
                group: *group,
                seq: *seq,
                ours,
                theirs,
                src: *src,
            },
            CollError::Unexpected {
                group,
                seq,
                kind,
                src,
                step,
                why,
            } => CollError::Unexpected {
                group: *group,
                seq: *seq,
                kind,
                src: *src,
                step: *step,
                why,
            },
            CollError::LengthMismatch {
                seq,
                kind,
                src,
                step,
                got,
                expected,
            } => CollError::LengthMismatch {
                seq: *seq,
                kind,
                src: *src,
                step: *step,
                got: *got,
                expected: *expected,
            },
            CollError::EarlyOverflow {
                src,
                group,
                seq,
                messages,
                bytes,
                max_messages,
                max_bytes,
            } => CollError::EarlyOverflow {
                src: *src,
                group: *group,
                seq: *seq,
                messages: *messages,
                bytes: *bytes,
                max_messages: *max_messages,
                max_bytes: *max_bytes,
            },
            CollError::ArgsMismatch {
                group,
                seq,
                ours,
                theirs,
                src,
            } => CollError::ArgsMismatch {
                group: *group,
                seq: *seq,
                ours: ours.clone(),
                theirs: theirs.clone(),
                src: *src,
            },
            CollError::Aborted {
                group,
                seq,
                by,
                why,
            } => CollError::Aborted {
                group: *group,
                seq: *seq,
                by: *by,
                why: why.clone(),
            },
            CollError::Put(e) => CollError::Put(e.clone()),
            CollError::Poisoned(why) => CollError::Poisoned(why.clone()),
            other => CollError::Poisoned(other.to_string()),
        }
    }
}

/// `?` on a collective in code that returns [`fastmsg::Error`]. A failed
/// send, put or progress becomes fastmsg's own variant (so
/// [`fastmsg::Error::is_peer_failure`] and
/// [`fastmsg::Error::is_abort`] see a peer's failure through a collective
/// too); every other error is carried whole in [`fastmsg::Error::Other`],
/// its text and source chain unchanged, and can be recovered with
/// `downcast_ref::<CollError>()`.
///
/// ```
/// use fastmsg::threads;
/// use fastmsg_handlers::{CollConfig, CollError, Collectives};
///
/// let out = threads::run(2, |_| {}, |mut b| {
///     let coll = Collectives::register(&mut b, CollConfig::default());
///     let mut ep = b.start()?;
///     coll.barrier(&mut ep)?; // CollError → fastmsg::Error
///     // 3 elements are not one block per member: a typed error.
///     let e = fastmsg::Error::from(coll.alltoall(&mut ep, &[1u32, 2, 3]).unwrap_err());
///     ep.close()?;
///     Ok(matches!(e, fastmsg::Error::Other(ref b)
///         if matches!(b.downcast_ref::<CollError>(), Some(CollError::BadArgument(_)))))
/// }).unwrap();
/// assert_eq!(out, vec![true, true]);
/// ```
impl From<CollError> for fastmsg::Error {
    fn from(e: CollError) -> Self {
        match e {
            CollError::Send(e) => fastmsg::Error::Send(e),
            CollError::Put(e) => fastmsg::Error::Put(e),
            CollError::Extract(e) => fastmsg::Error::Extract(e),
            e => fastmsg::Error::other(e),
        }
    }
}
