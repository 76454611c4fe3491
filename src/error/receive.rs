//! Why receiving failed: inside a handler ([`ReceiveError`]) and in
//! `extract` and the waits built on it ([`ExtractError`]), peers'
//! failures included.

use super::{BoxError, NetError, ProtocolError};
use crate::id::Rank;

/// Receiving from a message inside a handler failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReceiveError {
    /// The `Message` was used after its handler finished.
    #[error("message handle used after its handler returned")]
    Stale,
    /// The message ended short: its sender aborted it (sent fewer or more
    /// bytes than it declared, or dropped its writer), died while sending
    /// it, or broke it off. The bytes received before are what it sent;
    /// nothing was padded.
    #[error("message from rank {src} was aborted after {received} of its {declared} declared bytes (the sender aborted it or failed mid-stream)")]
    Aborted {
        /// The sender.
        src: Rank,
        /// The length it declared.
        declared: u64,
        /// Bytes that arrived before the abort.
        received: u64,
    },
    /// A message is longer than its receiver's bound: the bound a
    /// whole-message handler was registered with (nothing of it was
    /// handed to the handler), or the bound of
    /// [`Message::receive_vec`](crate::Message::receive_vec) (nothing was
    /// allocated).
    #[error("message from rank {src} declares {len} bytes; its receiver takes at most {max}")]
    TooLong {
        /// The sender.
        src: Rank,
        /// The message's length.
        len: u64,
        /// The handler's bound.
        max: u64,
    },
}

/// `extract` (progress) reported a problem. The engine stays usable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExtractError {
    /// A peer broke the protocol; the bad fragment was dropped.
    #[error("protocol error: {0}")]
    Protocol(#[from] ProtocolError),
    /// A handler returned an error.
    #[error("handler {handler:?} failed on a message from rank {src}: {source}")]
    Handler {
        /// Sender of the message.
        src: Rank,
        /// Handler name.
        handler: String,
        /// The handler's error.
        source: BoxError,
    },
    /// A peer process died, or ended without leaving in order (killed,
    /// crashed, `exit` without dropping its endpoint). Sticky: every later
    /// blocking call (and every send to that rank) fails too.
    #[error("rank {rank} (pid {pid}, as it recorded it in its PID namespace) died or exited without closing its endpoint")]
    PeerDied {
        /// The dead rank.
        rank: Rank,
        /// Its pid, as it recorded it (meaningful in its PID namespace).
        pid: u32,
    },
    /// A peer dropped its endpoint without calling `close` (the process
    /// may live on). Sticky, like [`PeerDied`](Self::PeerDied).
    #[error("rank {rank} left the job without calling close (its endpoint was dropped)")]
    PeerLeft {
        /// The rank that left.
        rank: Rank,
    },
    /// A network peer failed or broke the wire protocol.
    #[error(transparent)]
    Network(#[from] NetError),
    /// The job's supervisor asked every rank to give up (another rank failed).
    #[error("aborted: another rank of the job failed")]
    Aborted,
    /// An idle hook ([`EndpointBuilder::on_idle`]) returned an error.
    ///
    /// [`EndpointBuilder::on_idle`]: crate::EndpointBuilder::on_idle
    #[error("idle hook failed: {source}")]
    IdleHook {
        /// The hook's error.
        source: BoxError,
    },
    /// Termination round `round` (the ranks' `round`-th call of
    /// `quiesce` or `close`, counted from 0) was `quiesce` on one rank and
    /// `close` on another: every rank must make the same sequence of such
    /// calls. Sticky: later rounds fail too.
    #[error("termination round {round}: rank {quiescing} called quiesce while rank {closing} called close; every rank must call quiesce and close in the same sequence")]
    CloseQuiesceMismatch {
        /// The round (0 = the first `quiesce` or `close` of the job).
        round: u32,
        /// A rank in `quiesce`.
        quiescing: Rank,
        /// A rank in `close`.
        closing: Rank,
    },
}

impl ExtractError {
    /// The peer this error says has failed (died, left without closing,
    /// lost its connection, corrupted the queue or ring it writes), if it
    /// is such an error.
    pub fn failed_peer(&self) -> Option<Rank> {
        match self {
            ExtractError::PeerDied { rank, .. } | ExtractError::PeerLeft { rank } => Some(*rank),
            // Its ring is out of service: nothing more from it arrives, and
            // a send waiting for its credit would wait for ever.
            ExtractError::Protocol(ProtocolError::RingCorrupt { src, .. }) => Some(Rank(*src)),
            ExtractError::Protocol(
                ProtocolError::PeerQueueCorrupt { dest, .. }
                | ProtocolError::PeerFramesCorrupt { dest, .. }
                | ProtocolError::PeerCreditCorrupt { dest, .. }
                | ProtocolError::PeerQueueStuck { dest, .. },
            ) => Some(Rank(*dest)),
            ExtractError::Network(
                NetError::Disconnected { rank, .. }
                | NetError::BadRecord { rank, .. }
                | NetError::Io { rank, .. }
                | NetError::HostSilent { rank, .. }
                | NetError::Unreachable { rank, .. },
            ) => Some(*rank),
            _ => None,
        }
    }
}
