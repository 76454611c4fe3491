//! Aggregated request/response: a typed call channel ([`Rpc`]).
//!
//! A caller sends a request to an owner rank; the owner's handler returns
//! the response; the response completes the call on the caller — by
//! running the channel's completion callback with the caller's token (the
//! fast path: no allocation per call, the user's state lives in the
//! callback), or by resolving the [`RpcFuture`] that [`Rpc::call`]
//! returned.
//!
//! ```text
//!  caller                                   owner
//!  Rpc::send(ctx, dest, req, token) ──┐
//!  Rpc::call(ctx, dest, req) → future ├─ requests: an aggregated channel of Req
//!                                     └──────────────► handler(ctx, src, req)
//!                                                         → Ok(resp) | Err(e)
//!  completion(ctx, dest, token, Ok(resp))  ◄─ responses: aggregated, framed
//!  | future ready                          (ok + Resp, or error + message)
//! ```
//!
//! Both directions travel in the [`Aggregator`]'s buffers, with its
//! promises: per destination in order, flushed when the rank is idle,
//! [`Aggregator::quiesce`] waits until every call made before it (and
//! every call made by completions and handlers in response, transitively)
//! has completed. Responses from one owner come back in the order its
//! requests were sent, so the calls waiting for an owner are kept in a
//! queue per owner (8 bytes each) and matched by order: tokens do not
//! travel. A handler's error travels back as its message
//! ([`RpcError::Handler`]); an owner that fails completes every call still
//! waiting for it with [`RpcError::PeerGone`] (found by the idle hook, by a
//! waiting future's poll, or by [`Rpc::fail_gone`]): nothing waits for ever.
//!
//! Re-entrancy: [`Rpc::send`] and [`Rpc::call`] from the main loop may run
//! handlers (and completions) while a full buffer waits for credit, as
//! every aggregated send does; from a handler or a completion they never
//! do. Do not hold a `RefCell` borrow that a handler or the completion
//! takes across a call from the main loop (use `Cell`s, or end the borrow
//! first).

mod completer;
mod future;
mod wire;

pub use self::future::RpcFuture;

pub(crate) use self::completer::Completer;
use self::completer::Held;
use self::future::Slots;
use crate::aggregate::{AggError, Aggregator, Outbox};
use bytemuck::Pod;
use fastmsg::{Ctx, EndpointBuilder, Rank};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::rc::Rc;

/// Tokens at or above this value are refused: the bit marks a call
/// completed through a future (its slot in the low bits).
const FUTURE_BIT: u64 = 1 << 63;

/// What a call can fail with (its completion gets it, or its future
/// resolves to it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RpcError {
    /// The owner's handler returned an error; its message.
    #[error("the handler of call channel {channel:?} on rank {rank} failed: {message}")]
    Handler {
        /// The channel.
        channel: String,
        /// The owner.
        rank: Rank,
        /// The handler's error, as text.
        message: String,
    },
    /// The owner failed (died, left, lost on the network) before
    /// answering.
    #[error("rank {rank} is gone: call on channel {channel:?} not answered")]
    PeerGone {
        /// The channel.
        channel: String,
        /// The owner.
        rank: Rank,
    },
    /// The destination is not a rank of the job.
    #[error("destination rank {dest} is out of range (job has {size} ranks)")]
    BadDestination {
        /// Destination given.
        dest: Rank,
        /// Ranks in the job.
        size: u32,
    },
    /// A token with the top bit set (reserved).
    #[error("completion token {token:#x} has its top bit set (reserved)")]
    BadToken {
        /// The token given.
        token: u64,
    },
    /// [`Rpc::send`] on a channel without a completion
    /// ([`Rpc::on_complete`]).
    #[error("call channel {channel:?} has no completion callback (Rpc::on_complete)")]
    NoCompletion {
        /// The channel.
        channel: String,
    },
    /// Sending a buffer failed in a way other than the owner being gone.
    #[error("call channel {channel:?}: {message}")]
    Agg {
        /// The channel.
        channel: String,
        /// What failed (the aggregation error, as text).
        message: String,
    },
}

impl From<RpcError> for fastmsg::Error {
    fn from(e: RpcError) -> Self {
        fastmsg::Error::other(e.to_string())
    }
}

/// The state of one call channel on this rank.
pub(crate) struct Inner<Resp: Pod> {
    name: String,
    /// Per owner: the tokens of the calls waiting for it, in the order
    /// sent (a token with [`FUTURE_BIT`] names a future's slot).
    waiting: RefCell<Vec<VecDeque<u64>>>,
    /// Calls waiting, all owners together.
    outstanding: Cell<usize>,
    /// The completion callback (re-entrant: a completion that fails
    /// calls of its own).
    complete: Completer<Resp>,
    /// The futures' results.
    slots: RefCell<Slots<Resp>>,
    /// Set once a completion was given.
    has_completion: Cell<bool>,
}

impl<Resp: Pod> Inner<Resp> {
    /// Record a call to `owner` waiting for its answer.
    #[inline]
    fn wait_for(&self, ctx: &Ctx, owner: Rank, token: u64) {
        let mut w = self.waiting.borrow_mut();
        if w.len() <= owner.index() {
            w.resize_with(ctx.size() as usize, VecDeque::new);
        }
        w[owner.index()].push_back(token);
        self.outstanding.set(self.outstanding.get() + 1);
    }

    /// The oldest call waiting for `owner`, now answered.
    fn answered(&self, owner: Rank) -> Option<u64> {
        let t = self
            .waiting
            .borrow_mut()
            .get_mut(owner.index())?
            .pop_front()?;
        self.outstanding.set(self.outstanding.get() - 1);
        Some(t)
    }

    /// Complete the call `token` to `owner` with `r`.
    fn finish(&self, ctx: &Ctx, owner: Rank, token: u64, r: Result<Resp, RpcError>) {
        if token & FUTURE_BIT != 0 {
            self.resolve(token, r);
            return;
        }
        self.complete.run(ctx, owner, token, r);
    }

    /// [`finish`](Self::finish) with the completion callback held for a
    /// batch of answers.
    #[inline]
    fn finish_held(
        &self,
        held: &mut Held<'_, Resp>,
        ctx: &Ctx,
        owner: Rank,
        token: u64,
        r: Result<Resp, RpcError>,
    ) {
        if token & FUTURE_BIT != 0 {
            self.resolve(token, r);
            return;
        }
        held.run(ctx, owner, token, r);
    }

    /// Resolve the future whose slot `token` names.
    fn resolve(&self, token: u64, r: Result<Resp, RpcError>) {
        self.slots
            .borrow_mut()
            .resolve((token & !FUTURE_BIT) as u32, r);
    }

    /// Complete every call waiting for an owner that is gone with
    /// [`RpcError::PeerGone`]; how many.
    pub(crate) fn fail_gone(&self, ctx: &Ctx) -> usize {
        Calls::fail_gone(self, ctx)
    }
}

/// What the aggregator does with every call channel, whatever its types.
pub(crate) trait Calls {
    /// Complete the calls waiting for gone owners; how many.
    fn fail_gone(&self, ctx: &Ctx) -> usize;
}

impl<Resp: Pod> Calls for Inner<Resp> {
    fn fail_gone(&self, ctx: &Ctx) -> usize {
        if self.outstanding.get() == 0 {
            return 0;
        }
        let mut n = 0;
        let owners = self.waiting.borrow().len();
        for o in 0..owners {
            let owner = Rank(o as u32);
            if self.waiting.borrow()[o].is_empty() || !ctx.is_gone(owner) {
                continue;
            }
            while let Some(t) = self.answered(owner) {
                let e = RpcError::PeerGone {
                    channel: self.name.clone(),
                    rank: owner,
                };
                self.finish(ctx, owner, t, Err(e));
                n += 1;
            }
        }
        n
    }
}

/// A typed call channel: requests of type `Req` answered with a `Resp`
/// by the owner's handler, both plain old data (`#[derive(Pod, Zeroable,
/// Clone, Copy)]`, `#[repr(C)]`; see the crate's re-exported
/// [`bytemuck`]). Cheap to clone (clones share the
/// channel; a handler or the completion may hold one to call again).
///
/// ```no_run
/// use fastmsg::{EndpointBuilder, Rank};
/// use fastmsg_handlers::aggregate::{AggConfig, Aggregator};
/// use std::{cell::Cell, rc::Rc};
///
/// # fn main() -> Result<(), fastmsg::Error> {
/// let mut b = EndpointBuilder::from_env()?;
/// let agg = Aggregator::new(&mut b, AggConfig::default());
/// // Owner side: square the number.
/// let square = agg.rpc(&mut b, "square", |_ctx, _src, x: u64| Ok::<u64, String>(x * x));
/// // Caller side: the token says where the answer goes.
/// let out: Rc<Vec<Cell<u64>>> = Rc::new((0..100).map(|_| Cell::new(0)).collect());
/// let o = out.clone();
/// square.on_complete(move |_ctx, _owner, token, r| {
///     o[token as usize].set(r.expect("no handler error"));
/// });
/// let mut ep = b.start()?;
/// let ctx = ep.ctx();
/// for i in 0..100u64 {
///     square.send(&ctx, Rank(i as u32 % ep.size()), i, i)?;   // one call per item
/// }
/// agg.quiesce(&mut ep)?;                                        // all answered
/// // Or one call, awaited by the engine's progress:
/// let fut = square.call(&ctx, Rank(0), 7)?;
/// ep.wait_until(|| fut.is_ready())?;
/// assert_eq!(fut.take(), Some(Ok(49)));
/// # Ok(()) }
/// ```
pub struct Rpc<Req: Pod, Resp: Pod> {
    inner: Rc<Inner<Resp>>,
    requests: Rc<Outbox<Req>>,
    _t: PhantomData<fn(Req) -> Resp>,
}

impl<Req: Pod, Resp: Pod> Clone for Rpc<Req, Resp> {
    fn clone(&self) -> Self {
        Rpc {
            inner: Rc::clone(&self.inner),
            requests: Rc::clone(&self.requests),
            _t: PhantomData,
        }
    }
}

impl<Req: Pod, Resp: Pod> std::fmt::Debug for Rpc<Req, Resp> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rpc")
            .field("name", &self.inner.name)
            .field("outstanding", &self.inner.outstanding.get())
            .finish()
    }
}

impl<Req: Pod, Resp: Pod> Rpc<Req, Resp> {
    /// Set the completion callback: it runs once per call made with
    /// [`send`](Self::send), on this rank, with the owner, the call's token
    /// and its result — in the order the calls to that owner were made.
    /// It runs inside a handler (or an idle hook, or
    /// [`fail_gone`](Self::fail_gone)), so calls it makes never block.
    pub fn on_complete<F>(&self, f: F)
    where
        F: FnMut(&Ctx, Rank, u64, Result<Resp, RpcError>) + 'static,
    {
        self.inner.complete.set(Box::new(f));
        self.inner.has_completion.set(true);
    }

    /// Call: send `req` to the handler on `dest`; its answer runs the
    /// completion callback with `token` (any value below 2^63: an index
    /// into the caller's state, say). Aggregated like
    /// [`Channel::send`](crate::aggregate::Channel::send).
    ///
    /// May run handlers and completions while a full buffer waits for
    /// credit when called from the main loop (not from a handler or a
    /// completion): hold no `RefCell` borrow they take across it.
    ///
    /// # Errors
    /// [`RpcError::BadDestination`], [`RpcError::BadToken`],
    /// [`RpcError::NoCompletion`], [`RpcError::PeerGone`] (`dest` is known
    /// to be gone: this call is not made). A buffer that cannot leave
    /// because its owner failed is not an error here: its calls complete
    /// with [`RpcError::PeerGone`].
    #[inline]
    pub fn send(&self, ctx: &Ctx, dest: Rank, req: Req, token: u64) -> Result<(), RpcError> {
        if token & FUTURE_BIT != 0 {
            return Err(RpcError::BadToken { token });
        }
        if !self.inner.has_completion.get() {
            return Err(RpcError::NoCompletion {
                channel: self.inner.name.clone(),
            });
        }
        self.issue(ctx, dest, req, token)
    }

    /// Call and get a future of the answer: resolved by the engine's
    /// progress (any `extract`, wait, or collective of this endpoint) —
    /// check it with [`RpcFuture::is_ready`] from a
    /// [`wait_until`](fastmsg::Endpoint::wait_until) loop, or `.await` it
    /// in an executor of your own that makes progress (it wakes the task).
    /// One small allocation-free slot per call, reused.
    ///
    /// Runs handlers as [`send`](Self::send) does.
    ///
    /// # Errors
    /// As [`send`](Self::send) (without the token's).
    pub fn call(&self, ctx: &Ctx, dest: Rank, req: Req) -> Result<RpcFuture<Resp>, RpcError> {
        let slot = self.inner.slots.borrow_mut().open();
        let fut = RpcFuture::new(Rc::clone(&self.inner), ctx.clone(), slot, dest);
        self.issue(ctx, dest, req, FUTURE_BIT | u64::from(slot))?;
        Ok(fut)
    }

    /// Record the call, then send the request.
    #[inline]
    fn issue(&self, ctx: &Ctx, dest: Rank, req: Req, token: u64) -> Result<(), RpcError> {
        if dest.0 >= ctx.size() {
            return Err(RpcError::BadDestination {
                dest,
                size: ctx.size(),
            });
        }
        if ctx.is_gone(dest) {
            return Err(RpcError::PeerGone {
                channel: self.inner.name.clone(),
                rank: dest,
            });
        }
        self.inner.wait_for(ctx, dest, token);
        match self.requests.push_item(ctx, dest, req) {
            Ok(()) => Ok(()),
            // Its owner is gone: this call and the others waiting for it
            // complete with `PeerGone` at the next idle moment.
            Err(AggError::Send(_)) => {
                ctx.note_idle_work();
                Ok(())
            }
            Err(e) => Err(RpcError::Agg {
                channel: self.inner.name.clone(),
                message: e.to_string(),
            }),
        }
    }

    /// Complete every call waiting for an owner known to be gone with
    /// [`RpcError::PeerGone`] now (the idle hook does it too); returns how
    /// many. For a program that stops making progress once a peer failed.
    pub fn fail_gone(&self, ctx: &Ctx) -> usize {
        self.inner.fail_gone(ctx)
    }

    /// Calls made and not completed yet.
    pub fn outstanding(&self) -> usize {
        self.inner.outstanding.get()
    }

    /// The channel's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }
}

impl Aggregator {
    /// A call channel named `name` (every rank makes the same channels in
    /// the same order): `handler` runs on the owner once per request, with
    /// the caller's rank, in the order that caller sent them, and returns
    /// the response — or an error, which the caller gets as
    /// [`RpcError::Handler`] with its text. The handler may send and call
    /// (never blocking). Set the callback of [`Rpc::send`] with
    /// [`Rpc::on_complete`].
    pub fn rpc<Req, Resp, E, F>(
        &self,
        b: &mut EndpointBuilder,
        name: &str,
        handler: F,
    ) -> Rpc<Req, Resp>
    where
        Req: Pod,
        Resp: Pod,
        E: std::fmt::Display,
        F: FnMut(&Ctx, Rank, Req) -> Result<Resp, E> + 'static,
    {
        self.rpc_prefetching(b, name, handler, |_, _| {})
    }

    /// As [`rpc`](Self::rpc), with `prefetch` run on the owner on each
    /// request a few places before `handler` runs on it (a cache hint:
    /// remote memory prefetches the word a get will read).
    pub(crate) fn rpc_prefetching<Req, Resp, E, F, P>(
        &self,
        b: &mut EndpointBuilder,
        name: &str,
        handler: F,
        prefetch: P,
    ) -> Rpc<Req, Resp>
    where
        Req: Pod,
        Resp: Pod,
        E: std::fmt::Display,
        F: FnMut(&Ctx, Rank, Req) -> Result<Resp, E> + 'static,
        P: Fn(&Ctx, Req) + 'static,
    {
        let requests = self.outbox::<Req>(b, &format!("{name}/request"));
        let responses = self.outbox::<u8>(b, &format!("{name}/response"));
        let inner = Rc::new(Inner {
            name: name.to_owned(),
            waiting: RefCell::new(Vec::new()),
            outstanding: Cell::new(0),
            complete: Completer::default(),
            slots: RefCell::new(Slots::default()),
            has_completion: Cell::new(false),
        });
        wire::define_requests(b, name, &requests, Rc::clone(&responses), handler, prefetch);
        wire::define_responses(b, name, &responses, Rc::clone(&inner));
        let i = Rc::clone(&inner);
        b.on_idle(move |ctx| {
            i.fail_gone(ctx);
            Ok(())
        });
        self.add_calls(Rc::clone(&inner) as Rc<dyn Calls>);
        Rpc {
            inner,
            requests,
            _t: PhantomData,
        }
    }
}
