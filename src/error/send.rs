//! Why a send or a one-sided put failed: [`SendError`], [`PutError`].

use crate::id::Rank;

/// A send could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The destination is not a rank of the job.
    #[error("destination rank {dest} is out of range (job has {size} ranks)")]
    BadDestination {
        /// Destination given.
        dest: Rank,
        /// Ranks in the job.
        size: u32,
    },
    /// The handler id is not registered.
    #[error("handler id {id} is not registered ({registered} handlers)")]
    UnknownHandler {
        /// Id given.
        id: u32,
        /// Registry size.
        registered: u32,
    },
    /// A piece would pass the length `begin_message` declared: nothing of
    /// it was sent and the message was aborted (its handler is told).
    #[error("message declared {declared} bytes, piece would make it {attempted}; the message was aborted")]
    Overflow {
        /// Declared length.
        declared: u64,
        /// Length the piece would reach.
        attempted: u64,
    },
    /// `end` was called (or the writer dropped) before `declared` bytes
    /// were sent: the message was aborted — its handler sees the bytes sent
    /// and then the abort
    /// ([`ReceiveError::Aborted`](super::ReceiveError::Aborted), or a
    /// piece flagged aborted), never padding.
    #[error("message declared {declared} bytes but only {written} were sent; it was aborted")]
    Short {
        /// Declared length.
        declared: u64,
        /// Bytes written.
        written: u64,
    },
    /// The destination process is gone: it exited, died, or failed on
    /// the network (the next `extract` or wait names how, once).
    #[error("rank {rank} has failed (it exited, died, left its queue corrupt or failed on the network; the next extract or wait names how): cannot send to it")]
    PeerGone {
        /// The dead rank.
        rank: Rank,
    },
    /// The destination's host fell silent while this send waited for it:
    /// nothing it sent was acknowledged and no keepalive probe answered for
    /// `FASTMSG_NET_DEAD_AFTER_MS`, so it is taken as dead (crashed,
    /// powered off or cut off). Unlike [`PeerGone`](SendError::PeerGone),
    /// the cause is silence, not a closed connection or an exited process:
    /// a lossy network may call for a longer `FASTMSG_NET_DEAD_AFTER_MS`.
    #[error("rank {rank}'s host stopped answering on the network ({why}) for FASTMSG_NET_DEAD_AFTER_MS; it is taken as dead: cannot send to it")]
    PeerSilent {
        /// The silent rank.
        rank: Rank,
        /// What went unanswered (the OS error or the silence watch's account).
        why: String,
    },
    /// The destination's network connection, made on first use
    /// (`FASTMSG_CONNECT=lazy`), could not be made: this rank is out of
    /// file descriptors, the peer did not answer within `FASTMSG_TIMEOUT`,
    /// its listener is gone, or it failed to authenticate. Every later send
    /// or put to it fails the same way.
    #[error("could not connect to rank {rank} on first use: {why}")]
    Unreachable {
        /// The destination.
        rank: Rank,
        /// What failed (the connection error, naming the peer's address).
        why: String,
    },
    /// The message was aborted by an earlier error of this writer; start
    /// a new one.
    #[error("the message to rank {dest} was already aborted by an earlier error")]
    MessageAborted {
        /// Its destination.
        dest: Rank,
    },
    /// The job's supervisor asked every rank to give up while this send
    /// waited for credit.
    #[error("aborted while waiting for credit: another rank of the job failed")]
    Aborted,
    /// This rank left the job over a shared-memory queue (`why`): one of
    /// its own receive queues was found corrupt or stopped at a hole, or
    /// a send gave up a position it had claimed on a peer's queue. Its
    /// peers take it as gone, so nothing it sends can be relied on any
    /// more; every later wait reports `why`.
    #[error("rank {rank} has left the job over a corrupt shared-memory queue ({why}); it cannot send any more")]
    LeftJob {
        /// This rank.
        rank: Rank,
        /// Why it left.
        why: crate::error::ProtocolError,
    },
    /// This rank's `close` has returned (the send came through a `Ctx`
    /// kept past it): nothing is sent any more.
    #[error("rank {rank} has closed its endpoint; it cannot send any more")]
    Closed {
        /// This rank.
        rank: Rank,
    },
}

/// A one-sided put or window read could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PutError {
    /// The destination is not a rank of the job.
    #[error("destination rank {dest} is out of range (job has {size} ranks)")]
    BadDestination {
        /// Destination given.
        dest: Rank,
        /// Ranks in the job.
        size: u32,
    },
    /// The window id is not registered.
    #[error("window id {id} is not registered ({registered} windows)")]
    UnknownWindow {
        /// Id given.
        id: u32,
        /// Windows registered.
        registered: u32,
    },
    /// The access runs past the window.
    #[error("{len} bytes at offset {offset} run past window {window:?} of {size} bytes")]
    OutOfBounds {
        /// Window name.
        window: String,
        /// Offset given.
        offset: usize,
        /// Length given.
        len: usize,
        /// Window size.
        size: u64,
    },
    /// A word access at an offset that is not a multiple of 8.
    #[error("8-byte word access at offset {offset}, which is not a multiple of 8")]
    Misaligned {
        /// Offset given.
        offset: usize,
    },
    /// The destination process is gone: it exited, died, or failed on
    /// the network (the next `extract` or wait names how, once).
    #[error("rank {rank} has failed (it exited, died, left its queue corrupt or failed on the network; the next extract or wait names how): cannot put to it")]
    PeerGone {
        /// The dead rank.
        rank: Rank,
    },
    /// The destination's host stopped answering on the network and was
    /// taken as dead (as [`SendError::PeerSilent`]): the cause is silence
    /// for `FASTMSG_NET_DEAD_AFTER_MS`, not an exited process.
    #[error("rank {rank}'s host stopped answering on the network ({why}) for FASTMSG_NET_DEAD_AFTER_MS; it is taken as dead: cannot put to it")]
    PeerSilent {
        /// The silent rank.
        rank: Rank,
        /// What went unanswered (the OS error or the silence watch's account).
        why: String,
    },
    /// The destination's network connection, made on first use, could not
    /// be made (as [`SendError::Unreachable`]).
    #[error("could not connect to rank {rank} on first use: {why}")]
    Unreachable {
        /// The destination.
        rank: Rank,
        /// What failed (the connection error, naming the peer's address).
        why: String,
    },
    /// A direct access (a `get`, a remote atomic) to a rank on another
    /// host: only ranks sharing this host's memory are reached directly;
    /// across hosts the owner applies the operation in a handler
    /// (`fastmsg-handlers`' remote memory does).
    #[error("rank {rank} is on another host: its window cannot be reached directly")]
    NotOnHost {
        /// The destination.
        rank: Rank,
    },
    /// The endpoint has been closed: its windows are no longer reachable.
    #[error("the endpoint is closed: windows cannot be reached any more")]
    Closed,
    /// A write (`put`, `put_u64`, a direct `update_u64`) to another rank's
    /// owner-only window (registered with `window_owner_only`): only the
    /// rank a window belongs to writes it, since it updates the words as
    /// their only writer and a write made meanwhile would be lost. Send the
    /// owner the update instead (its handler applies it); reads are
    /// allowed.
    #[error("window {window:?} is owner-only: only rank {owner} writes its own; send it the update instead")]
    OwnerOnly {
        /// The window.
        window: String,
        /// The rank whose window it is.
        owner: Rank,
    },
    /// An update as the only writer (`update_own_words_unshared`) of a
    /// window not registered owner-only: other ranks may update its words
    /// directly, so they need atomic updates (`update_own_words`).
    #[error("window {window:?} is not owner-only: other ranks may write it, so its words need atomic updates")]
    NotOwnerOnly {
        /// The window.
        window: String,
    },
}
