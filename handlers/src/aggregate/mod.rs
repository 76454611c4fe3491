//! Aggregated, typed active messages: one call per item, sent in buffers.
//!
//! Fine-grained programs (Bale's histogram, index-gather, BFS) send one
//! small update per element. As one active message each they run at a few
//! percent of an aggregated program; written against this module they stay
//! one call per item and travel in buffers:
//!
//! ```text
//!  Aggregator::new(&mut builder, AggConfig)         before start: an idle hook
//!    ├─ channel::<T: Pod>(b, name, |ctx, src, item| …)  one handler per channel
//!    ├─ declare::<T>(b, name) … define(b, &ch, f)    channels that name each other
//!    └─ byte_channel(b, name, |ctx, src, bytes| …)   length-prefixed items
//!  Channel::send(&ctx, dest, item)
//!    └─ Outbox: one buffer per destination (AggConfig::buffer_bytes, one frame)
//!         leaves as one message when full, on flush, and whenever the rank
//!         is idle (the engine's idle hook: waits, collectives, quiescence,
//!         an extract that finds nothing)
//!  receiver: a whole-message handler calls the item handler once per item
//!  Aggregator::quiesce(&mut ep): flush, then a termination round
//! ```
//!
//! Promises: items of a channel from one sender to one receiver are handled
//! in the order they were sent (no order across channels); a handler may
//! send items (a reply) — those never block; no item waits in a buffer
//! while its sender is idle; after [`Aggregator::quiesce`] returns on every
//! rank, every item sent before it — and every item handlers sent in
//! response, transitively — has been handled. Memory: at most
//! `channels × ranks × buffer_bytes` in buffers, plus the engine's bound on
//! parked sends ([`fastmsg::Config::max_parked`]): a main loop that sends
//! faster than a peer drains makes progress instead of growing memory.
//!
//! Built only on fastmsg's public API (whole-message handlers, idle hooks,
//! `Endpoint::quiesce`), as a user's library would be.

mod bytes;
mod channel;
mod outbox;

pub use self::bytes::ByteChannel;
pub use self::channel::Channel;

pub(crate) use self::outbox::Buffers;
pub(crate) use self::outbox::Outbox;
use fastmsg::error::{ExtractError, SendError};
use fastmsg::{Ctx, Endpoint, EndpointBuilder, Rank};
use std::cell::RefCell;
use std::rc::Rc;

/// Settings of an [`Aggregator`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AggConfig {
    /// Bytes per destination buffer: a buffer leaves as one message when
    /// the next item would not fit. Default 8 KiB, one shared-memory frame
    /// (measured: BENCHMARKS.md, aggregation).
    pub buffer_bytes: usize,
    /// Longest item of a [`ByteChannel`] (default 1 MiB): longer ones are
    /// refused at the sender, and at a receiver (from a misbehaving peer).
    pub max_item_bytes: usize,
}

impl Default for AggConfig {
    fn default() -> Self {
        AggConfig {
            buffer_bytes: 8192,
            max_item_bytes: 1 << 20,
        }
    }
}

impl AggConfig {
    /// The defaults with `buffer_bytes` set.
    pub fn with_buffer_bytes(mut self, bytes: usize) -> Self {
        self.buffer_bytes = bytes.max(1);
        self
    }
}

/// What aggregation can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AggError {
    /// Sending a buffer failed (a destination gone, the job aborted).
    #[error("sending an aggregation buffer failed: {0}")]
    Send(#[from] SendError),
    /// Progress failed while quiescing.
    #[error("progress failed while quiescing: {0}")]
    Extract(#[from] ExtractError),
    /// The destination is not a rank of the job.
    #[error("destination rank {dest} is out of range (job has {size} ranks)")]
    BadDestination {
        /// Destination given.
        dest: Rank,
        /// Ranks in the job.
        size: u32,
    },
    /// A [`ByteChannel`] item longer than [`AggConfig::max_item_bytes`].
    #[error("item of {len} bytes on channel {channel:?} is longer than the limit of {max} (AggConfig::max_item_bytes)")]
    ItemTooLong {
        /// The channel.
        channel: String,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A buffer from a peer does not hold whole items.
    #[error("aggregated message from rank {src} on channel {channel:?} is malformed: {why}")]
    Malformed {
        /// The sender.
        src: Rank,
        /// The channel.
        channel: String,
        /// What is wrong.
        why: String,
    },
}

impl AggError {
    /// [`AggError::Malformed`]: the buffer `src` sent on `channel` cannot
    /// be applied, for the reason `why`.
    pub(crate) fn malformed(src: Rank, channel: &str, why: impl Into<String>) -> AggError {
        AggError::Malformed {
            src,
            channel: channel.to_owned(),
            why: why.into(),
        }
    }
}

impl From<AggError> for fastmsg::Error {
    fn from(e: AggError) -> Self {
        match e {
            AggError::Send(e) => fastmsg::Error::Send(e),
            AggError::Extract(e) => fastmsg::Error::Extract(e),
            e => fastmsg::Error::other(e),
        }
    }
}

/// The state every channel of an aggregator shares.
struct Shared {
    cfg: AggConfig,
    outboxes: RefCell<Vec<Rc<dyn Buffers>>>,
    /// Work held back like items, released before the buffers are sent
    /// ([`Aggregator::add_held`]).
    held: RefCell<Vec<Rc<dyn Buffers>>>,
    /// Call channels ([`crate::rpc`]): their calls to failed owners
    /// complete when a quiesce ends.
    calls: RefCell<Vec<Rc<dyn crate::rpc::Calls>>>,
}

impl Shared {
    /// Send every non-empty buffer of every channel.
    fn flush(&self, ctx: &Ctx) -> Result<(), AggError> {
        // No borrow is held across a flush (it may run handlers); channels
        // are only added before start, so the list does not change.
        let mut first = Ok(());
        for list in [&self.held, &self.outboxes] {
            let n = list.borrow().len();
            for i in 0..n {
                let b = Rc::clone(&list.borrow()[i]);
                if let Err(e) = b.flush_all(ctx) {
                    first = first.and(Err(e));
                }
            }
        }
        first
    }
}

/// Aggregated active messages over one endpoint: make it before `start`,
/// add channels, send items with [`Channel::send`], end phases with
/// [`quiesce`](Self::quiesce).
///
/// ```no_run
/// use fastmsg::EndpointBuilder;
/// use fastmsg_handlers::aggregate::{AggConfig, Aggregator};
/// use std::{cell::RefCell, rc::Rc};
///
/// # fn main() -> Result<(), fastmsg::Error> {
/// let mut b = EndpointBuilder::from_env()?;
/// let agg = Aggregator::new(&mut b, AggConfig::default());
/// let table = Rc::new(RefCell::new(vec![0u64; 1024]));
/// let t = table.clone();
/// let hist = agg.channel::<u32, _>(&mut b, "histo", move |_ctx, _src, i| {
///     t.borrow_mut()[i as usize] += 1;
///     Ok(())
/// });
/// let mut ep = b.start()?;
/// let ctx = ep.ctx();
/// for i in 0..10_000u32 {
///     let dest = fastmsg::Rank(i % ep.size());
///     hist.send(&ctx, dest, i % 1024)?;                  // one call per update
/// }
/// agg.quiesce(&mut ep)?;                                  // all of them handled
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Aggregator {
    shared: Rc<Shared>,
}

impl std::fmt::Debug for Aggregator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aggregator")
            .field("cfg", &self.shared.cfg)
            .field("channels", &self.shared.outboxes.borrow().len())
            .finish()
    }
}

impl Aggregator {
    /// An aggregator for the endpoint `b` builds: registers the idle hook
    /// that flushes its buffers.
    pub fn new(b: &mut EndpointBuilder, cfg: AggConfig) -> Aggregator {
        let cfg = AggConfig {
            buffer_bytes: cfg.buffer_bytes.max(1),
            ..cfg
        };
        let shared = Rc::new(Shared {
            cfg,
            outboxes: RefCell::new(Vec::new()),
            held: RefCell::new(Vec::new()),
            calls: RefCell::new(Vec::new()),
        });
        let s = Rc::clone(&shared);
        b.on_idle(move |ctx| s.flush(ctx).map_err(Into::into));
        Aggregator { shared }
    }

    /// The settings.
    pub fn config(&self) -> AggConfig {
        self.shared.cfg
    }

    /// A new channel's outbox, its handler declared under
    /// `fastmsg-agg/<name>`.
    pub(crate) fn outbox<E: bytemuck::Pod>(
        &self,
        b: &mut EndpointBuilder,
        name: &str,
    ) -> Rc<Outbox<E>> {
        let id = b.declare(&format!("fastmsg-agg/{name}"));
        let o = Rc::new(Outbox::new(name, id, self.shared.cfg.buffer_bytes));
        self.shared
            .outboxes
            .borrow_mut()
            .push(Rc::clone(&o) as Rc<dyn Buffers>);
        o
    }

    /// Send every partly filled buffer now (they also leave by themselves
    /// whenever this rank is idle).
    ///
    /// # Errors
    /// [`AggError::Send`] (a destination gone): the first error; the
    /// other buffers are still sent.
    pub fn flush(&self, ctx: &Ctx) -> Result<(), AggError> {
        self.shared.flush(ctx)
    }

    /// Flush, then wait until every item and message sent anywhere before
    /// every rank called this — and whatever handlers sent in response,
    /// transitively — has been handled ([`Endpoint::quiesce`]). Every rank
    /// calls it; reusable any number of times.
    ///
    /// # Errors
    /// A flush's error, or the round's ([`AggError::Extract`]: a failed
    /// peer, a handler's error, a quiesce/close mismatch).
    pub fn quiesce(&self, ep: &mut Endpoint) -> Result<(), AggError> {
        let flushed = self.shared.flush(&ep.ctx());
        // The round runs even if a flush failed, to keep ranks in step.
        let round = ep.quiesce();
        // Calls waiting for a failed owner complete now (with an error).
        let calls: Vec<_> = self.shared.calls.borrow().clone();
        for c in calls {
            c.fail_gone(&ep.ctx());
        }
        flushed?;
        round.map_err(AggError::Extract)
    }

    /// Register work held back like an item in a buffer, released by
    /// every flush before the buffers are sent (remote memory's queued
    /// reads, whose completions may send items).
    pub(crate) fn add_held(&self, b: Rc<dyn Buffers>) {
        self.shared.held.borrow_mut().push(b);
    }

    /// Register a call channel (its failed calls complete at quiesce).
    pub(crate) fn add_calls(&self, c: Rc<dyn crate::rpc::Calls>) {
        self.shared.calls.borrow_mut().push(c);
    }

    /// Bytes now held in this aggregator's buffers.
    pub fn buffered_bytes(&self) -> usize {
        self.shared
            .outboxes
            .borrow()
            .iter()
            .map(|o| o.buffered())
            .sum()
    }
}
