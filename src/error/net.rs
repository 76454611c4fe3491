//! The network transports' errors: the connection as a whole
//! ([`NetError`]), its handshake ([`HandshakeError`]), connecting
//! ([`ConnectError`]), and the RDMA providers ([`VerbsError`],
//! [`OfiError`]).

use crate::id::Rank;
use std::time::Duration;

/// A network peer failed after start-up. The peer is marked gone; other
/// peers are unaffected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// The peer closed its connection without the goodbye record.
    #[error("rank {rank} closed its connection without saying goodbye{}; it is taken as dead", if *mid_record { ", in the middle of a write record (the partial record was dropped)" } else { "" })]
    Disconnected {
        /// The peer.
        rank: Rank,
        /// Whether a write record was cut short.
        mid_record: bool,
    },
    /// The peer sent a write record that breaks the wire protocol.
    #[error("rank {rank} sent a malformed write record ({what}); its connection is closed")]
    BadRecord {
        /// The peer.
        rank: Rank,
        /// What was wrong.
        what: String,
    },
    /// The peer's connection, set up on first use (`FASTMSG_CONNECT=lazy`),
    /// could not be made: its listener is gone (the process died), the
    /// connect timeout passed, or it failed to authenticate.
    #[error("could not connect to rank {rank} on first use: {why}")]
    Unreachable {
        /// The peer.
        rank: Rank,
        /// What failed (the connection error, naming the peer's address).
        why: String,
    },
    /// The peer's host stopped answering: no keepalive probe answered and
    /// no data acknowledged for `FASTMSG_NET_DEAD_AFTER_MS` (3 s by
    /// default). The host crashed, lost power, or the network between the
    /// two is cut; a peer *process* that dies on a live host is
    /// [`Disconnected`](NetError::Disconnected) instead, at once.
    #[error("rank {rank}'s host stopped answering on the network ({why}); it is taken as dead (crashed, powered off or cut off)")]
    HostSilent {
        /// The peer.
        rank: Rank,
        /// The OS error the connection ended with.
        why: String,
    },
    /// A socket operation on the peer's connection failed.
    #[error("connection to rank {rank}: {op} failed: {msg}")]
    Io {
        /// The peer.
        rank: Rank,
        /// What was attempted.
        op: &'static str,
        /// The OS error.
        msg: String,
    },
}

/// Authenticating a network connection failed; the connection is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The first bytes are not fastmsg's greeting.
    #[error("not a fastmsg peer (greeting {found:#018x})")]
    BadMagic {
        /// What was found.
        found: u64,
    },
    /// Another wire version.
    #[error("wire version {found}, this build speaks {expected}: rebuild every rank with the same fastmsg")]
    Version {
        /// Version found.
        found: u32,
        /// Version expected.
        expected: u32,
    },
    /// The proof of the job secret did not verify.
    #[error("wrong job secret (authentication code mismatch)")]
    BadSecret,
    /// The peer belongs to another job or names an impossible rank.
    #[error("peer is {what}")]
    WrongPeer {
        /// What was wrong.
        what: String,
    },
    /// The two ends disagree on a setting.
    #[error(
        "peer uses {what} = {theirs}, this rank {ours}: start every rank with the same settings"
    )]
    Mismatch {
        /// Which setting.
        what: &'static str,
        /// Our value.
        ours: u64,
        /// Theirs.
        theirs: u64,
    },
    /// The peer went silent or closed during the handshake.
    #[error("handshake cut short: {0}")]
    Io(String),
}

/// Joining a multi-host job failed: rendezvous, connection set-up or
/// authentication.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// A socket operation failed.
    #[error("{op} {peer} failed: {source}")]
    Io {
        /// What was attempted.
        op: &'static str,
        /// The address or rank concerned.
        peer: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A peer that should be part of the job failed to authenticate.
    #[error("authenticating {peer}: {source}")]
    Handshake {
        /// The address or rank concerned.
        peer: String,
        /// What failed.
        source: HandshakeError,
    },
    /// Peers did not appear in time.
    #[error("waited {waited:?} for {what}; are all ranks of the job started with the same FASTMSG_ROOT and secret?")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        waited: Duration,
    },
    /// The rendezvous produced an impossible job map.
    #[error("rendezvous: {0}")]
    Rendezvous(String),
    /// A rank joined the rendezvous and then ended (its connection to
    /// rank 0 closed) before every rank had joined: the job cannot start.
    /// Rank 0 finds it and tells every rank that joined.
    #[error("rank {rank} joined the rendezvous at {root} and then ended (its connection closed) before every rank had joined; the job cannot start without it")]
    RankGone {
        /// The rank that ended.
        rank: u32,
        /// Where the rendezvous was served.
        root: String,
    },
}

/// The RDMA verbs backend could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerbsError {
    /// This build has no verbs backend.
    #[error("FASTMSG_NET=verbs, but fastmsg was built without the `verbs` feature (cargo build --features verbs)")]
    NotBuilt,
    /// No RDMA device could be found.
    #[error("no RDMA device found (ibv_get_device_list: {why}); use FASTMSG_NET=tcp on hosts without RDMA hardware")]
    NoDevice {
        /// What rdma-core said.
        why: String,
    },
    /// A verbs call failed.
    #[error("{call} failed on {device}: {why}")]
    Call {
        /// The verbs function.
        call: &'static str,
        /// The device name.
        device: String,
        /// errno or status.
        why: String,
    },
}

/// The libfabric transport (`FASTMSG_NET=ofi`) could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OfiError {
    /// This build has no libfabric transport.
    #[error("FASTMSG_NET=ofi, but fastmsg was built without the `ofi` feature (cargo build --features ofi; needs libfabric-dev)")]
    NotBuilt,
    /// No provider offers what the transport needs (RMA writes on a
    /// reliable datagram endpoint), or `FI_PROVIDER` names none there is.
    #[error("no libfabric provider {provider:?} with RMA writes on an RDM endpoint here ({why}); set FI_PROVIDER to one that `fi_info -c FI_RMA -t FI_EP_RDM` lists, or use FASTMSG_NET=tcp")]
    NoProvider {
        /// The provider asked for (`FI_PROVIDER`, or the default).
        provider: String,
        /// What libfabric said.
        why: String,
    },
    /// A libfabric call failed.
    #[error("{call} failed on provider {provider}: {why}")]
    Call {
        /// The libfabric function (or set-up step).
        call: String,
        /// The provider.
        provider: String,
        /// libfabric's message.
        why: String,
    },
}
