//! Why `start` failed: [`StartError`], and the roll call
//! ([`Attendance`]) it reports when ranks did not all arrive.

use super::{
    BoxError, ConfigError, ConnectError, ExtractError, OfiError, Pmi2Error, PmixError,
    SegmentError, VerbsError,
};
use crate::id::Rank;
use std::time::Duration;

/// `EndpointBuilder::start` failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// Invalid configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Shared-memory segment trouble.
    #[error(transparent)]
    Segment(#[from] SegmentError),
    /// Network start-up trouble (rendezvous, connections, authentication).
    #[error(transparent)]
    Network(#[from] ConnectError),
    /// The PMIx wire-up failed.
    #[error(transparent)]
    Pmix(#[from] PmixError),
    /// The PMI-2 or PMI-1 wire-up failed (`srun --mpi=pmi2`, MPICH's
    /// `mpiexec`).
    #[error(transparent)]
    Pmi2(#[from] Pmi2Error),
    /// The RDMA verbs backend could not start.
    #[error(transparent)]
    Verbs(#[from] VerbsError),
    /// The libfabric transport could not start.
    #[error(transparent)]
    Ofi(#[from] OfiError),
    /// A network provider without a variant of its own could not start
    /// (its name and its error).
    #[error("the {provider} network transport could not start: {source}")]
    Wire {
        /// The provider's name (`FASTMSG_NET`).
        provider: &'static str,
        /// What failed.
        source: BoxError,
    },
    /// Two handlers were registered under one name.
    #[error("handler name {name:?} registered twice (ids {first} and {second})")]
    DuplicateHandler {
        /// The name.
        name: String,
        /// First id.
        first: u32,
        /// Second id.
        second: u32,
    },
    /// A handler id was declared ([`EndpointBuilder::declare`]) and never
    /// given its function.
    ///
    /// [`EndpointBuilder::declare`]: crate::EndpointBuilder::declare
    #[error("handler {name:?} (id {id}) was declared but never defined")]
    UndefinedHandler {
        /// The id.
        id: u32,
        /// The name it was declared under.
        name: String,
    },
    /// `define*` was given an id that is not a declared, still undefined
    /// handler of this builder.
    #[error("handler id {id} cannot be defined: {why}")]
    BadDefinition {
        /// The id given.
        id: u32,
        /// What was wrong.
        why: &'static str,
    },
    /// The handler names take more than the start-up exchange carries:
    /// their table (each name with a 4-byte length, plus 4 bytes) passes
    /// `max` bytes (1 MiB).
    #[error("the {handlers} handler names take {bytes} bytes in the start-up exchange, more than its {max}: register fewer handlers or shorter names")]
    HandlerTableTooLarge {
        /// Handlers registered.
        handlers: u32,
        /// Bytes of their table.
        bytes: u64,
        /// The most a table may take.
        max: u64,
    },
    /// Handler tables differ between ranks.
    #[error("handler tables differ: handler {index} is {ours:?} on rank {our_rank} but {theirs:?} on rank {their_rank}; every rank must register the same handlers in the same order")]
    HandlerMismatch {
        /// First differing id.
        index: u32,
        /// The reporting rank (rank 0).
        our_rank: Rank,
        /// Name there (None: table shorter).
        ours: Option<String>,
        /// The differing rank.
        their_rank: Rank,
        /// Name there (None: table shorter).
        theirs: Option<String>,
    },
    /// Progress failed during the start-up exchange.
    #[error("start-up exchange failed: {0}")]
    Exchange(#[from] ExtractError),
    /// Peers did not answer in time.
    #[error(
        "waited {waited:?} for {what}; are all ranks of the job started with the same program?"
    )]
    Timeout {
        /// How long.
        waited: Duration,
        /// What we were waiting for.
        what: &'static str,
    },
}

/// Who attached to a host's segment and who did not
/// ([`SegmentError::NotAttached`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attendance {
    /// Ranks expected on this host.
    pub local: u32,
    /// The missing ranks' indices among this host's ranks.
    pub missing: Vec<u32>,
    /// The global ranks that did attach, in order.
    pub attached: Vec<u32>,
    /// The missing ranks' global ranks, where the job tells them (every
    /// rank of the job on this host).
    pub missing_ranks: Option<Vec<u32>>,
}

/// Names the missing ranks: by global rank where known, else by index on
/// this host beside the global ranks that came.
impl std::fmt::Display for Attendance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        match &self.missing_ranks {
            Some(ranks) => write!(f, "rank(s) {} never attached", list(ranks)),
            None if self.attached.is_empty() => write!(
                f,
                "the ranks with local index {} never attached, nor did any other",
                list(&self.missing)
            ),
            None => write!(
                f,
                "the ranks with local index {} never attached (global ranks {} did)",
                list(&self.missing),
                list(&self.attached)
            ),
        }
    }
}
