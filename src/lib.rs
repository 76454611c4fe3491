//! # fastmsg
//!
//! Active messages in the style of Illinois Fast Messages 2.x / HPVM 1.9:
//! ranks register handlers; a message names a handler that runs on the
//! receiver when that rank polls. Sends are streamed gathers
//! (`begin_message` → `send_piece`… → `end`), receives are streamed
//! scatters (an `async` handler pulls pieces out of arrived frames and is
//! resumed when more arrive), `extract` polls every transport in turn.
//!
//! ```text
//!  examples/ benches/ handlers/ (collectives, public API only)
//!     │
//!  endpoint   registry · begin/send_piece/end · extract · credits · waiting
//!     │       one polling loop over every transport, no adaptive scheme
//!  transport  the contract: frames out, frames in, credit, release in order
//!     └── shm    SMT (HPVM §5): lock-free free list + receive queue
//!  queue · flow · wake   the lock-free core, through the `sync` shim
//!  frame      the fragment header shared by all transports
//!  bootstrap  rank/size/job from fmrun, Slurm, Open MPI, PMI; threads
//!  log · settings · topology   diagnostics, the FASTMSG_* table and
//!             report, the CPU facts the wait policy uses (off the hot paths)
//! ```
//!
//! Everything under `queue`, `flow` and `wake` reaches atomics only through
//! `sync`, so the loom models in `loom-tests/` check the shipped code.

#![warn(missing_docs)]

// The README's example is compiled and run as a doc test.
#[cfg(all(doctest, not(loom)))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

#[cfg(not(loom))]
pub mod bootstrap;
#[cfg(not(loom))]
pub(crate) mod copy;
#[cfg(not(loom))]
pub mod endpoint;
pub mod error;
pub mod flow;
pub mod frame;
#[cfg(not(loom))]
pub(crate) mod handler;
pub mod id;
// The link words of a network transport and the window word protocol are
// crate-private, except under loom, where `loom-tests/` models them.
/// Crate-private decoders for the fuzz targets; not public API (see the
/// module docs). Only with the `internal` feature.
#[cfg(all(feature = "internal", not(loom)))]
#[doc(hidden)]
pub mod internal;
#[cfg(not(loom))]
pub(crate) mod link;
#[cfg(loom)]
#[doc(hidden)]
pub mod link;
#[cfg(not(loom))]
pub mod log;
pub mod queue;
pub mod ring;
#[cfg(not(loom))]
pub mod settings;
pub(crate) mod sync;
#[cfg(not(loom))]
pub mod topology;
#[cfg(not(loom))]
pub mod transport;
pub mod wake;
#[cfg(not(loom))]
pub(crate) mod watch;
#[cfg(not(loom))]
pub(crate) mod window;
#[cfg(loom)]
#[doc(hidden)]
pub mod window;

#[cfg(not(loom))]
pub use crate::endpoint::{
    Config, Ctx, Endpoint, EndpointBuilder, Extracted, Message, MessageWriter, NetMode, Piece,
    WaitPolicy,
};

/// What a program needs in scope to register handlers, start, send and
/// poll: `use fastmsg::prelude::*;`.
///
/// ```
/// use fastmsg::prelude::*;
///
/// fn count(_ctx: &Ctx, piece: &Piece<'_>) -> HandlerResult {
///     assert!(piece.data().len() <= piece.message_len());
///     Ok(())
/// }
/// let mut b = EndpointBuilder::from_env().expect("one rank without a launcher");
/// let h: HandlerId = b.register_fn("count", count);
/// let mut ep: Endpoint = b.start()?;
/// ep.send(Rank(0), h, &[b"to myself"])?;
/// ep.close()?;
/// # Ok::<(), Error>(())
/// ```
#[cfg(not(loom))]
pub mod prelude {
    pub use crate::endpoint::{Ctx, Endpoint, EndpointBuilder, Message, Piece};
    pub use crate::error::Error;
    pub use crate::handler::HandlerResult;
    pub use crate::id::{HandlerId, Rank};
}
pub use crate::error::Error;
#[cfg(not(loom))]
pub use crate::handler::HandlerResult;
pub use crate::id::{HandlerId, Rank, WindowId};
/// Seeded mutants for the loom suite (`loom-tests/`); loom builds only.
#[cfg(loom)]
#[doc(hidden)]
pub use crate::sync::mutant;
