//! # fastmsg
//!
//! Active messages in the style of Illinois Fast Messages 2.x / HPVM 1.9:
//! ranks register handlers; a message names a handler that runs on the
//! receiver when that rank polls. Sends are streamed gathers
//! (`begin_message` → `send_piece`… → `end`), receives are streamed
//! scatters (an `async` handler pulls pieces out of arrived frames and is
//! resumed when more arrive), `extract` polls every transport in turn.
//!
//! ## Layers
//!
//! Each module of `src/` imports only modules of the layers below its own
//! (`scripts/layers.py check`, run by `.ci/house-rules`, reads this table;
//! test-only files may drive a layer from above). Highest first:
//!
//! ```text
//! layers:begin
//! internal     | entry points for the launcher, fuzz targets, benches, loom
//! threads      | the thread launcher: ranks as threads of one process
//! endpoint     | registry · start-up · begin/send_piece/end · extract · credits
//!              | · waiting · the configuration report; one polling loop
//! transport    | frames out, frames in, credit, release in order:
//!              | shm (SMT: free list + receive queue); net (the ring
//!              | transport, mesh, per-pair words) under tcp, ofi, verbs
//! topology     | the CPU facts the wait policy decides by
//! bootstrap    | rank/size/job from fmrun, Slurm, Open MPI, PMI(x); rendezvous
//! netio        | authenticated TCP connections: auth, gate, connect/retry;
//!              | the kernel's liveness watch on them (alive)
//! queue ring   | the lock-free shm queues; the network rings
//! frame wake flow watch window copy | fragment header,
//!              | doorbells, credit lines, the watchdog, RMA windows, copy
//!              | strategies
//! log          | diagnostics (tracing)
//! settings     | the FASTMSG_* table; the only reader of those variables
//! error        | typed errors of every layer
//! sync id      | the atomics shim (loom swaps it); ranks, handler ids
//! layers:end
//! ```
//!
//! `examples/`, `benches/` and `handlers/` (the collectives) use the public
//! API only. Everything under `queue`, `flow` and `wake` reaches atomics
//! only through `sync`, so the loom models in `loom-tests/` check the
//! shipped code.

#![warn(missing_docs)]

// The README's example is compiled and run as a doc test.
#[cfg(all(doctest, not(loom)))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

// The public API: the endpoint and what it is built from (`bootstrap`
// for the job's facts, `threads` to run ranks as threads), typed errors,
// ids, the settings table and logging. Everything else is crate-private;
// the loom models, benches and fuzz targets reach what they drive through
// the hidden `internal` module.
#[cfg(not(loom))]
pub mod bootstrap;
#[cfg(not(loom))]
pub(crate) mod copy;
#[cfg(not(loom))]
pub(crate) mod endpoint;
pub mod error;
// The lock-free core (`flow`, `queue`, `ring`, `wake`) keeps entry points
// that only the loom models, benches and fuzz targets call (through
// `internal`): dead code to a build without them.
#[cfg_attr(not(any(loom, feature = "internal")), allow(dead_code))]
pub(crate) mod flow;
pub(crate) mod frame;
pub mod id;
/// Crate-private code for the launcher, the fuzz targets, benches
/// (feature `internal`) and loom models (`--cfg loom`); not public API
/// (see the module docs).
#[doc(hidden)]
pub mod internal;
#[cfg(not(loom))]
pub mod log;
#[cfg(not(loom))]
pub(crate) mod netio;
#[cfg_attr(not(any(loom, feature = "internal")), allow(dead_code))]
pub(crate) mod queue;
#[cfg_attr(not(any(loom, feature = "internal")), allow(dead_code))]
pub(crate) mod ring;
#[cfg(not(loom))]
pub mod settings;
pub(crate) mod sync;
#[cfg(not(loom))]
pub mod threads;
#[cfg(not(loom))]
pub(crate) mod topology;
#[cfg(not(loom))]
pub(crate) mod transport;
/// Under loom, only the network transport's lock-free words.
#[cfg(loom)]
pub(crate) mod transport {
    pub(crate) mod net {
        pub(crate) mod lazy_pairs;
        pub(crate) mod link;
    }
}
#[cfg_attr(not(any(loom, feature = "internal")), allow(dead_code))]
pub(crate) mod wake;
#[cfg(not(loom))]
pub(crate) mod watch;
pub(crate) mod window;

#[cfg(not(loom))]
pub use crate::endpoint::engine::stats::{PeerStats, Stats};
#[cfg(not(loom))]
pub use crate::endpoint::{
    Config, ConnectMode, Ctx, Endpoint, EndpointBuilder, Extracted, Message, MessageWriter,
    NetConfig, NetMode, NetRingConfig, Piece, Receive, ShmConfig, WaitPolicy, DEFAULT_MAX_PARKED,
    DEFAULT_MAX_RECEIVE,
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
    pub use crate::endpoint::engine::handler::HandlerResult;
    pub use crate::endpoint::{Ctx, Endpoint, EndpointBuilder, Message, Piece};
    pub use crate::error::Error;
    pub use crate::id::{HandlerId, Rank};
}
#[cfg(not(loom))]
pub use crate::endpoint::engine::handler::HandlerResult;
pub use crate::error::Error;
pub use crate::id::{HandlerId, Rank, WindowId};
#[cfg(not(loom))]
pub use crate::window::WindowWords;
pub use crate::window::WordOp;
