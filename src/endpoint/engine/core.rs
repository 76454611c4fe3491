//! The engine shared by an [`Endpoint`](crate::endpoint::Endpoint), its handlers'
//! [`Ctx`](crate::endpoint::Ctx) and [`Message`](crate::endpoint::Message) handles;
//! and those handles, defined here because they hold the engine and the
//! engine's handler table holds functions of them (what a handler can do
//! with one is written in `crate::endpoint::receive::message`).
//!
//! Single-threaded (`Rc` + `RefCell`): an endpoint belongs to one thread,
//! and progress happens only inside calls into the library. Borrows of the
//! cells are kept short so that a handler polled by `extract` can send
//! (borrowing `net`) and read its message (borrowing `streams`) while
//! `extract` is between fragments.

use crate::endpoint::engine::control::Control;
use crate::endpoint::engine::control_op::ControlOp;
use crate::endpoint::engine::deferred::Deferred;
use crate::endpoint::engine::handler::Registry;
use crate::endpoint::engine::health::{Failure, Health, Scope};
use crate::endpoint::engine::hooks;
use crate::endpoint::engine::net::{Bell, Net, SHM};
use crate::endpoint::engine::stream::{Fast, Streams};
use crate::endpoint::engine::termination::{CloseCounts, Counting};
use crate::endpoint::engine::wait_policy::WaitConfig;
use crate::error::{ExtractError, ProtocolError, PutError};
#[cfg(feature = "stats")]
use crate::frame::FragFlags;
use crate::id::{HandlerId, Rank, WindowId};
use crate::sync::AtomicBool;
use crate::transport::RxFragment;
use crate::watch::Watchdog;
use crate::window;
use crate::window::{WindowTable, WindowView};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

/// What one `extract` call handled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extracted {
    /// Handlers started (new messages).
    pub messages: usize,
    /// Fragments taken from the transports.
    pub fragments: usize,
    /// Payload bytes taken from the transports.
    pub bytes: usize,
}

impl Extracted {
    /// Whether anything arrived.
    #[inline]
    pub fn any(&self) -> bool {
        self.fragments > 0
    }
}

/// An arriving message, as seen by its handler.
///
/// The handler starts when the first fragment arrives. [`receive`] pulls
/// the next bytes straight out of the arrived frames into the handler's
/// buffer and suspends (`.await`) while they have not arrived; frames are
/// released as they are used up. Whatever the handler has not read when it
/// returns is dropped.
///
/// [`receive`]: Message::receive
#[derive(Debug)]
pub struct Message {
    core: Rc<Core>,
    pub(in crate::endpoint) src: Rank,
    pub(in crate::endpoint) seq: u64,
    pub(in crate::endpoint) total: u64,
    /// Bytes the handler has received so far.
    pub(in crate::endpoint) read: u64,
    pub(in crate::endpoint) handler: HandlerId,
}

impl Message {
    pub(in crate::endpoint) fn new(
        core: Rc<Core>,
        src: Rank,
        seq: u64,
        total: u64,
        handler: HandlerId,
    ) -> Self {
        Message {
            core,
            src,
            seq,
            total,
            read: 0,
            handler,
        }
    }

    /// The engine behind this handle.
    #[inline(always)]
    pub(in crate::endpoint) fn core(&self) -> &Rc<Core> {
        &self.core
    }
}

/// What a handler can do besides reading its message: send.
///
/// Sends from a handler never block. Without credit, the rest of the message
/// is copied into a pending queue and sent by later progress, in order.
/// From outside any handler (a `Ctx` got from
/// [`Endpoint::ctx`](crate::Endpoint::ctx) in the main loop), a send that
/// finds more than [`Config::max_parked`](crate::Config::max_parked) bytes
/// parked makes progress until they are under it: memory stays bounded
/// however fast the main loop sends.
#[derive(Debug, Clone)]
#[repr(transparent)]
pub struct Ctx {
    core: Rc<Core>,
}

impl Ctx {
    pub(in crate::endpoint) fn new(core: Rc<Core>) -> Self {
        Ctx { core }
    }

    /// The engine behind this handle.
    #[inline(always)]
    pub(in crate::endpoint) fn core(&self) -> &Rc<Core> {
        &self.core
    }

    /// View an `Rc<Core>` as a `Ctx` without touching the reference count.
    #[inline]
    #[allow(unsafe_code)] // a cast between types of one layout, below
    pub(in crate::endpoint) fn from_core(core: &Rc<Core>) -> &Ctx {
        // SAFETY: `Ctx` is `repr(transparent)` over `Rc<Core>`, so the two
        // have the same layout; the returned reference borrows `core`.
        unsafe { &*(core as *const Rc<Core> as *const Ctx) }
    }
}

/// The handler table as the engine holds it: its handlers get a [`Ctx`]
/// and, when async, a [`Message`].
pub(in crate::endpoint) type HandlerTable = Registry<Ctx, Message>;

/// The idle hooks as the engine holds them: each gets a [`Ctx`].
pub(in crate::endpoint) type IdleHooks = hooks::Hooks<Ctx>;

/// An idle hook, type-erased.
pub(in crate::endpoint) type Hook = hooks::Hook<Ctx>;

/// Marks a pass of `progress` on the stack for its length.
struct Inside<'a>(&'a Core);

impl<'a> Inside<'a> {
    #[inline]
    fn enter(core: &'a Core) -> Self {
        core.depth.set(core.depth.get() + 1);
        Inside(core)
    }
}

impl Drop for Inside<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.depth.set(self.0.depth.get() - 1);
    }
}

/// Fragments taken from one transport before moving to the next.
const BATCH: usize = 32;

/// The engine's state. Each part belongs to the room that changes it and
/// is reached through that room's own type and methods, never through a
/// field: the settings fixed at start (read through the accessors below);
/// the send queues and routes ([`Net`], `net`); the receive state machine
/// ([`Streams`], `stream`, performed by `crate::endpoint::receive`); the
/// handler table ([`Registry`], `handler`); the control plane ([`Control`],
/// `control`) and this rank's termination counts ([`Counting`],
/// `termination`); peers' failures ([`Health`], `health`); the errors kept
/// for the next `extract` ([`Deferred`], `deferred`); the idle hooks
/// ([`Hooks`], `hooks`, run by `crate::endpoint::wait`). What this file
/// owns itself: the poll loop, how deep in it the rank is (handlers run
/// inside), and the watchdog's alarm and the abort flag it reads.
pub(in crate::endpoint) struct Core {
    rank: Rank,
    size: u32,
    handler_count: u32,
    /// The watchdog thread and its alarm word. Its probes hold what they
    /// read (the segment's lifelines, the NIC's link words) themselves.
    watchdog: Watchdog,
    /// What is known of peers' failures (sticky).
    health: Health,
    /// The supervisor's abort was reported by `extract`.
    abort_reported: Cell<bool>,
    net: RefCell<Net>,
    /// The receive state machine, one stream per source (`crate::endpoint::engine::stream`;
    /// performed by `crate::endpoint::receive::dispatch`).
    streams: RefCell<Streams>,
    registry: RefCell<HandlerTable>,
    control: RefCell<Control>,
    /// This rank's termination counts: messages received, rounds entered.
    counting: Counting,
    /// Errors kept for the next `extract`.
    deferred: Deferred,
    wait: WaitConfig,
    abort: Option<Arc<AtomicBool>>,
    /// One-sided windows: the table, and this rank's own area (a view that
    /// keeps the segment mapped).
    windows: WindowTable,
    my_window: WindowView,
    /// Ranks on this host, in rank order.
    local: Vec<Rank>,
    /// The doorbell this rank sleeps on (sleep policy), in the segment,
    /// which the view keeps mapped.
    bell: Option<Bell>,
    /// How long `close` waits before saying whom it waits for.
    close_warn: std::time::Duration,
    /// Idle hooks and their flag.
    hooks: IdleHooks,
    /// Passes of `progress` on the stack (handlers run inside them): a
    /// send made there never blocks.
    depth: Cell<u32>,
    /// Parked bytes past which a send from outside handlers makes
    /// progress instead (see `crate::endpoint::send::backpressure`).
    max_parked: usize,
    /// The longest message `Message::receive_vec` allocates for.
    max_receive: usize,
}

/// What the builder hands the engine besides transports and handlers.
pub(in crate::endpoint) struct CoreSetup {
    pub(in crate::endpoint) wait: WaitConfig,
    pub(in crate::endpoint) abort: Option<Arc<AtomicBool>>,
    pub(in crate::endpoint) windows: WindowTable,
    pub(in crate::endpoint) my_window: WindowView,
    pub(in crate::endpoint) local: Vec<Rank>,
    pub(in crate::endpoint) watchdog: Watchdog,
    pub(in crate::endpoint) close_warn: std::time::Duration,
    pub(in crate::endpoint) hooks: Vec<Hook>,
    pub(in crate::endpoint) max_parked: usize,
    pub(in crate::endpoint) max_receive: usize,
}

/// Settings fixed at start, read by the rooms above the engine.
impl Core {
    /// This rank.
    #[inline]
    pub(in crate::endpoint) fn rank(&self) -> Rank {
        self.rank
    }

    /// Ranks in the job.
    #[inline]
    pub(in crate::endpoint) fn size(&self) -> u32 {
        self.size
    }

    /// Handlers registered (the table frozen at start).
    #[inline]
    pub(in crate::endpoint) fn handler_count(&self) -> u32 {
        self.handler_count
    }

    /// The watchdog thread and its alarm word.
    #[inline]
    pub(in crate::endpoint) fn watchdog(&self) -> &Watchdog {
        &self.watchdog
    }

    /// The wait policy as resolved at start.
    #[inline]
    pub(in crate::endpoint) fn wait(&self) -> WaitConfig {
        self.wait
    }

    /// The one-sided windows of every rank.
    #[inline]
    pub(in crate::endpoint) fn windows(&self) -> &WindowTable {
        &self.windows
    }

    /// This rank's own window area.
    #[inline]
    pub(in crate::endpoint) fn my_window(&self) -> &WindowView {
        &self.my_window
    }

    /// Ranks on this host, in rank order.
    #[inline]
    pub(in crate::endpoint) fn local(&self) -> &[Rank] {
        &self.local
    }

    /// The doorbell this rank sleeps on, if it sleeps.
    #[inline]
    pub(in crate::endpoint) fn bell(&self) -> Option<&Bell> {
        self.bell.as_ref()
    }

    /// How long `close` waits before saying whom it waits for.
    #[inline]
    pub(in crate::endpoint) fn close_warn(&self) -> std::time::Duration {
        self.close_warn
    }

    /// The bound on parked bytes for sends made outside handlers.
    #[inline]
    pub(in crate::endpoint) fn max_parked(&self) -> usize {
        self.max_parked
    }

    /// The longest message `Message::receive_vec` allocates for.
    #[inline]
    pub(in crate::endpoint) fn max_receive(&self) -> usize {
        self.max_receive
    }
}

/// The parts of the engine, each its room's type (see [`Core`]).
impl Core {
    /// The send queues and routes (`crate::endpoint::engine::net`).
    #[inline(always)]
    pub(in crate::endpoint) fn net(&self) -> &RefCell<Net> {
        &self.net
    }

    /// The receive state machine (`crate::endpoint::engine::stream`).
    #[inline(always)]
    pub(in crate::endpoint) fn streams(&self) -> &RefCell<Streams> {
        &self.streams
    }

    /// The handler table, frozen at start.
    #[inline(always)]
    pub(in crate::endpoint) fn registry(&self) -> &RefCell<HandlerTable> {
        &self.registry
    }

    /// The control plane: the start-up table check, termination rounds,
    /// stragglers.
    #[inline]
    pub(in crate::endpoint) fn control(&self) -> &RefCell<Control> {
        &self.control
    }

    /// This rank's termination counts.
    #[inline(always)]
    pub(in crate::endpoint) fn counting(&self) -> &Counting {
        &self.counting
    }

    /// What is known of peers' failures.
    #[inline]
    pub(in crate::endpoint) fn health(&self) -> &Health {
        &self.health
    }

    /// The idle hooks and their flag.
    #[inline(always)]
    pub(in crate::endpoint) fn hooks(&self) -> &IdleHooks {
        &self.hooks
    }

    /// Whether this runs inside a handler (a pass of `progress` is on the
    /// stack) or an idle hook: where sends never block.
    #[inline(always)]
    pub(in crate::endpoint) fn in_handler(&self) -> bool {
        self.depth.get() > 0 || self.hooks.running()
    }
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl Core {
    pub(in crate::endpoint) fn new(
        rank: Rank,
        size: u32,
        net: Net,
        registry: HandlerTable,
        setup: CoreSetup,
    ) -> Core {
        // Only the shm transport has a doorbell (the network transports'
        // NICs ring it).
        let bell = Some(net.doorbell());
        Core {
            rank,
            size,
            handler_count: registry.len(),
            watchdog: setup.watchdog,
            health: Health::new(size),
            abort_reported: Cell::new(false),
            net: RefCell::new(net),
            streams: RefCell::new(Streams::new(size, registry.fn_kinds())),
            registry: RefCell::new(registry),
            control: RefCell::new(Control::new(size)),
            counting: Counting::default(),
            deferred: Deferred::default(),
            wait: setup.wait,
            abort: setup.abort,
            windows: setup.windows,
            my_window: setup.my_window,
            local: setup.local,
            bell,
            close_warn: setup.close_warn,
            hooks: IdleHooks::new(setup.hooks),
            depth: Cell::new(0),
            max_parked: setup.max_parked,
            max_receive: setup.max_receive,
        }
    }

    /// Report an error at the next `extract` (used where progress runs on
    /// behalf of a send).
    #[inline]
    pub(in crate::endpoint) fn defer(&self, e: ExtractError) {
        self.deferred.push(e);
    }

    /// The oldest error kept for the next `extract`.
    #[inline]
    pub(in crate::endpoint) fn take_deferred(&self) -> Option<ExtractError> {
        self.deferred.take()
    }

    /// Poll every transport in turn and run handlers: one pass, up to
    /// `BATCH` fragments per transport, stopping once `max_bytes` of payload
    /// were taken.
    #[inline(always)]
    pub(in crate::endpoint) fn progress(
        self: &Rc<Self>,
        max_bytes: usize,
    ) -> Result<Extracted, ExtractError> {
        // The empty poll, inline: one load per receive queue, and the
        // watchdog's alarm word.
        if self.is_idle() {
            return Ok(Extracted::default());
        }
        self.progress_busy(max_bytes, false)
    }

    /// As `progress`, but return as soon as one message has been handled:
    /// what a blocking wait wants, since its condition usually turns true
    /// in a handler and should be checked before polling again.
    #[inline]
    pub(in crate::endpoint) fn progress_one(self: &Rc<Self>) -> Result<Extracted, ExtractError> {
        if self.is_idle() {
            return Ok(Extracted::default());
        }
        self.progress_busy(usize::MAX, true)
    }

    /// Whether a pass would find nothing to do: no arrival, no parked send,
    /// no credit to publish, no alarm. Looks without a `RefCell` borrow:
    /// taking and dropping one is a store and a load of the borrow count
    /// each, and in a polling loop each waits for the last through the
    /// store buffer, which bounded the empty `extract` (docs/engine.md,
    /// "Store forwarding").
    #[inline(always)]
    #[allow(unsafe_code)] // an unguarded shared borrow, below
    fn is_idle(&self) -> bool {
        // Debug builds hold a real borrow meanwhile: a mutable borrow during
        // the look below would panic in the tests instead of going unseen.
        #[cfg(debug_assertions)]
        let _held = self.net.try_borrow().ok();
        // SAFETY: `try_borrow_unguarded` fails if `net` is mutably borrowed
        // now (then: not idle, and the busy path borrows as usual). The
        // shared reference lives only for `needs_attention`, which reads
        // `Net`'s fields and asks each transport whether anything arrived.
        // A network transport may make progress on its wire there (read
        // sockets, completions) and change its own state, but transports
        // are a lower layer: none holds a way back to `Core`, and none runs
        // a handler, a hook or other user code (the contract of
        // `Transport::has_arrivals`). So nothing can borrow `net` mutably
        // while the reference lives.
        let quiet = match unsafe { self.net.try_borrow_unguarded() } {
            Ok(net) => !net.needs_attention(),
            Err(_) => false,
        };
        quiet && !self.watchdog.alarm().raised()
    }

    #[inline(never)]
    fn progress_busy(
        self: &Rc<Self>,
        max_bytes: usize,
        stop_early: bool,
    ) -> Result<Extracted, ExtractError> {
        let _inside = Inside::enter(self);
        if self.watchdog.alarm().raised() {
            // A peer failed (or the job was aborted): record it, then
            // report the first news now.
            self.absorb_alarm();
            if let Some(e) = self.take_deferred() {
                return Err(e);
            }
        }
        let mut out = Extracted::default();
        let (wide, chores) = {
            let net = self.net.borrow();
            (net.has_wide(), net.has_pending() || net.flush_due())
        };
        if chores {
            self.net.borrow_mut().drain_pending();
        }
        // One pass: up to BATCH fragments from shm (polled directly, its
        // loop inlined here), then from each network transport (out of
        // line). With nothing arrived this is one borrow and one load per
        // queue.
        let mut result = self.batch(SHM, max_bytes, stop_early, &mut out, |net| net.poll_shm());
        if wide && matches!(result, Ok(true)) {
            result = self.poll_wide(max_bytes, stop_early, &mut out);
        }
        let result = result.map(|_| ());
        if chores || self.net.borrow().flush_due() {
            self.after_pass();
        }
        result.map(|()| out)
    }

    /// The network transports' share of a pass (see `progress_busy`).
    #[inline(never)]
    fn poll_wide(
        self: &Rc<Self>,
        max_bytes: usize,
        stop_early: bool,
        out: &mut Extracted,
    ) -> Result<bool, ExtractError> {
        let n = self.net.borrow().wide_count();
        for k in 0..n {
            let more = self.batch(k as u8 + 1, max_bytes, stop_early, out, |net| {
                net.poll_wide(k)
            })?;
            if !more {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Take up to `BATCH` fragments from transport `index` through `poll`
    /// and run their handlers. `Ok(false)`: the pass should stop (enough
    /// bytes, or a message handled when `stop_early`).
    #[inline(always)]
    fn batch(
        self: &Rc<Self>,
        index: u8,
        max_bytes: usize,
        stop_early: bool,
        out: &mut Extracted,
        mut poll: impl FnMut(&mut Net) -> Option<Result<RxFragment, ProtocolError>>,
    ) -> Result<bool, ExtractError> {
        for _ in 0..BATCH {
            let polled = poll(&mut self.net.borrow_mut());
            let mut frag = match polled {
                None => break,
                Some(Ok(f)) => f,
                Some(Err(e)) => return Err(e.into()),
            };
            frag.transport = index;
            #[cfg(feature = "stats")]
            self.net.borrow().tally().received(
                frag.header.src as usize,
                frag.header.len,
                frag.header.flags & FragFlags::FIRST.0 != 0,
            );
            out.fragments += 1;
            out.bytes += frag.header.len as usize;
            let fast = self.streams.borrow().fast(&frag.header);
            match fast {
                Fast::Piece => {
                    out.messages += 1;
                    self.counting.received_one();
                    self.run_fast_piece(&frag)?;
                }
                Fast::Async => {
                    out.messages += 1;
                    self.counting.received_one();
                    self.run_fast_async(frag)?;
                }
                Fast::No => out.messages += usize::from(self.deliver(frag)?),
            }
            if out.bytes >= max_bytes || (stop_early && out.messages > 0) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Publish batched credit and push parked sends after a busy pass.
    #[inline(never)]
    fn after_pass(&self) {
        let mut net = self.net.borrow_mut();
        net.flush();
        if net.has_pending() {
            net.drain_pending();
        }
    }

    /// This rank's message counts for the close barrier.
    pub(in crate::endpoint) fn close_counts(&self) -> CloseCounts {
        CloseCounts {
            sent: self.net.borrow().sent_count(),
            received: self.counting.received(),
        }
    }

    /// Send a small control message (never blocks; parks without credit).
    pub(in crate::endpoint) fn send_control(&self, dest: Rank, op: ControlOp, payload: &[u8]) {
        let stream = crate::endpoint::engine::net::OutStream::control(
            self.rank,
            dest,
            op,
            payload.len() as u64,
        );
        self.net.borrow_mut().send_or_park(stream, &[payload]);
    }

    /// Read what the watchdog found (the alarm was raised): record every
    /// peer that failed, left or closed since, and defer the reports (one
    /// error per failure, for `extract`).
    #[cold]
    #[inline(never)]
    pub(in crate::endpoint) fn absorb_alarm(self: &Rc<Self>) {
        self.watchdog.alarm().clear();
        if let Some(a) = &self.abort {
            if !self.abort_reported.get() && a.load(crate::sync::Ordering::Relaxed) {
                self.abort_reported.set(true);
                self.defer(ExtractError::Aborted);
            }
        }
        // What this rank's own sends found corrupt in a peer's shared
        // queue (the shm transport raised the alarm), first: the peer may
        // have left over that very queue since (`leave_over_queue`), and
        // the corruption is the cause to report.
        loop {
            let refused = self.net.borrow_mut().take_refusal();
            match refused {
                Some(e) => self.note_error(ExtractError::Protocol(e)),
                None => break,
            }
        }
        let local = self.net.borrow().local_failures();
        for (rank, how) in local {
            self.peer_failed(rank, how);
        }
        // A hole a dead writer left in a shared queue we read (the probe
        // raises the alarm again once the grace has passed).
        let hole = self.net.borrow_mut().find_hole();
        if let Some(e) = hole {
            self.defer(ExtractError::Protocol(e));
        }
        // Network transports report their failures (one per call).
        for _ in 0..=self.size {
            let r = self.net.borrow_mut().check_wide();
            match r {
                Ok(()) => break,
                Err(e) => self.note_error(e),
            }
        }
        // The transports' own checks (a corrupt queue, a silent peer): the
        // watchdog's tick raises the alarm for them twice a second, so a
        // program that only polls learns of them too.
        if let Err(e) = self.check_transports() {
            self.defer(e);
        }
    }

    /// An error from a transport check: a peer's failure is recorded (and
    /// reported once), anything else reported as it is.
    fn note_error(self: &Rc<Self>, e: ExtractError) {
        match Failure::of_error(&e) {
            Some((rank, how)) => self.peer_failed(rank, how),
            None => self.defer(e),
        }
    }

    /// `rank` failed, left or closed: record it for good; on a failure,
    /// drop what is parked for it, end its cut-off message as aborted and
    /// report it once.
    pub(in crate::endpoint) fn peer_failed(self: &Rc<Self>, rank: Rank, how: Failure) {
        if rank == self.rank || !self.health.record(rank, how.clone()) {
            return;
        }
        {
            self.net.borrow_mut().peer_gone(rank);
        }
        if let Some(e) = how.error(rank) {
            self.defer(e);
            if let Err(e) = self.abort_stream(rank) {
                self.defer(e);
            }
        }
    }

    /// The watchdog raised the alarm: outside handlers and idle hooks,
    /// record what it found now (a send then sees its destination gone);
    /// inside them the pass of `progress` running them reads it next.
    #[cold]
    #[inline(never)]
    pub(in crate::endpoint) fn learn_failures(self: &Rc<Self>) {
        if !self.in_handler() {
            self.absorb_alarm();
        }
    }

    /// The failure a blocking wait in `scope` must stop with, after the
    /// abort flag and whatever the watchdog found. Cheap when nothing
    /// happened: called at every idle round of a wait.
    pub(in crate::endpoint) fn check_failures(
        self: &Rc<Self>,
        scope: Scope,
    ) -> Result<(), ExtractError> {
        if let Some(a) = &self.abort {
            if a.load(crate::sync::Ordering::Relaxed) {
                return Err(ExtractError::Aborted);
            }
        }
        if self.watchdog.alarm().raised() {
            self.absorb_alarm();
        }
        // This rank left the job over a shared-memory queue: its cause
        // comes before any peer's failure (those that followed its
        // departure are its consequences).
        let left = self.net.borrow().left_over();
        if let Some(e) = left {
            return Err(ExtractError::Protocol(e));
        }
        match self.health.stop_for(scope) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The transports' own periodic checks (corrupt queues and rings, the
    /// network's credit backstop and link states), for an idle waiter.
    /// Peer failures found are recorded; other errors returned.
    pub(in crate::endpoint) fn check_transports(self: &Rc<Self>) -> Result<(), ExtractError> {
        for _ in 0..=self.size {
            let r = self.net.borrow_mut().for_each(|t| t.check_peers());
            match r {
                Ok(()) => return Ok(()),
                Err(e) if e.failed_peer().is_some() => self.note_error(e),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// One-sided put of `data` at `offset` of window `win` on `dest`
    /// (refused on another rank's owner-only window).
    pub(in crate::endpoint) fn put(
        &self,
        win: WindowId,
        dest: Rank,
        offset: usize,
        data: &[u8],
    ) -> Result<(), PutError> {
        window::check_dest(dest, self.size)?;
        let at = self.windows.locate(win, offset, data.len())?;
        self.windows.check_writer(win, self.rank, dest)?;
        if self.health.is_gone(dest) {
            return Err(self.named_put_error(PutError::PeerGone { rank: dest }));
        }
        let r = self.net.borrow_mut().put(dest, at, data);
        r.map_err(|e| self.named_put_error(e))
    }

    /// Why `dest`'s host was taken as dead, if it fell silent: as the
    /// health record keeps it, else as its transport knows it.
    pub(in crate::endpoint) fn silence(&self, dest: Rank) -> Option<String> {
        self.health
            .silence(dest)
            .or_else(|| self.net.borrow().silence(dest))
    }

    /// `e`, with the cause named where it says only that the peer is gone
    /// and the peer fell silent ([`PutError::PeerSilent`]).
    pub(in crate::endpoint) fn named_put_error(&self, e: PutError) -> PutError {
        match e {
            PutError::PeerGone { rank } => match self.silence(rank) {
                Some(why) => PutError::PeerSilent { rank, why },
                None => e,
            },
            e => e,
        }
    }

    /// One-sided atomic store of an 8-byte word (refused on another
    /// rank's owner-only window).
    pub(in crate::endpoint) fn put_u64(
        &self,
        win: WindowId,
        dest: Rank,
        offset: usize,
        value: u64,
    ) -> Result<(), PutError> {
        window::check_dest(dest, self.size)?;
        let at = self.windows.locate_word(win, offset)?;
        self.windows.check_writer(win, self.rank, dest)?;
        if self.health.is_gone(dest) {
            return Err(self.named_put_error(PutError::PeerGone { rank: dest }));
        }
        let r = self.net.borrow_mut().put_u64(dest, at, value);
        r.map_err(|e| self.named_put_error(e))
    }

    /// Acquire-load a word of this rank's own window.
    pub(in crate::endpoint) fn read_u64(
        &self,
        win: WindowId,
        offset: usize,
    ) -> Result<u64, PutError> {
        let at = self.windows.locate_word(win, offset)?;
        Ok(self.my_window.load_u64(at))
    }

    /// Copy bytes out of this rank's own window.
    pub(in crate::endpoint) fn read_window(
        &self,
        win: WindowId,
        offset: usize,
        buf: &mut [u8],
    ) -> Result<(), PutError> {
        let at = self.windows.locate(win, offset, buf.len())?;
        self.my_window.read(at, buf);
        Ok(())
    }

    /// Drop handlers, in-flight futures and fragments (teardown).
    pub(in crate::endpoint) fn teardown(&self) {
        // Take the registry out first: dropping futures drops `Message`s,
        // which touch `streams`.
        let registry = std::mem::take(&mut *self.registry.borrow_mut());
        drop(registry);
        self.streams.borrow_mut().clear();
    }
}
