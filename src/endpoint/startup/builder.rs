//! [`EndpointBuilder`]: register handlers and windows, then `start`
//! (which `crate::endpoint::startup` carries out).

use crate::endpoint::engine::core::{Ctx, Message};
use crate::endpoint::engine::core::{HandlerTable, Hook};
use crate::endpoint::engine::handler::piece::Piece;
use crate::endpoint::engine::handler::{whole, HandlerResult};
use crate::endpoint::startup::config::Config;
use crate::endpoint::Endpoint;
use crate::error::{ConfigError, StartError};
use crate::id::{HandlerId, Rank, WindowId};
use crate::window::WindowTable;
use std::future::Future;

/// Registers handlers, then joins the job with [`start`](Self::start).
///
/// ```no_run
/// use fastmsg::{EndpointBuilder, Rank};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut b = EndpointBuilder::from_env()?;          // fmrun, srun or mpirun
/// let hello = b.register("hello", |_ctx, mut msg| async move {
///     let text = msg.receive_vec().await?;
///     println!("from {}: {}", msg.source(), String::from_utf8_lossy(&text));
///     Ok(())
/// });
/// let mut ep = b.start()?;                           // tables checked equal
/// let next = Rank((ep.rank().0 + 1) % ep.size());
/// ep.send(next, hello, &[b"hi"])?;
/// # Ok(()) }
/// ```
pub struct EndpointBuilder {
    config: Config,
    registry: HandlerTable,
    windows: WindowTable,
    hooks: Vec<Hook>,
}

impl std::fmt::Debug for EndpointBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointBuilder")
            .field("config", &self.config)
            .field("registry", &self.registry)
            .field("windows", &self.windows)
            .field("hooks", &self.hooks.len())
            .finish()
    }
}

impl EndpointBuilder {
    /// A builder for the job described by `config`.
    pub fn new(config: Config) -> Self {
        crate::log::init();
        crate::log::set_thread_rank(config.job.rank.0);
        EndpointBuilder {
            config,
            registry: HandlerTable::default(),
            windows: WindowTable::default(),
            hooks: Vec::new(),
        }
    }

    /// A builder for the job this process was launched into
    /// ([`Config::from_env`]).
    ///
    /// # Errors
    /// [`ConfigError`] if no launcher environment is found or a `FASTMSG_*`
    /// variable is malformed.
    pub fn from_env() -> Result<Self, ConfigError> {
        Ok(EndpointBuilder::new(Config::from_env()?))
    }

    /// This rank.
    pub fn rank(&self) -> Rank {
        self.config.job.rank
    }

    /// Ranks in the job.
    pub fn size(&self) -> u32 {
        self.config.job.size
    }

    /// The configuration (may be adjusted before `start`).
    pub fn config_mut(&mut self) -> &mut Config {
        &mut self.config
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Register `handler` under `name`; ids are dense in registration order.
    /// Every rank must register the same names in the same order.
    ///
    /// The handler gets a [`Ctx`] (to send) and the [`Message`] (to receive
    /// from) and returns a future; it starts when the first fragment of a
    /// message arrives.
    pub fn register<F, Fut>(&mut self, name: &str, handler: F) -> HandlerId
    where
        F: FnMut(Ctx, Message) -> Fut + 'static,
        Fut: Future<Output = HandlerResult> + 'static,
    {
        self.registry.register(name, handler)
    }

    /// Register a plain-function handler under `name`: it is called once
    /// per arriving piece of a message (once for a message that fits one
    /// frame), runs to completion, and reads the piece's bytes in place.
    /// The cheapest kind of handler; see [`Piece`].
    ///
    /// ```no_run
    /// # fn f(b: &mut fastmsg::EndpointBuilder) {
    /// let total = std::rc::Rc::new(std::cell::Cell::new(0u64));
    /// let t = total.clone();
    /// b.register_fn("count", move |_ctx, piece| {
    ///     t.set(t.get() + piece.data().len() as u64);
    ///     Ok(())
    /// });
    /// # }
    /// ```
    pub fn register_fn<F>(&mut self, name: &str, handler: F) -> HandlerId
    where
        F: FnMut(&Ctx, &Piece<'_>) -> HandlerResult + 'static,
    {
        self.registry.register_fn(name, handler)
    }

    /// Register a whole-message handler under `name`: called once per
    /// message with all of its bytes as one contiguous slice, however many
    /// frames it spanned (a message that fits one frame is not copied; a
    /// longer one is gathered in a buffer kept per source). A message
    /// longer than `max_len` bytes is refused: the handler is not called
    /// and `extract` reports [`ReceiveError::TooLong`](crate::error::ReceiveError::TooLong)
    /// as the handler's error. An aborted message is dropped the same way
    /// ([`ReceiveError::Aborted`](crate::error::ReceiveError::Aborted)).
    ///
    /// ```no_run
    /// # fn f(b: &mut fastmsg::EndpointBuilder) {
    /// b.register_whole("records", 1 << 20, |_ctx, src, bytes| {
    ///     for rec in bytes.chunks_exact(12) {
    ///         let _ = (src, rec); // every record whole, wherever frames end
    ///     }
    ///     Ok(())
    /// });
    /// # }
    /// ```
    pub fn register_whole<F>(&mut self, name: &str, max_len: usize, handler: F) -> HandlerId
    where
        F: FnMut(&Ctx, Rank, &[u8]) -> HandlerResult + 'static,
    {
        let entry = crate::endpoint::engine::handler::Entry::Fn(whole::whole(max_len, handler));
        self.registry.register_entry(name, entry)
    }

    /// Reserve the id of a handler under `name` (the next dense id) and
    /// give its function later with [`define`](Self::define),
    /// [`define_fn`](Self::define_fn) or
    /// [`define_whole`](Self::define_whole): handlers that send to each
    /// other can then hold each other's ids.
    ///
    /// ```no_run
    /// # fn f(b: &mut fastmsg::EndpointBuilder) {
    /// let ping = b.declare("ping");
    /// let pong = b.register_fn("pong", move |ctx, p| {
    ///     ctx.send(p.source(), ping, &[p.data()])?;      // names `ping`
    ///     Ok(())
    /// });
    /// b.define_fn(ping, move |ctx, p| {
    ///     if p.data()[0] > 0 {
    ///         ctx.send(p.source(), pong, &[&[p.data()[0] - 1]])?;  // and back
    ///     }
    ///     Ok(())
    /// });
    /// # }
    /// ```
    ///
    /// `start` fails with [`StartError::UndefinedHandler`] if a declared id
    /// is never defined, and with [`StartError::BadDefinition`] if a
    /// `define*` names an id that is not declared or defines one twice.
    pub fn declare(&mut self, name: &str) -> HandlerId {
        self.registry.declare(name)
    }

    /// Give declared handler `id` an async function (as
    /// [`register`](Self::register)).
    pub fn define<F, Fut>(&mut self, id: HandlerId, handler: F)
    where
        F: FnMut(Ctx, Message) -> Fut + 'static,
        Fut: Future<Output = HandlerResult> + 'static,
    {
        self.registry.define(id, HandlerTable::async_entry(handler));
    }

    /// Give declared handler `id` a plain function (as
    /// [`register_fn`](Self::register_fn)).
    pub fn define_fn<F>(&mut self, id: HandlerId, handler: F)
    where
        F: FnMut(&Ctx, &Piece<'_>) -> HandlerResult + 'static,
    {
        self.registry.define(
            id,
            crate::endpoint::engine::handler::Entry::Fn(Box::new(handler)),
        );
    }

    /// Give declared handler `id` a whole-message function (as
    /// [`register_whole`](Self::register_whole)).
    pub fn define_whole<F>(&mut self, id: HandlerId, max_len: usize, handler: F)
    where
        F: FnMut(&Ctx, Rank, &[u8]) -> HandlerResult + 'static,
    {
        let entry = crate::endpoint::engine::handler::Entry::Fn(whole::whole(max_len, handler));
        self.registry.define(id, entry);
    }

    /// Add an idle hook: `hook` runs when this rank waits or polls idle
    /// while the idle-work flag is up ([`Ctx::note_idle_work`]); see the
    /// rules in [`Ctx::note_idle_work`]. An aggregation library flushes
    /// its partly filled buffers here, so that no item waits in a buffer
    /// while its sender is idle. A hook's error is reported by the wait or
    /// `extract` that ran it ([`ExtractError::IdleHook`](crate::error::ExtractError::IdleHook)).
    pub fn on_idle<F>(&mut self, hook: F)
    where
        F: FnMut(&Ctx) -> HandlerResult + 'static,
    {
        self.hooks.push(Box::new(hook));
    }

    /// Register a one-sided window of `bytes` bytes under `name`: memory
    /// of this rank that every rank may write with
    /// [`Ctx::put`] / [`Ctx::put_u64`] (also on [`Endpoint`]). Every rank
    /// must register the same windows in the same order.
    pub fn window(&mut self, name: &str, bytes: usize) -> WindowId {
        self.windows.register(name, bytes, false)
    }

    /// Register an owner-only window of `bytes` bytes under `name`: memory
    /// of this rank that only this rank writes — other ranks read it
    /// ([`Ctx::get`]) and send this rank their updates, which its handlers
    /// apply, possibly as the words' only writer
    /// ([`Ctx::update_own_words_unshared`], refused on any other window).
    /// A write by another rank ([`Ctx::put`], [`Ctx::put_u64`],
    /// [`Ctx::update_u64`]) fails with
    /// [`PutError::OwnerOnly`](crate::error::PutError::OwnerOnly). Every
    /// rank must register the same windows, owner-only or not, in the same
    /// order: the start check compares that too.
    pub fn window_owner_only(&mut self, name: &str, bytes: usize) -> WindowId {
        self.windows.register(name, bytes, true)
    }

    /// Join the job: connect the transports, then check with rank 0 that
    /// every rank registered the same handlers.
    ///
    /// # Errors
    /// [`StartError::HandlerMismatch`] naming the first differing handler;
    /// [`StartError::DuplicateHandler`]; [`StartError::UndefinedHandler`],
    /// [`StartError::BadDefinition`]; configuration, segment or network
    /// errors; [`StartError::Timeout`] if peers do not appear.
    pub fn start(self) -> Result<Endpoint, StartError> {
        let EndpointBuilder {
            config,
            registry,
            windows,
            hooks,
        } = self;
        crate::endpoint::startup::start(config, registry, windows, hooks)
    }
}
