//! Remote memory: a window of 64-bit words that every rank reads and
//! updates on every other rank — `get`, fetch-add, add, swap,
//! compare-and-swap, f64 add — one call per item, aggregated
//! ([`RemoteWords`]).
//!
//! ```text
//!  RemoteWords::new(&agg, &mut b, name, words)    before start: a window,
//!                                                 a call channel, add channels
//!  get                   owner on this host: the word prefetched, the read
//!                        queued and made up to 16 gets later or when the
//!                        aggregator flushes (reads.rs), no message
//!  fetch, call           owner on this host: Ctx::get_u64 / Ctx::update_u64,
//!                        CPU atomics on the shared segment, no message,
//!                        completes at once
//!  get, fetch, call      owner on another host: a request
//!                        in the aggregation buffers, applied by the owner's
//!                        handler (the same atomics), answered through a
//!                        call channel: reads on one (8-byte requests, the
//!                        owner prefetching the words of those ahead),
//!                        fetching operations on another (32 bytes)
//!  add, add_f64          every owner (this host's too): a one-way 4-byte (+1)
//!                        or 12-byte item in the aggregation buffers, applied
//!                        by the owner's handler, no answer; visible after a
//!                        quiesce (adds.rs). `direct_adds()`: CPU atomics for
//!                        owners on this host instead, visible at once
//!  through_owner()       every operation to the owner's handler
//!  owner_only(..)        every operation of every rank to the owner's
//!                        handler, which applies adds without locked
//!                        atomics (it is the words' only writer: the
//!                        window is owner-only, other ranks' direct
//!                        writes to it are refused)
//! ```
//!
//! Why adds go through the owner by default: a CPU atomic add to a random
//! word is a locked instruction, a full barrier, so its cache misses
//! cannot overlap; a one-way item costs the caller a few bytes in a
//! buffer, and scattered adds run faster that way even on one host
//! (BENCHMARKS.md, "The kernels in every form"). Fetching operations keep
//! the CPU atomics: the caller waits for the value either way, and a
//! direct one is far cheaper than a round trip.
//!
//! The words are updated atomically whichever way an update comes (CPU
//! atomics on the host, the owner's handler across hosts, on the same
//! memory), so concurrent updates from every rank add up exactly. Results
//! of fetching operations reach the completion callback
//! ([`RemoteWords::on_complete`]) with the caller's token — at once, inside
//! the call, for a fetching operation on an owner on this host; a few
//! calls later or at the next flush for a read on this host (its cache
//! miss overlaps the next reads'); later, inside a handler, otherwise —
//! or a future ([`RemoteWords::call`]). Answers from an owner
//! reached through its handler come in the order the calls were made
//! within each kind (reads; fetching operations), not across kinds: a
//! read sent after a fetch-add to the same owner may be answered first —
//! wait for the fetch-add's completion before a read that must see it.
//! Updates sent before an
//! [`Aggregator::quiesce`] have been applied, and answered, when it
//! returns on every rank. Batch forms ([`RemoteWords::add_many`],
//! [`RemoteWords::get_many`], [`RemoteWords::fetch_many`]) take a slice
//! of items and check them all before issuing any.

mod adds;
mod batch;
mod reads;

use self::adds::Adds;
use self::reads::Reads;
use crate::aggregate::{AggError, Aggregator};
use crate::rpc::{Completer, Rpc, RpcError, RpcFuture};
use bytemuck::{Pod, Zeroable};
use fastmsg::error::PutError;
use fastmsg::{Ctx, EndpointBuilder, Rank, WindowId, WordOp};
use std::rc::Rc;

/// Reads of owners on this host queued behind the oldest before it is
/// made ([`RemoteWords::get`]): how many of their cache misses overlap.
pub const READS_IN_FLIGHT: usize = 16;

/// What a remote-memory call can fail with at once (later failures — the
/// owner's, across hosts — reach the completion as an [`RpcError`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemError {
    /// A word index past the window.
    #[error("word {index} is out of range: the window {name:?} has {words} words")]
    OutOfRange {
        /// The window.
        name: String,
        /// The index given.
        index: u64,
        /// Words per rank.
        words: u64,
    },
    /// A direct access failed (bad rank, a peer gone, the endpoint
    /// closed).
    #[error(transparent)]
    Put(#[from] PutError),
    /// A call could not be made (bad destination, owner gone).
    #[error(transparent)]
    Rpc(#[from] RpcError),
    /// Sending an aggregated add failed.
    #[error(transparent)]
    Agg(#[from] AggError),
}

impl From<MemError> for fastmsg::Error {
    fn from(e: MemError) -> Self {
        match e {
            MemError::Put(e) => fastmsg::Error::Put(e),
            e => fastmsg::Error::other(e),
        }
    }
}

/// A request to an owner on another host.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct WordReq {
    index: u64,
    kind: u64,
    a: u64,
    b: u64,
}

const GET: u64 = 0;
const FETCH_ADD: u64 = 1;
const SWAP: u64 = 2;
const CAS: u64 = 3;
const ADD_F64: u64 = 4;

fn encode(index: u64, op: Option<WordOp>) -> WordReq {
    let (kind, a, b) = match op {
        None => (GET, 0, 0),
        Some(WordOp::FetchAdd(v)) => (FETCH_ADD, v, 0),
        Some(WordOp::Swap(v)) => (SWAP, v, 0),
        Some(WordOp::CompareSwap { current, new }) => (CAS, current, new),
        Some(WordOp::AddF64(x)) => (ADD_F64, x.to_bits(), 0),
        // `WordOp` is non-exhaustive: a form this library does not know
        // yet is refused by the owner.
        Some(_) => (u64::MAX, 0, 0),
    };
    WordReq { index, kind, a, b }
}

fn decode(r: &WordReq) -> Result<Option<WordOp>, String> {
    Ok(match r.kind {
        GET => None,
        FETCH_ADD => Some(WordOp::FetchAdd(r.a)),
        SWAP => Some(WordOp::Swap(r.a)),
        CAS => Some(WordOp::CompareSwap {
            current: r.a,
            new: r.b,
        }),
        ADD_F64 => Some(WordOp::AddF64(f64::from_bits(r.a))),
        k => return Err(format!("unknown word operation {k}")),
    })
}

/// The result of a fetching call made with [`RemoteWords::call`].
#[derive(Debug)]
pub enum WordFuture {
    /// Done at once (the owner is on this host).
    Ready(Option<u64>),
    /// Waiting for the owner's answer.
    Remote(RpcFuture<u64>),
}

impl WordFuture {
    /// Whether the value (or an error) is here.
    pub fn is_ready(&self) -> bool {
        match self {
            WordFuture::Ready(_) => true,
            WordFuture::Remote(f) => f.is_ready(),
        }
    }

    /// The value, if it is here (once).
    pub fn take(&mut self) -> Option<Result<u64, RpcError>> {
        match self {
            WordFuture::Ready(v) => v.take().map(Ok),
            WordFuture::Remote(f) => f.take(),
        }
    }
}

/// A window of `words` 64-bit words on every rank, read and updated by
/// every rank (see the [module docs](self)). Cheap to clone.
#[derive(Clone)]
pub struct RemoteWords {
    name: String,
    win: WindowId,
    words: u64,
    /// Fetching operations (32-byte requests).
    calls: Rpc<WordReq, u64>,
    /// Reads: the word index alone (8-byte requests), the owner
    /// prefetching the words of the requests ahead.
    gets: Rpc<u64, u64>,
    adds: Adds,
    /// The completion of fetching calls (shared with the call channel's).
    complete: Rc<Completer<u64>>,
    /// Reads of owners on this host, queued so that their misses overlap.
    reads: Rc<Reads>,
    /// Whether owners on this host are reached directly.
    direct: bool,
    /// Whether adds to owners on this host are CPU atomics (when `direct`).
    direct_adds: bool,
}

impl std::fmt::Debug for RemoteWords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteWords")
            .field("name", &self.name)
            .field("words", &self.words)
            .finish()
    }
}

impl RemoteWords {
    /// A window `name` of `words` words (zeroed) on every rank, with the
    /// call and add channels that reach owners on other hosts. Every rank
    /// makes the same ones in the same order, before start.
    pub fn new(agg: &Aggregator, b: &mut EndpointBuilder, name: &str, words: usize) -> Self {
        Self::make(agg, b, name, words, false)
    }

    /// Words `name` that only their owner updates: every operation of
    /// every rank goes to the owner's handler (as with
    /// [`through_owner`](Self::through_owner), on every rank, and
    /// [`direct_adds`](Self::direct_adds) has no effect), so the owner is
    /// the words' only writer and applies adds with plain loads and
    /// stores instead of locked atomics — several times cheaper per add,
    /// as cheap as a channel whose handler adds to a table. Concurrent
    /// updates from every rank still add up exactly (the owner applies
    /// them one after another). The window is registered owner-only
    /// (`EndpointBuilder::window_owner_only`): another rank's direct
    /// write to it (`Ctx::put`, `Ctx::put_u64`, `Ctx::update_u64` with
    /// [`window`](Self::window)) fails with
    /// [`PutError::OwnerOnly`];
    /// reads (`Ctx::get`) are allowed. Every rank makes the same words the
    /// same way: a rank that made `name` with [`new`](Self::new) instead
    /// fails the start check.
    pub fn owner_only(agg: &Aggregator, b: &mut EndpointBuilder, name: &str, words: usize) -> Self {
        Self::make(agg, b, name, words, true)
    }

    fn make(
        agg: &Aggregator,
        b: &mut EndpointBuilder,
        name: &str,
        words: usize,
        owner_only: bool,
    ) -> Self {
        let window = format!("fastmsg-mem/{name}");
        let win = if owner_only {
            b.window_owner_only(&window, words * 8)
        } else {
            b.window(&window, words * 8)
        };
        let wn = words as u64;
        let calls = agg.rpc(
            b,
            &format!("fastmsg-mem/{name}/call"),
            move |ctx: &Ctx, _src, r: WordReq| {
                if r.index >= wn {
                    return Err(format!("word {} is out of range ({wn} words)", r.index));
                }
                let off = (r.index * 8) as usize;
                let v = match decode(&r)? {
                    None => ctx.get_u64(win, ctx.rank(), off),
                    Some(op) => ctx.update_u64(win, ctx.rank(), off, op),
                };
                v.map_err(|e| e.to_string())
            },
        );
        let get_channel = format!("fastmsg-mem/{name}/get");
        let gets = agg.rpc_prefetching(
            b,
            &get_channel,
            move |ctx: &Ctx, _src, index: u64| {
                if index >= wn {
                    return Err(format!("word {index} is out of range ({wn} words)"));
                }
                ctx.get_u64(win, ctx.rank(), (index * 8) as usize)
                    .map_err(|e| e.to_string())
            },
            move |ctx: &Ctx, index: u64| {
                if index < wn {
                    ctx.prefetch_u64(win, ctx.rank(), (index * 8) as usize);
                }
            },
        );
        let adds = Adds::new(agg, b, name, win, wn, owner_only);
        let complete = Rc::new(Completer::default());
        let c = Rc::clone(&complete);
        calls.on_complete(move |ctx, owner, token, r| c.run(ctx, owner, token, r));
        let c = Rc::clone(&complete);
        gets.on_complete(move |ctx, owner, token, r| c.run(ctx, owner, token, r));
        let reads = Rc::new(Reads::new(get_channel, win, b.size(), Rc::clone(&complete)));
        agg.add_held(Rc::clone(&reads) as _);
        RemoteWords {
            name: name.to_owned(),
            win,
            words: wn,
            calls,
            gets,
            adds,
            complete,
            reads,
            direct: !owner_only,
            direct_adds: false,
        }
    }

    /// These words with every operation sent to the owner's handler, even
    /// for an owner on this host (the path across hosts): for a program
    /// that wants updates applied by the owner in order with its other
    /// messages, and for measuring that path on one host.
    pub fn through_owner(mut self) -> Self {
        self.direct = false;
        self
    }

    /// These words with `add` and `add_f64` to an owner on this host
    /// applied at once by a CPU atomic (visible at once, no quiesce
    /// needed), instead of the default one-way item to the owner's handler
    /// — for a program that reads its adds back before a quiesce, or whose
    /// adds hit few, cached words. No effect after
    /// [`through_owner`](Self::through_owner).
    pub fn direct_adds(mut self) -> Self {
        self.direct_adds = true;
        self
    }

    #[inline]
    fn direct(&self, ctx: &Ctx, owner: Rank) -> bool {
        self.direct && ctx.is_on_host(owner)
    }

    /// The window (for direct puts and reads; on
    /// [`owner_only`](Self::owner_only) words, only the owner writes its
    /// own).
    pub fn window(&self) -> WindowId {
        self.win
    }

    /// Words per rank.
    pub fn words(&self) -> u64 {
        self.words
    }

    /// Set the completion of [`get`](Self::get) and
    /// [`fetch`](Self::fetch): `(ctx, owner, token, previous value)`.
    /// For a fetch from an owner on this host it runs inside the call,
    /// before the call returns; for a read from one, inside a later call
    /// of these words or a flush: hold no `RefCell` borrow it takes across
    /// a call.
    pub fn on_complete<F>(&self, f: F)
    where
        F: FnMut(&Ctx, Rank, u64, Result<u64, RpcError>) + 'static,
    {
        self.complete.set(Box::new(f));
    }

    #[inline]
    fn check(&self, index: u64) -> Result<usize, MemError> {
        if index >= self.words {
            return Err(MemError::OutOfRange {
                name: self.name.clone(),
                index,
                words: self.words,
            });
        }
        Ok((index * 8) as usize)
    }

    /// Run the completion at once (an owner on this host).
    #[inline]
    fn complete_now(&self, ctx: &Ctx, owner: Rank, token: u64, v: u64) {
        self.complete.run(ctx, owner, token, Ok(v));
    }

    /// Read word `index` of `owner`; the completion gets it with `token`.
    ///
    /// On this host: the word's cache line is requested now and the read
    /// queued; the read (an atomic load) is made, and the completion run,
    /// inside a later `get` of these words once [`READS_IN_FLIGHT`] reads
    /// are queued behind it, or at the latest when the queue is drained — by
    /// [`Aggregator::flush`], [`Aggregator::quiesce`], whenever this rank
    /// is idle (waits, collectives), and before this rank's next update
    /// through these words ([`fetch`](Self::fetch), [`add`](Self::add),
    /// [`set_local`](Self::set_local), [`call`](Self::call) with an
    /// operation). So a run of reads overlaps their cache misses. The
    /// value is the word's at some moment between this call and the
    /// completion; an update this rank makes through these words after
    /// this call is not seen; an owner that fails before the read is made
    /// completes it with [`RpcError::PeerGone`]. Reads on this host
    /// complete in the order they were made. A lone read whose value is
    /// wanted at once is quicker with [`call`](Self::call) and no
    /// operation: on this host it reads now, its future ready on return.
    ///
    /// Elsewhere: an aggregated request. Reads to one owner are
    /// answered in the order they were made, but not in order with
    /// fetching operations ([`fetch`](Self::fetch), [`call`](Self::call)
    /// with an operation) to the same owner through its handler: a read
    /// made after a fetch-add may be answered first and not see it — wait
    /// for the fetch-add's completion before a read that must see it.
    ///
    /// # Errors
    /// [`MemError::OutOfRange`]; [`MemError::Put`] (a bad rank, a peer
    /// gone, the endpoint closed); [`MemError::Rpc`].
    #[inline]
    pub fn get(&self, ctx: &Ctx, owner: Rank, index: u64, token: u64) -> Result<(), MemError> {
        self.check(index)?;
        if self.direct {
            // A rank elsewhere, or none, takes the call.
            if let Some(words) = self.reads.words_of(ctx, owner)? {
                self.reads.issue(ctx, words, index, token);
                return Ok(());
            }
        }
        Ok(self.gets.send(ctx, owner, index, token)?)
    }

    /// Make the queued reads on this host before an update through these
    /// words (which they must not see).
    #[inline]
    fn settle_reads(&self, ctx: &Ctx) {
        if self.reads.queued() > 0 {
            self.reads.drain(ctx);
        }
    }

    /// Apply `op` to word `index` of `owner` atomically; the completion
    /// gets the previous value with `token` (see [`get`](Self::get)).
    /// Fetching operations to one owner are answered in the order they
    /// were made; through the owner's handler they are not ordered with
    /// reads ([`get`](Self::get)) to it: a read made after this may be
    /// answered first — wait for this completion before a read that must
    /// see it.
    ///
    /// # Errors
    /// As [`get`](Self::get).
    #[inline]
    pub fn fetch(
        &self,
        ctx: &Ctx,
        owner: Rank,
        index: u64,
        op: WordOp,
        token: u64,
    ) -> Result<(), MemError> {
        let off = self.check(index)?;
        self.settle_reads(ctx);
        if self.direct(ctx, owner) {
            let v = ctx.update_u64(self.win, owner, off, op)?;
            self.complete_now(ctx, owner, token, v);
            return Ok(());
        }
        Ok(self
            .calls
            .send(ctx, owner, encode(index, Some(op)), token)?)
    }

    /// As [`fetch`](Self::fetch) (`op` `None`: a get), the result in a
    /// future instead of the completion. Through the owner's handler, a
    /// read (`None`) and a fetching operation to the same owner are not
    /// ordered with each other, as for [`get`](Self::get) and
    /// [`fetch`](Self::fetch): wait for the operation's future before a
    /// read that must see it.
    ///
    /// # Errors
    /// As [`get`](Self::get).
    pub fn call(
        &self,
        ctx: &Ctx,
        owner: Rank,
        index: u64,
        op: Option<WordOp>,
    ) -> Result<WordFuture, MemError> {
        let off = self.check(index)?;
        if op.is_some() {
            self.settle_reads(ctx);
        }
        if self.direct(ctx, owner) {
            let v = match op {
                None => ctx.get_u64(self.win, owner, off)?,
                Some(op) => ctx.update_u64(self.win, owner, off, op)?,
            };
            return Ok(WordFuture::Ready(Some(v)));
        }
        let fut = match op {
            None => self.gets.call(ctx, owner, index)?,
            Some(op) => self.calls.call(ctx, owner, encode(index, Some(op)))?,
        };
        Ok(WordFuture::Remote(fut))
    }

    /// Add `value` (wrapping) to word `index` of `owner`; nothing comes
    /// back. A one-way item in the owner's aggregation buffer (4 bytes for
    /// +1, 12 otherwise, on a window of at most 2^31 words), applied by
    /// the owner's handler — whichever host the owner is on: the add is
    /// visible once an [`Aggregator::quiesce`] after it has returned on
    /// every rank, not before. A gone owner fails the send that carries
    /// its buffer or, at the latest, that quiesce. With
    /// [`direct_adds`](Self::direct_adds), an owner on this host gets one
    /// CPU atomic add now, visible at once.
    ///
    /// # Errors
    /// [`MemError::OutOfRange`], [`MemError::Put`], [`MemError::Agg`].
    #[inline]
    pub fn add(&self, ctx: &Ctx, owner: Rank, index: u64, value: u64) -> Result<(), MemError> {
        self.add_bits(ctx, owner, index, value, false)
    }

    /// Add `value` to word `index` of `owner` as an `f64`; as
    /// [`add`](Self::add).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    #[inline]
    pub fn add_f64(&self, ctx: &Ctx, owner: Rank, index: u64, value: f64) -> Result<(), MemError> {
        self.add_bits(ctx, owner, index, value.to_bits(), true)
    }

    #[inline]
    fn add_bits(
        &self,
        ctx: &Ctx,
        owner: Rank,
        index: u64,
        value: u64,
        float: bool,
    ) -> Result<(), MemError> {
        let off = self.check(index)?;
        self.settle_reads(ctx);
        if self.direct_adds && self.direct(ctx, owner) {
            let op = if float {
                WordOp::AddF64(f64::from_bits(value))
            } else {
                WordOp::FetchAdd(value)
            };
            ctx.update_u64(self.win, owner, off, op)?;
            return Ok(());
        }
        Ok(self.adds.send(ctx, owner, index, value, float)?)
    }

    /// This rank's word `index` (an atomic load).
    ///
    /// # Errors
    /// [`MemError::OutOfRange`], [`MemError::Put`].
    pub fn local(&self, ctx: &Ctx, index: u64) -> Result<u64, MemError> {
        let off = self.check(index)?;
        Ok(ctx.get_u64(self.win, ctx.rank(), off)?)
    }

    /// Store `value` in this rank's word `index` (Release).
    ///
    /// # Errors
    /// As [`local`](Self::local).
    pub fn set_local(&self, ctx: &Ctx, index: u64, value: u64) -> Result<(), MemError> {
        let off = self.check(index)?;
        self.settle_reads(ctx);
        Ok(ctx.put_u64(self.win, ctx.rank(), off, value)?)
    }

    /// Reads and fetching calls not completed yet: reads of owners on
    /// this host still queued ([`get`](Self::get)), and calls sent to an
    /// owner's handler and not answered — those to owners on other
    /// hosts, and to every owner, this host's too, with
    /// [`through_owner`](Self::through_owner) or
    /// [`owner_only`](Self::owner_only) words. Calls completed at once
    /// (a fetch from an owner on this host) and adds (one-way: see
    /// [`Aggregator::quiesce`]) are not counted.
    pub fn outstanding(&self) -> usize {
        self.calls.outstanding() + self.gets.outstanding() + self.reads.queued()
    }

    /// Make the reads of owners on this host still queued and run their
    /// completions now ([`get`](Self::get) says when that happens by
    /// itself).
    pub fn complete_reads(&self, ctx: &Ctx) {
        self.reads.drain(ctx);
    }
}
