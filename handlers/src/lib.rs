//! # fastmsg-handlers: collectives as registered handlers
//!
//! Barrier, broadcast, reduce, allreduce, allgather, alltoall(v),
//! gather(v), scatter(v), scan and exscan — blocking and non-blocking —
//! written only against fastmsg's public API, as a user's
//! library would be: one plain-function handler receives every collective
//! message, and one one-sided window carries the flag-based algorithms.
//!
//! ```text
//!  Collectives::register(&mut builder, CollConfig)   before start
//!     │
//!  Collectives ── barrier / bcast / reduce / allreduce / allgather   (blocking)
//!     │       ├── alltoall(v) / gather(v) / scatter(v) / scan / exscan
//!     │       └── the same with an `i` → Request
//!     ├── engine   groups · live instances · early-message buffer · the handler
//!     ├── machine  one state machine per collective instance, driven by
//!     │            messages inside any extract (NIC-BARRIER barriers, NIC-REDUCE
//!     │            binomial reduce, broadcast, recursive doubling, Bruck,
//!     │            pairwise alltoall, binomial gather/scatter, prefix scan)
//!     └── window   one-sided: SMP flat and hierarchical barriers (VIA-BARRIER),
//!                  pairwise exchange by put_u64, flat allreduce
//! ```
//!
//! Algorithms: see [`BarrierAlgo`] and [`AllreduceAlgo`]. Every reduction
//! combines in an order fixed by the group and root alone, so float
//! results are bit-identical run to run whatever the arrival order
//! ([`op`]). Non-blocking collectives progress inside any `extract`:
//! their messages run the handler, which combines and forwards, so a rank
//! that only supplies data is not held by skewed peers (NIC-REDUCE §IV.D).
//! Messages of instances this rank has not started yet are buffered
//! (bounded, [`CollConfig::max_early_messages`]) and matched by group and
//! instance number.
//!
//! Across hosts nothing changes for the caller: messages and one-sided
//! puts to a rank on another host travel over fastmsg's network transport
//! (TCP), and the hierarchical barrier treats each host's ranks
//! (`Endpoint::local_ranks`) as one SMP domain whose master alone talks
//! to the other hosts. Only the flat SMP algorithms need every rank on one
//! host. `tests/net_collectives.rs` runs every collective across two
//! network namespaces.
//!
//! # Members that call with different arguments
//!
//! Every member must call the same collectives, in the same order, with
//! the same root, operator, element type, length and algorithm. Where they
//! do not, what each member gets (details: the engine's docs):
//!
//! - barrier, allreduce, allgather, alltoall(v) (message algorithms): a
//!   typed error ([`CollError::Mismatch`], [`CollError::ArgsMismatch`],
//!   [`CollError::LengthMismatch`], or [`CollError::Aborted`] where
//!   another member found it first) on every member, within the call;
//!   later calls work.
//! - bcast, reduce, gather(v), scatter(v), scan, exscan: the members that
//!   meet the mismatch get such an error; a member whose part ended
//!   before (the root of a broadcast or scatter, which only sends; a
//!   member whose own subtree agreed; the first member of a scan) returns
//!   `Ok` with a right result — the root's data, its own block or prefix,
//!   or its own buffer unchanged — never a wrong one. It cannot learn of the mismatch within the call without a
//!   confirming round, which would double the latency of every rooted
//!   call. Instead the collectives are then *poisoned* on every member:
//!   the next call fails with [`CollError::Poisoned`] naming the mismatch
//!   (unless it ends before the news arrives, which only a call needing no
//!   message from the others can — a broadcast's root, a reduce's leaf; then
//!   the call after it), and so does every later call. A request not yet
//!   waited for reports the mismatch itself.
//! - One-sided algorithms: a typed error on every member, and poisoned.
//! - Roots: compared in full (in groups of more than 128 members each
//!   message of a rooted collective carries the root; a root that is not a
//!   member is [`CollError::BadArgument`] at once). A mismatch is found
//!   when a message passes between members that disagree; where members'
//!   roots make no member send at all — each names another as the root,
//!   e.g. two members naming each other — the call waits, as an MPI
//!   broadcast would: nothing is sent that could tell them. After
//!   `FASTMSG_CLOSE_WARN` (10 s by default) and at each doubling, such a
//!   wait — like any blocking collective that waits that long, for a
//!   member that is late or called something else — logs a warning naming
//!   the collective, its instance, group and root (`tests/stall.rs`).
//! - Custom operators: told apart only by [`Reduce::id`] (see there).
//!
//! Errors and stall warnings name the collective the member called, also
//! where it runs another inside: an `Auto` barrier's or allreduce's first
//! call agrees by an allreduce how crowded the hosts are, and the
//! hierarchical barrier's first call across hosts learns the hosts'
//! masters by an allgather; these run under the name of the call
//! (`barrier`, `allreduce`) and say that they are its set-up.

mod abort;
pub mod aggregate;
mod blocks;
mod collectives;
mod config;
mod element;
mod engine;
mod error;
mod group;
/// Crate-private decoders for the fuzz targets; not public API. Only with
/// the `internal` feature.
#[cfg(feature = "internal")]
#[doc(hidden)]
pub mod internal;
mod machine;
pub mod memory;
pub mod op;
mod request;
pub mod rpc;
mod sig;
mod stall;
mod window;
mod wire;

pub use crate::blocks::Blocks;
pub use crate::collectives::Collectives;
pub use crate::config::{AllreduceAlgo, BarrierAlgo, CollConfig, SmpDomain};
pub use crate::element::Element;
pub use crate::error::CollError;
pub use crate::op::{custom, reference, Custom, Op, Reduce};
pub use crate::request::Request;
pub use crate::window::SMP_ALLREDUCE_MAX_BYTES;

/// The crate that item types of channels and calls derive from: a
/// program needs no dependency line of its own for it.
///
/// ```
/// use fastmsg_handlers::{Pod, Zeroable};
///
/// #[repr(C)]
/// #[derive(Clone, Copy, Pod, Zeroable)]
/// #[bytemuck(crate = "fastmsg_handlers::bytemuck")] // the derive's path to it
/// struct Update {
///     index: u32,
///     delta: u32,
/// }
/// let u = Update { index: 3, delta: 1 };
/// assert_eq!(fastmsg_handlers::bytemuck::bytes_of(&u).len(), 8);
/// ```
pub use bytemuck;
/// The traits (and derives) of plain-old-data item types; see
/// [`bytemuck`].
pub use bytemuck::{Pod, Zeroable};
