//! Errors: one small enum per operation (iceoryx2 style), each variant
//! naming the rank, peer, handler or file it concerns, and the crate-level
//! [`Error`] that any of them converts into.
//!
//! Bad input from another process or the network is always one of these,
//! never a panic: see [`ProtocolError`] and [`SegmentError`].
//!
//! One file per family — `protocol` (a peer broke the protocol),
//! `segment` (the shared segment), `config` (settings and environment),
//! `launcher` (PMI and PMIx), `start`, `send` (sends and puts), `receive`
//! (handlers' receives and `extract`), `net` (network transports) — and
//! every type re-exported here, its one path being `fastmsg::error::*`.
//!
//! The families sit here, in the bottom layer, rather than beside the
//! modules that raise them, because the errors that wrap them are raised
//! across layers: `StartError` carries segment, network, PMI and PMIx
//! errors up from start-up, `NetError` is raised by `netio`, the
//! transports and the endpoint alike, and `ProtocolError` by the queues,
//! the rings and the receive path. Beside their raisers, each wrapper
//! would import from the layers above it.

mod config;
mod launcher;
mod net;
mod protocol;
mod receive;
mod segment;
mod send;
mod start;

pub use config::ConfigError;
pub use launcher::{Pmi2Error, PmixError};
pub use net::{ConnectError, HandshakeError, NetError, OfiError, VerbsError};
pub use protocol::ProtocolError;
pub use receive::{ExtractError, ReceiveError};
pub use segment::SegmentError;
pub use send::{PutError, SendError};
pub use start::{Attendance, StartError};

/// A boxed error returned by a user's handler.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Any fastmsg error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// See [`ConfigError`].
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// See [`StartError`].
    #[error(transparent)]
    Start(#[from] StartError),
    /// See [`SendError`].
    #[error(transparent)]
    Send(#[from] SendError),
    /// See [`ReceiveError`].
    #[error(transparent)]
    Receive(#[from] ReceiveError),
    /// See [`PutError`].
    #[error(transparent)]
    Put(#[from] PutError),
    /// See [`ExtractError`].
    #[error(transparent)]
    Extract(#[from] ExtractError),
    /// See [`SegmentError`].
    #[error(transparent)]
    Segment(#[from] SegmentError),
    /// An error of a library or program built on fastmsg (a collectives
    /// library, a user's handler logic), carried through code that returns
    /// [`Error`]; make one with [`Error::other`].
    #[error(transparent)]
    Other(BoxError),
}

impl From<ProtocolError> for Error {
    fn from(e: ProtocolError) -> Self {
        Error::Extract(ExtractError::Protocol(e))
    }
}

impl Error {
    /// Wrap any other error, e.g. `.map_err(Error::other)?` on a library's
    /// own error type.
    pub fn other(e: impl Into<BoxError>) -> Error {
        Error::Other(e.into())
    }

    /// Whether this error says that another rank failed, left or is
    /// gone (`PeerDied`, `PeerLeft`, a lost connection, `PeerGone`): in a
    /// job whose ranks end together, the consequence of that rank's own
    /// error rather than a cause.
    pub fn is_peer_failure(&self) -> bool {
        match self {
            Error::Extract(e) | Error::Start(StartError::Exchange(e)) => e.failed_peer().is_some(),
            Error::Send(SendError::PeerGone { .. } | SendError::PeerSilent { .. })
            | Error::Put(PutError::PeerGone { .. } | PutError::PeerSilent { .. })
            | Error::Segment(SegmentError::RankGone { .. } | SegmentError::CreatorFailed { .. })
            | Error::Start(StartError::Segment(
                SegmentError::RankGone { .. } | SegmentError::CreatorFailed { .. },
            ))
            | Error::Start(StartError::Network(ConnectError::RankGone { .. })) => true,
            _ => false,
        }
    }

    /// Whether this error only says the job was abandoned because another
    /// rank failed (not a cause in itself).
    pub fn is_abort(&self) -> bool {
        matches!(
            self,
            Error::Extract(ExtractError::Aborted)
                | Error::Send(SendError::Aborted)
                | Error::Segment(SegmentError::Aborted { .. })
                | Error::Start(StartError::Segment(SegmentError::Aborted { .. }))
                | Error::Start(StartError::Exchange(ExtractError::Aborted))
        )
    }
}
