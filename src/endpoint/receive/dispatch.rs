//! The engine's half of receiving: performing what the receive state
//! machine (`crate::endpoint::engine::stream`) asks for.
//!
//! `Core::batch` (in `crate::endpoint::engine::core`) takes fragments from the transports
//! and asks [`Streams::fast`](crate::endpoint::engine::stream::Streams::fast) whether one
//! can skip the stream; otherwise [`Core::deliver`] feeds it to its
//! source's stream. Either way the result is an
//! [`Action`], which [`Core::perform`] carries out — call a plain-function
//! handler on a piece, start or resume an async handler, release a
//! fragment, hand a control message to `crate::endpoint::engine::control` — and reports back
//! to the stream, whose answer is the next action, until the stream
//! waits. One loop, no callbacks: the stream never calls the engine, and
//! the engine touches stream state only through its transitions.
//!
//! An async handler's [`Message`] reads through [`Core::read_message`],
//! which copies from the stream and releases the fragments it used up.

use crate::endpoint::engine::control_op::ControlOp;
use crate::endpoint::engine::core::Core;
use crate::endpoint::engine::core::{Ctx, Message};
use crate::endpoint::engine::handler::piece::Piece;
use crate::endpoint::engine::handler::pool::Run;
use crate::endpoint::engine::handler::HandlerResult;
use crate::endpoint::engine::stream::{
    fast_handler, Action, PieceInfo, Read, Rejected, SourceStream, Start,
};
use crate::error::{BoxError, ExtractError};
use crate::frame::FragFlags;
use crate::id::{HandlerId, Rank};
use crate::transport::RxFragment;
use std::cell::RefMut;
use std::rc::Rc;

impl Core {
    /// The stream of `src`, a validated source (the transports checked the
    /// header against the job's size).
    fn stream(&self, src: Rank) -> RefMut<'_, SourceStream> {
        RefMut::map(self.streams().borrow_mut(), |s| {
            s.get_mut(src).expect("the transport validated the source")
        })
    }

    /// Give a fragment back to the transport it came from: shared memory
    /// inline (a credit store, and a slot and frame on shared queues), a
    /// network transport out of line, so that the shm case inlines into the
    /// fast path with few registers.
    #[inline(always)]
    pub(in crate::endpoint) fn release(&self, f: &RxFragment) {
        self.net().borrow_mut().release(f);
    }

    /// A fragment the fast path did not take: feed it to its stream and
    /// perform what that asks for. `Ok(true)`: a new message started (the
    /// caller counts it; a count returned, not one written through a
    /// pointer, lets the caller keep its counts in registers).
    #[inline(never)]
    pub(in crate::endpoint) fn deliver(
        self: &Rc<Self>,
        frag: RxFragment,
    ) -> Result<bool, ExtractError> {
        let src = Rank(frag.header.src);
        // Counted for the close barrier once accepted: a fragment that fails
        // validation was never a message anyone sent.
        let flags = frag.header.flags & (FragFlags::LAST.0 | FragFlags::SYSTEM.0);
        let user_last = flags == FragFlags::LAST.0;
        let accepted = self.streams().borrow_mut().accept(frag);
        match accepted {
            Ok(action) => {
                self.counting().received_n(u64::from(user_last));
                let started = match &action {
                    Action::Start(_) => true,
                    Action::Piece(_, info) => info.offset == 0,
                    _ => false,
                };
                self.perform(src, action).map(|()| started)
            }
            Err(Rejected { frag, error }) => {
                self.release(&frag);
                // A broken-off message may have ended, aborted: let its
                // handler see the end, and run whatever waits behind it.
                let next = self.stream(src).next();
                if let Err(e) = self.perform(src, next) {
                    self.defer(e);
                }
                Err(error.into())
            }
        }
    }

    /// Perform `action` for `src`'s stream, then what each outcome leads
    /// to, until the stream waits. A handler's error is returned if nothing
    /// else of the stream is left to run, else kept for the next `extract`.
    pub(in crate::endpoint) fn perform(
        self: &Rc<Self>,
        src: Rank,
        action: Action,
    ) -> Result<(), ExtractError> {
        let mut action = action;
        loop {
            action = match action {
                Action::Wait => return Ok(()),
                Action::Release(frag) => {
                    self.release(&frag);
                    return Ok(());
                }
                Action::Control { frag, op, payload } => {
                    self.release(&frag);
                    return self.on_control(src, op, &payload);
                }
                Action::Piece(frag, info) => {
                    let result =
                        self.call_piece(&frag, info.handler, info.offset, info.total, info.aborted);
                    let ended =
                        self.stream(src)
                            .piece_done(frag.header.len, info.last, result.is_err());
                    let next = if ended {
                        self.finish_current(src)
                    } else {
                        Action::Wait
                    };
                    self.outcome(src, info.handler, result, next)?
                }
                Action::AbortedEnd(info) => {
                    let result = self.call_aborted_end(src, info);
                    let ended = self.stream(src).piece_done(0, true, false);
                    debug_assert!(ended, "a last piece ends its message");
                    let next = self.finish_current(src);
                    self.outcome(src, info.handler, result, next)?
                }
                Action::Start(start) => {
                    let run = self.start_handler(src, start);
                    self.ran(src, start.handler, run)?
                }
                Action::Resume { handler, slot } => {
                    let run = self.registry().borrow_mut().entry(handler).resume(slot);
                    self.ran(src, handler, run)?
                }
            }
        }
    }

    /// The plain-function handler of a whole message from an idle source
    /// (the fast path): nothing to record before or after.
    #[inline(always)]
    pub(in crate::endpoint) fn run_fast_piece(
        self: &Rc<Self>,
        frag: &RxFragment,
    ) -> Result<(), ExtractError> {
        let h = &frag.header;
        let handler = fast_handler(h);
        match self.call_piece(frag, handler, 0, h.total, false) {
            Ok(()) => Ok(()),
            Err(source) => Err(self.handler_error(Rank(h.src), handler, source)),
        }
    }

    /// A whole message for an async handler from an idle source (the fast
    /// path): entered without the general checks, its handler started at
    /// once.
    #[inline(never)]
    pub(in crate::endpoint) fn run_fast_async(
        self: &Rc<Self>,
        frag: RxFragment,
    ) -> Result<(), ExtractError> {
        let src = Rank(frag.header.src);
        let handler = fast_handler(&frag.header);
        let start = self.streams().borrow_mut().enter_whole(frag, handler);
        let run = self.start_handler(src, start);
        match self.ran(src, start.handler, run)? {
            Action::Wait => Ok(()),
            next => self.perform(src, next),
        }
    }

    /// Call plain-function handler `handler` (its message's, as the stream
    /// checked it at the first fragment: a later fragment's own handler
    /// field is not trusted) on `frag` (a piece at `offset` of a message of
    /// `total` bytes, its aborted end if `aborted`), then release it.
    #[inline(always)]
    fn call_piece(
        self: &Rc<Self>,
        frag: &RxFragment,
        handler: HandlerId,
        offset: u64,
        total: u64,
        aborted: bool,
    ) -> HandlerResult {
        let h = &frag.header;
        let piece = Piece {
            source: Rank(h.src),
            offset,
            total,
            handler,
            data: frag.bytes(),
            aborted,
        };
        #[cfg(feature = "stats")]
        let t = self.net().borrow().tally().call_start();
        let result =
            self.registry()
                .borrow_mut()
                .call_fn(piece.handler, Ctx::from_core(self), &piece);
        #[cfg(feature = "stats")]
        self.net().borrow().tally().call_end(t);
        self.release(frag);
        result
    }

    /// Call a plain-function handler on the empty, aborted last piece of
    /// its cut-off message.
    #[cold]
    fn call_aborted_end(self: &Rc<Self>, src: Rank, info: PieceInfo) -> HandlerResult {
        let piece = Piece {
            source: src,
            offset: info.offset,
            total: info.total,
            handler: info.handler,
            data: &[],
            aborted: true,
        };
        self.registry()
            .borrow_mut()
            .call_fn(info.handler, Ctx::from_core(self), &piece)
    }

    /// Create the future of an async handler for its message and poll it
    /// once.
    #[inline(always)]
    fn start_handler(self: &Rc<Self>, src: Rank, s: Start) -> Run {
        let mut registry = self.registry().borrow_mut();
        let entry = registry.entry(s.handler);
        // The message is built in the call itself: built before the
        // borrow, it was written field by field and then copied to the
        // argument with wider loads, which the store buffer cannot forward
        // (docs/engine.md, "Store forwarding").
        entry.start(
            Ctx::new(Rc::clone(self)),
            Message::new(Rc::clone(self), src, s.seq, s.total, s.handler),
        )
    }

    /// Report an async handler's run to its stream: it suspended, or it
    /// returned (then its message leaves the stream). Returns what follows.
    #[inline(always)]
    fn ran(&self, src: Rank, handler: HandlerId, run: Run) -> Result<Action, ExtractError> {
        match run {
            Run::Suspended(slot) => {
                self.stream(src).suspend(slot);
                Ok(Action::Wait)
            }
            Run::Done(result) => {
                let next = self.finish_current(src);
                self.outcome(src, handler, result, next)
            }
        }
    }

    /// The current message of `src` is done with: release its unread
    /// fragments; returns what the stream needs next.
    #[inline(always)]
    fn finish_current(&self, src: Rank) -> Action {
        let mut stream = self.stream(src);
        for f in stream.finish_current() {
            self.release(&f);
        }
        stream.next()
    }

    /// A handler's result, and what follows it: an error is returned when
    /// nothing follows, else kept for the next `extract` (what follows
    /// must still run).
    #[inline(always)]
    fn outcome(
        &self,
        src: Rank,
        handler: HandlerId,
        result: HandlerResult,
        next: Action,
    ) -> Result<Action, ExtractError> {
        let Err(source) = result else {
            return Ok(next);
        };
        let e = self.handler_error(src, handler, source);
        if let Action::Wait = next {
            Err(e)
        } else {
            self.defer(e);
            Ok(next)
        }
    }

    #[cold]
    fn handler_error(&self, src: Rank, handler: HandlerId, source: BoxError) -> ExtractError {
        ExtractError::Handler {
            src,
            handler: self.registry().borrow().name(handler).to_owned(),
            source,
        }
    }

    /// A complete control message from `src`: hand it to the control state
    /// and send what that answers.
    fn on_control(&self, src: Rank, op: ControlOp, payload: &[u8]) -> Result<(), ExtractError> {
        let busy = self.hooks().has_work() || self.hooks().running();
        let sends =
            self.control()
                .borrow_mut()
                .on_message(src, op, payload, self.close_counts(), busy)?;
        for (dest, op, payload) in sends {
            self.send_control(dest, op, &payload);
        }
        Ok(())
    }

    /// `src` will send nothing more (it failed): the message it was
    /// sending ends as aborted, and its handler is told.
    pub(in crate::endpoint) fn abort_stream(
        self: &Rc<Self>,
        src: Rank,
    ) -> Result<(), ExtractError> {
        let next = match self.streams().borrow_mut().get_mut(src) {
            Some(s) => {
                s.cut_open();
                s.next()
            }
            None => return Ok(()),
        };
        self.perform(src, next)
    }

    /// Copy bytes of message `seq` from `src` (an async handler's
    /// [`Message`]) into `buf`, releasing the fragments used up. `None` if
    /// that message is not current any more.
    pub(in crate::endpoint) fn read_message(
        &self,
        src: Rank,
        seq: u64,
        buf: &mut [u8],
    ) -> Option<Read> {
        let mut streams = self.streams().borrow_mut();
        let (read, used) = streams.get_mut(src)?.read(seq, buf)?;
        for f in used {
            self.release(&f);
        }
        Some(read)
    }

    /// Bytes of message `seq` from `src` that have arrived and are unread.
    pub(in crate::endpoint) fn available(&self, src: Rank, seq: u64) -> Option<u64> {
        self.streams().borrow().get(src)?.available(seq)
    }
}
