//! The engine shared by an [`Endpoint`](super::Endpoint), its handlers'
//! [`Ctx`](super::Ctx) and [`Message`](super::Message) handles.
//!
//! Single-threaded (`Rc` + `RefCell`): an endpoint belongs to one thread,
//! and progress happens only inside calls into the library. Borrows of the
//! cells are kept short so that a handler polled by `extract` can send
//! (borrowing `net`) and read its message (borrowing `streams`) while
//! `extract` is between fragments.

use super::control::{CloseCounts, Control};
use super::health::{Failure, Health, Scope};
use super::net::{on_transport, Net, SHM};
use super::stream::{Accepted, Current, Cut, PieceInfo, SourceStream};
use super::wait::WaitConfig;
use super::{Ctx, Message, Piece};
use crate::endpoint::handler::pool::Run;
use crate::endpoint::handler::{HandlerResult, Registry};
use crate::error::{BoxError, ExtractError, ProtocolError, PutError};
use crate::frame::FragFlags;
use crate::id::Rank;
use crate::id::WindowId;
use crate::sync::AtomicBool;
use crate::transport::shm::liveness::Life;
use crate::transport::{RxFragment, Transport};
use crate::watch::Watchdog;
use crate::window;
use crate::window::{WindowArea, WindowTable};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
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

/// Which fast path a fragment can take (see `Core::fast_kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fast {
    /// The general path.
    No,
    /// A whole message for a plain-function handler.
    Piece,
    /// A whole message for an async handler.
    Async,
}

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

/// Errors kept for the next `extract` at most.
const MAX_DEFERRED: usize = 64;

/// Fragments taken from one transport before moving to the next.
const BATCH: usize = 32;

pub(crate) struct Core {
    pub(crate) rank: Rank,
    pub(crate) size: u32,
    pub(crate) handler_count: u32,
    /// Per handler id: whether it is a plain function.
    piecewise: Vec<bool>,
    /// The watchdog thread and its alarm word. Declared before `net`, so
    /// it is stopped before the transports (whose memory it reads) go.
    pub(crate) watchdog: Watchdog,
    /// What is known of peers' failures (sticky).
    pub(crate) health: Health,
    /// The supervisor's abort was reported by `extract`.
    abort_reported: Cell<bool>,
    pub(crate) net: RefCell<Net>,
    pub(crate) streams: RefCell<Vec<SourceStream>>,
    pub(crate) registry: RefCell<Registry>,
    pub(crate) control: RefCell<Control>,
    /// User messages whose last fragment arrived (the close barrier's count).
    received: Cell<u64>,
    deferred: RefCell<VecDeque<ExtractError>>,
    /// Whether `deferred` is non-empty (checked on every extract).
    has_deferred: Cell<bool>,
    pub(crate) wait: WaitConfig,
    pub(crate) abort: Option<Arc<AtomicBool>>,
    /// One-sided windows: the table, and this rank's own area.
    pub(crate) windows: WindowTable,
    pub(crate) my_window: WindowArea,
    /// Ranks on this host, in rank order.
    pub(crate) local: Vec<Rank>,
    /// The doorbell this rank sleeps on (sleep policy), if any.
    pub(crate) bell: Option<super::wait::BellRef>,
    /// How long `close` waits before saying whom it waits for.
    pub(crate) close_warn: std::time::Duration,
    /// Idle hooks and their flag.
    pub(crate) hooks: super::hook::Hooks,
    /// Passes of `progress` on the stack (handlers run inside them): a
    /// send made there never blocks.
    pub(crate) depth: Cell<u32>,
    /// Parked bytes past which a send from outside handlers makes
    /// progress instead (see `super::backpressure`).
    pub(crate) max_parked: usize,
    /// Termination rounds this rank has entered (`quiesce` and `close`).
    pub(crate) rounds: Cell<u32>,
}

/// What the builder hands the engine besides transports and handlers.
pub(crate) struct CoreSetup {
    pub(crate) wait: WaitConfig,
    pub(crate) abort: Option<Arc<AtomicBool>>,
    pub(crate) windows: WindowTable,
    pub(crate) my_window: WindowArea,
    pub(crate) local: Vec<Rank>,
    pub(crate) watchdog: Watchdog,
    pub(crate) close_warn: std::time::Duration,
    pub(crate) hooks: Vec<super::hook::Hook>,
    pub(crate) max_parked: usize,
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
    #[allow(unsafe_code)] // the doorbell reference, below
    pub(crate) fn new(
        rank: Rank,
        size: u32,
        net: Net,
        registry: Registry,
        setup: CoreSetup,
    ) -> Core {
        // SAFETY: the doorbell lives in transport memory owned by `net`
        // (the shm mapping, or a transport's heap data, which moving `net`
        // does not move); `net` becomes this core's and is dropped with it.
        let bell = net
            .doorbell()
            .map(|b| unsafe { super::wait::BellRef::new(b) });
        Core {
            rank,
            size,
            handler_count: registry.len(),
            piecewise: registry.fn_kinds(),
            watchdog: setup.watchdog,
            health: Health::new(size),
            abort_reported: Cell::new(false),
            net: RefCell::new(net),
            streams: RefCell::new((0..size).map(SourceStream::new).collect()),
            registry: RefCell::new(registry),
            control: RefCell::new(Control::new(size)),
            received: Cell::new(0),
            deferred: RefCell::new(VecDeque::new()),
            has_deferred: Cell::new(false),
            wait: setup.wait,
            abort: setup.abort,
            windows: setup.windows,
            my_window: setup.my_window,
            local: setup.local,
            bell,
            close_warn: setup.close_warn,
            hooks: super::hook::Hooks::new(setup.hooks),
            depth: Cell::new(0),
            max_parked: setup.max_parked,
            rounds: Cell::new(0),
        }
    }

    /// Report an error at the next `extract` (used where progress runs on
    /// behalf of a send).
    pub(crate) fn defer(&self, e: ExtractError) {
        let mut d = self.deferred.borrow_mut();
        // Bounded: a program that never calls `extract` again must not grow
        // without limit; the oldest errors (the causes) are kept.
        if d.len() < MAX_DEFERRED {
            d.push_back(e);
        }
        self.has_deferred.set(true);
    }

    /// The oldest error kept for the next `extract`.
    #[inline]
    pub(crate) fn take_deferred(&self) -> Option<ExtractError> {
        if !self.has_deferred.get() {
            return None;
        }
        let mut d = self.deferred.borrow_mut();
        let e = d.pop_front();
        self.has_deferred.set(!d.is_empty());
        e
    }

    /// Poll every transport in turn and run handlers: one pass, up to
    /// `BATCH` fragments per transport, stopping once `max_bytes` of payload
    /// were taken.
    #[inline(always)]
    pub(crate) fn progress(self: &Rc<Self>, max_bytes: usize) -> Result<Extracted, ExtractError> {
        // The empty poll, inline: one borrow, one load per receive queue,
        // and the watchdog's alarm word.
        if !self.net.borrow().needs_attention() && !self.watchdog.alarm().raised() {
            return Ok(Extracted::default());
        }
        self.progress_busy(max_bytes, false)
    }

    /// As `progress`, but return as soon as one message has been handled:
    /// what a blocking wait wants, since its condition usually turns true
    /// in a handler and should be checked before polling again.
    #[inline]
    pub(crate) fn progress_one(self: &Rc<Self>) -> Result<Extracted, ExtractError> {
        if !self.net.borrow().needs_attention() && !self.watchdog.alarm().raised() {
            return Ok(Extracted::default());
        }
        self.progress_busy(usize::MAX, true)
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
            (!net.wide.is_empty(), net.has_pending() || net.unflushed)
        };
        if chores {
            self.net.borrow_mut().drain_pending();
        }
        // One pass: up to BATCH fragments from shm (polled directly, its
        // loop inlined here), then from each network transport (out of
        // line). With nothing arrived this is one borrow and one load per
        // queue.
        let mut result = self.batch(SHM, max_bytes, stop_early, &mut out, |net| net.shm.poll());
        if wide && matches!(result, Ok(true)) {
            result = self.poll_wide(max_bytes, stop_early, &mut out);
        }
        let result = result.map(|_| ());
        if chores || self.net.borrow().unflushed {
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
        let n = self.net.borrow().wide.len();
        for k in 0..n {
            let more = self.batch(k as u8 + 1, max_bytes, stop_early, out, |net| {
                net.wide[k].poll()
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
            self.net.borrow().tally.received(
                frag.header.src as usize,
                frag.header.len,
                frag.header.flags & FragFlags::FIRST.0 != 0,
            );
            out.fragments += 1;
            out.bytes += frag.header.len as usize;
            match self.fast_kind(&frag) {
                Fast::Piece => {
                    out.messages += 1;
                    self.received.set(self.received.get() + 1);
                    self.run_fast_piece(&frag)?;
                }
                Fast::Async => {
                    out.messages += 1;
                    self.received.set(self.received.get() + 1);
                    self.run_fast_async(frag)?;
                }
                Fast::No => self.deliver(frag, out)?,
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

    /// Whether `frag` is a whole message (one fragment) from a source with
    /// nothing else going on, and for which kind of handler: such messages
    /// skip the general stream bookkeeping.
    #[inline(always)]
    fn fast_kind(&self, frag: &RxFragment) -> Fast {
        const WHOLE: u32 = FragFlags::FIRST.0 | FragFlags::LAST.0;
        let h = &frag.header;
        if h.flags != WHOLE || u64::from(h.len) != h.total {
            return Fast::No;
        }
        let kind = match self.piecewise.get(h.handler as usize) {
            Some(true) => Fast::Piece,
            Some(false) => Fast::Async,
            None => return Fast::No,
        };
        if self.streams.borrow()[h.src as usize].is_idle() {
            kind
        } else {
            Fast::No
        }
    }

    #[inline(always)]
    fn run_fast_piece(self: &Rc<Self>, frag: &RxFragment) -> Result<(), ExtractError> {
        let h = &frag.header;
        match self.call_piece(frag, 0, h.total, false) {
            Ok(()) => Ok(()),
            Err(source) => self
                .handler_failed(h.src, h.handler, source, false)
                .map(|_| ()),
        }
    }

    /// Call the plain-function handler of `frag` on it (a piece at `offset`
    /// of a message of `total` bytes, its aborted end if `aborted`), then
    /// release it.
    #[inline(always)]
    fn call_piece(
        self: &Rc<Self>,
        frag: &RxFragment,
        offset: u64,
        total: u64,
        aborted: bool,
    ) -> HandlerResult {
        let h = &frag.header;
        let piece = Piece {
            source: Rank(h.src),
            offset,
            total,
            handler: h.handler,
            data: frag.bytes(),
            aborted,
        };
        #[cfg(feature = "stats")]
        let t = self.net.borrow().tally.call_start();
        let result = self
            .registry
            .borrow_mut()
            .call_fn(h.handler, Ctx::from_core(self), &piece);
        #[cfg(feature = "stats")]
        self.net.borrow().tally.call_end(t);
        self.release(frag);
        result
    }

    /// A whole message for an async handler from an idle source: enter it
    /// and run the handler directly (no other message of the source can be
    /// current or queued, so none needs starting afterwards).
    #[inline(never)]
    fn run_fast_async(self: &Rc<Self>, frag: RxFragment) -> Result<(), ExtractError> {
        let (src, handler, total) = (frag.header.src, frag.header.handler, frag.header.total);
        let seq = self.streams.borrow_mut()[src as usize].enter_whole(frag);
        let msg = Message::new(Rc::clone(self), Rank(src), seq, total, handler);
        let run = self
            .registry
            .borrow_mut()
            .entry(handler)
            .start(Ctx::new(Rc::clone(self)), msg);
        self.after_run(src, handler, run).map(|_| ())
    }

    /// Give a fragment back to the transport it came from.
    #[inline]
    pub(crate) fn release(&self, f: &RxFragment) {
        let mut net = self.net.borrow_mut();
        net.unflushed |= net.flush_needed;
        on_transport!(net, f.transport, t => t.release(&f.token));
    }

    #[inline(never)]
    fn deliver(self: &Rc<Self>, frag: RxFragment, out: &mut Extracted) -> Result<(), ExtractError> {
        let src = frag.header.src;
        // Counted for the close barrier once accepted: a fragment that fails
        // validation was never a message anyone sent.
        let flags = frag.header.flags & (FragFlags::LAST.0 | FragFlags::SYSTEM.0);
        let user_last = flags == FragFlags::LAST.0;
        let accepted = {
            let mut streams = self.streams.borrow_mut();
            streams[src as usize].accept(frag, &self.piecewise, &mut |f| self.release(f))
        };
        let accepted = match accepted {
            Ok(a) => {
                self.received
                    .set(self.received.get() + u64::from(user_last));
                a
            }
            Err(e) => {
                // A broken-off message may have ended, aborted: let its
                // handler see the end, and run whatever waits behind it.
                if let Err(e2) = self.finish_cut(src) {
                    self.defer(e2);
                }
                return Err(e.into());
            }
        };
        match accepted {
            Accepted::Piece(frag, info) => {
                if info.offset == 0 {
                    out.messages += 1;
                }
                if self.run_piece(src, &frag, info)? {
                    self.run_current(src)?;
                }
                Ok(())
            }
            Accepted::Nothing => Ok(()),
            Accepted::Start => {
                out.messages += 1;
                self.run_current(src)
            }
            Accepted::Resume => self.resume_handler(src),
            Accepted::Control(op, payload) => {
                let busy = self.hooks.pending.get() || self.hooks.running();
                let sends = self.control.borrow_mut().on_message(
                    Rank(src),
                    op,
                    &payload,
                    self.close_counts(),
                    busy,
                )?;
                for (dest, op, payload) in sends {
                    self.send_control(dest, op, &payload);
                }
                Ok(())
            }
        }
    }

    /// Run a plain-function handler on one piece and release it. Returns
    /// whether a queued message of the same source became current.
    #[inline]
    fn run_piece(
        self: &Rc<Self>,
        src: u32,
        frag: &RxFragment,
        info: PieceInfo,
    ) -> Result<bool, ExtractError> {
        let result = self.call_piece(frag, info.offset, info.total, info.aborted);
        let more = info.tracked
            && self.streams.borrow_mut()[src as usize].piece_done(
                frag.header.len,
                info.last,
                result.is_err(),
                &mut |f| self.release(f),
            );
        match result {
            Ok(()) => Ok(more),
            Err(source) => self.handler_failed(src, info.handler, source, more),
        }
    }

    /// `src` will send nothing more (it failed): the message it was
    /// sending ends as aborted, and its handler is told.
    fn abort_stream(self: &Rc<Self>, src: u32) -> Result<(), ExtractError> {
        match self.streams.borrow_mut().get_mut(src as usize) {
            Some(s) => s.cut_open(),
            None => return Ok(()),
        }
        self.finish_cut(src)
    }

    /// After `src`'s open message was cut off: tell its handler (an empty
    /// aborted piece, or a resume whose read reports the abort), then run
    /// whatever is current.
    fn finish_cut(self: &Rc<Self>, src: u32) -> Result<(), ExtractError> {
        let need = self.streams.borrow()[src as usize].cut_need();
        match need {
            Cut::Piece(info) => {
                let piece = Piece {
                    source: Rank(src),
                    offset: info.offset,
                    total: info.total,
                    handler: info.handler,
                    data: &[],
                    aborted: true,
                };
                let result =
                    self.registry
                        .borrow_mut()
                        .call_fn(info.handler, Ctx::from_core(self), &piece);
                let more =
                    self.streams.borrow_mut()[src as usize]
                        .piece_done(0, true, false, &mut |f| self.release(f));
                if let Err(source) = result {
                    self.handler_failed(src, info.handler, source, more)?;
                }
                if more {
                    self.run_current(src)?;
                }
                Ok(())
            }
            Cut::Resume => self.resume_handler(src),
            Cut::Nothing => self.run_current(src),
        }
    }

    /// Run whatever is current on `src`'s stream, and the messages queued
    /// behind it, until one suspends or the stream is idle.
    fn run_current(self: &Rc<Self>, src: u32) -> Result<(), ExtractError> {
        loop {
            let current = self
                .streams
                .borrow()
                .get(src as usize)
                .map(SourceStream::current_info);
            match current {
                None | Some(Current::None) => return Ok(()),
                Some(Current::Piecewise) => {
                    let next = self.streams.borrow_mut()[src as usize].next_queued_piece();
                    let Some((frag, info)) = next else {
                        return Ok(());
                    };
                    self.run_piece(src, &frag, info)?;
                }
                Some(Current::Async { started: true, .. }) => return Ok(()),
                Some(Current::Async {
                    handler,
                    seq,
                    total,
                    ..
                }) => {
                    let msg = Message::new(Rc::clone(self), Rank(src), seq, total, handler);
                    let ctx = Ctx::new(Rc::clone(self));
                    let run = self.registry.borrow_mut().entry(handler).start(ctx, msg);
                    if !self.after_run(src, handler, run)? {
                        return Ok(());
                    }
                }
            }
        }
    }

    fn resume_handler(self: &Rc<Self>, src: u32) -> Result<(), ExtractError> {
        let (handler, slot) = {
            let mut streams = self.streams.borrow_mut();
            match streams[src as usize].current() {
                Some(m) => match m.suspended {
                    Some(s) => (m.handler, s),
                    None => return Ok(()),
                },
                None => return Ok(()),
            }
        };
        let run = self.registry.borrow_mut().entry(handler).resume(slot);
        if self.after_run(src, handler, run)? {
            self.run_current(src)?;
        }
        Ok(())
    }

    /// Record an async handler's outcome. Returns whether a queued message
    /// of the same source became current (and must be run).
    fn after_run(&self, src: u32, handler: u32, run: Run) -> Result<bool, ExtractError> {
        let mut streams = self.streams.borrow_mut();
        let st = &mut streams[src as usize];
        match run {
            Run::Suspended(slot) => {
                if let Some(m) = st.current() {
                    m.suspended = Some(slot);
                }
                Ok(false)
            }
            Run::Done(result) => {
                let next = st.finish_current(&mut |f| self.release(f));
                drop(streams);
                match result {
                    Ok(()) => Ok(next),
                    Err(source) => self.handler_failed(src, handler, source, next),
                }
            }
        }
    }

    /// A handler returned an error. If another message of the source is
    /// now current it must still run: the error is then reported by the
    /// next `extract`.
    #[cold]
    fn handler_failed(
        &self,
        src: u32,
        handler: u32,
        source: BoxError,
        next: bool,
    ) -> Result<bool, ExtractError> {
        let e = ExtractError::Handler {
            src: Rank(src),
            handler: self.registry.borrow().name(handler).to_owned(),
            source,
        };
        if next {
            self.defer(e);
            Ok(true)
        } else {
            Err(e)
        }
    }

    /// This rank's message counts for the close barrier.
    pub(crate) fn close_counts(&self) -> CloseCounts {
        CloseCounts {
            sent: self.net.borrow().sent_count(),
            received: self.received.get(),
        }
    }

    /// Send a small control message (never blocks; parks without credit).
    pub(crate) fn send_control(&self, dest: Rank, op: u32, payload: &[u8]) {
        let stream = super::net::OutStream::new(self.rank, dest, op, payload.len() as u64, true);
        self.net.borrow_mut().send_or_park(stream, &[payload]);
    }

    /// Read what the watchdog found (the alarm was raised): record every
    /// peer that failed, left or closed since, and defer the reports (one
    /// error per failure, for `extract`).
    #[cold]
    #[inline(never)]
    pub(crate) fn absorb_alarm(self: &Rc<Self>) {
        self.watchdog.alarm().clear();
        if let Some(a) = &self.abort {
            if !self.abort_reported.get() && a.load(crate::sync::Ordering::Relaxed) {
                self.abort_reported.set(true);
                self.defer(ExtractError::Aborted);
            }
        }
        let local: Vec<(Rank, Failure)> = self
            .net
            .borrow()
            .shm
            .peer_lives()
            .filter_map(|(rank, life, pid)| match life {
                Life::Closed => Some((rank, Failure::Closed)),
                Life::Left => Some((rank, Failure::Left)),
                Life::Dead => Some((rank, Failure::Died { pid })),
                Life::Alive | Life::Unarmed => None,
            })
            .collect();
        for (rank, how) in local {
            self.peer_failed(rank, how);
        }
        // Network transports report their failures (one per call).
        for _ in 0..=self.size {
            let r = self.net.borrow_mut().check_wide();
            match r {
                Ok(()) => break,
                Err(e) => self.note_error(e),
            }
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
    pub(crate) fn peer_failed(self: &Rc<Self>, rank: Rank, how: Failure) {
        if rank == self.rank || !self.health.record(rank, how.clone()) {
            return;
        }
        {
            let mut net = self.net.borrow_mut();
            net.shm.mark_gone(rank);
            net.drop_pending_to(rank);
        }
        if let Some(e) = how.error(rank) {
            self.defer(e);
            if let Err(e) = self.abort_stream(rank.0) {
                self.defer(e);
            }
        }
    }

    /// The failure a blocking wait in `scope` must stop with, after the
    /// abort flag and whatever the watchdog found. Cheap when nothing
    /// happened: called at every idle round of a wait.
    pub(crate) fn check_failures(self: &Rc<Self>, scope: Scope) -> Result<(), ExtractError> {
        if let Some(a) = &self.abort {
            if a.load(crate::sync::Ordering::Relaxed) {
                return Err(ExtractError::Aborted);
            }
        }
        if self.watchdog.alarm().raised() {
            self.absorb_alarm();
        }
        match self.health.stop_for(scope) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The transports' own periodic checks (corrupt queues and rings, the
    /// network's credit backstop and link states), for an idle waiter.
    /// Peer failures found are recorded; other errors returned.
    pub(crate) fn check_transports(self: &Rc<Self>) -> Result<(), ExtractError> {
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

    /// One-sided put of `data` at `offset` of window `win` on `dest`.
    pub(crate) fn put(
        &self,
        win: WindowId,
        dest: Rank,
        offset: usize,
        data: &[u8],
    ) -> Result<(), PutError> {
        window::check_dest(dest, self.size)?;
        let at = self.windows.locate(win, offset, data.len())?;
        if self.health.is_gone(dest) {
            return Err(PutError::PeerGone { rank: dest });
        }
        self.net.borrow_mut().put(dest, at, data)
    }

    /// One-sided atomic store of an 8-byte word.
    pub(crate) fn put_u64(
        &self,
        win: WindowId,
        dest: Rank,
        offset: usize,
        value: u64,
    ) -> Result<(), PutError> {
        window::check_dest(dest, self.size)?;
        let at = self.windows.locate_word(win, offset)?;
        if self.health.is_gone(dest) {
            return Err(PutError::PeerGone { rank: dest });
        }
        self.net.borrow_mut().put_u64(dest, at, value)
    }

    /// Acquire-load a word of this rank's own window.
    pub(crate) fn read_u64(&self, win: WindowId, offset: usize) -> Result<u64, PutError> {
        let at = self.windows.locate_word(win, offset)?;
        Ok(self.my_window.load_u64(at))
    }

    /// Copy bytes out of this rank's own window.
    pub(crate) fn read_window(
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
    pub(crate) fn teardown(&self) {
        // Take the registry out first: dropping futures drops `Message`s,
        // which touch `streams`.
        let registry = std::mem::take(&mut *self.registry.borrow_mut());
        drop(registry);
        for s in self.streams.borrow_mut().iter_mut() {
            s.clear();
        }
    }
}
