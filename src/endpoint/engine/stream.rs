//! The receive state machine: per source, which message its fragments
//! belong to, which handler is current, and what the engine must do next.
//!
//! Every transition is a method of [`SourceStream`] that returns an
//! [`Action`] (or a [`Rejected`] fragment with a typed error); the engine
//! (`crate::endpoint::receive::dispatch`) performs it — calls or resumes a handler, gives
//! fragments back to their transport, hands a control message on — and
//! reports the outcome with the next transition. Nothing here calls back
//! into the engine or a transport.
//!
//! # States
//!
//! A stream is in one of these states, read from two small fields: the
//! handling of its current message ([`Handling`]) and what its next
//! fragment continues ([`Inbound`]):
//!
//! | state | meaning | what the next fragment does |
//! |---|---|---|
//! | **idle** | no message current, none open | a whole message for a known handler takes the fast path ([`Streams::fast`]); any first fragment starts a message |
//! | **piecewise** | a plain-function handler's message is current | each fragment is handed out as a piece ([`Action::Piece`]) and released when the handler returns |
//! | **async** | an async handler's message is current (not started yet, or suspended) | stored in the stream; resumes the handler ([`Action::Resume`]) if it is this message's; messages after it queue behind |
//! | **control** | a control message is being reassembled | its bytes are copied and the fragment released; the last one yields [`Action::Control`] |
//! | **discarding** | the rest of a message is dropped (its handler returned early, or the message was invalid) | released ([`Action::Release`]) until the message's last fragment |
//!
//! A control message or a discard can be under way while an async message
//! is current (suspended, its own fragments all in): those two columns
//! combine.
//!
//! # Invariants
//! - `frags` holds, front to back, the unread fragments of the current
//!   message, then those of messages queued behind it (only possible while
//!   the current handler is suspended after its message completed);
//! - fragments leave `frags` only from the front, so they are released in
//!   arrival order (the transport contract relies on it);
//! - at most one message per source is open (expecting fragments): the
//!   last one; senders never interleave messages to one destination.
//!
//! # What a stream keeps, and what bounds it
//! The fragments in `frags` — the unread part of an async handler's
//! message, and the messages queued behind a suspended handler — are
//! not copies: each is a frame or ring slot of its transport, not yet
//! released. A sender needs a credit per fragment and gets it back only
//! when the fragment is released, so one source can have at most its
//! credits' worth here, however long a handler leaves its bytes: on
//! shared memory `FASTMSG_CREDITS` fragments of at most
//! `FASTMSG_FRAME_SIZE` bytes (32 × 8 KiB by default), on a network ring
//! its `FASTMSG_NET_SLOTS` slots. What does not fit waits at the sender
//! (parked, see `crate::endpoint::send::backpressure`). The only bytes a stream copies
//! are a control message's, bounded per operation (`ControlOp::max_len`).
//!
//! Bad input from a peer (a continuation without a first fragment, a first
//! fragment inside an open message, an unknown handler, lengths that do
//! not add up, a control message announcing more than its operation ever
//! carries — refused at its first fragment, before anything is buffered) is a [`ProtocolError`] naming the source; the fragment is
//! handed back for release, and a message cut short by it ends, aborted,
//! so its handler never waits for ever.

use crate::endpoint::engine::control_op::ControlOp;
use crate::endpoint::engine::handler::pool::Slot;
use crate::error::ProtocolError;
use crate::frame::{FragFlags, FragHeader};
use crate::id::{HandlerId, Rank};
use crate::transport::RxFragment;
use std::collections::VecDeque;

/// Which fast path a fragment can take (see [`Streams::fast`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::endpoint) enum Fast {
    /// The general path ([`Streams::accept`]).
    No,
    /// A whole message for a plain-function handler ([`fast_handler`]):
    /// call it on the fragment, nothing to record.
    Piece,
    /// A whole message for an async handler ([`fast_handler`]):
    /// [`Streams::enter_whole`].
    Async,
}

/// The handler of a fragment that [`Streams::fast`] judged [`Fast::Piece`]
/// or [`Fast::Async`]: its id was checked there (by [`registered`]). Read
/// again from the header rather than carried, which the fast path pays for
/// in instructions.
#[inline(always)]
pub(in crate::endpoint) fn fast_handler(h: &FragHeader) -> HandlerId {
    HandlerId(h.handler)
}

/// The one place a fragment's handler field becomes a [`HandlerId`]:
/// checked against the registered handlers (`piecewise` has one entry per
/// id), with whether the handler is a plain function.
#[inline(always)]
fn registered(piecewise: &[bool], raw: u32) -> Option<(HandlerId, bool)> {
    piecewise
        .get(raw as usize)
        .map(|&is_fn| (HandlerId(raw), is_fn))
}

/// Every source's stream, and the handler kinds they need.
#[derive(Debug)]
pub(in crate::endpoint) struct Streams {
    /// Per handler id: whether it is a plain function (pieces) rather
    /// than async.
    piecewise: Vec<bool>,
    by_src: Vec<SourceStream>,
}

impl Streams {
    /// Streams for `size` sources; `piecewise[id]` tells each registered
    /// handler's kind.
    pub(in crate::endpoint) fn new(size: u32, piecewise: Vec<bool>) -> Self {
        Streams {
            piecewise,
            by_src: (0..size)
                .map(|r| SourceStream::new(Rank(r), size))
                .collect(),
        }
    }

    /// The fast-path decision, made here and nowhere else: a whole
    /// one-fragment user message for a registered handler, from a source
    /// whose stream is idle, skips the stream's bookkeeping. `h` is
    /// validated (its source is in range).
    #[inline(always)]
    pub(in crate::endpoint) fn fast(&self, h: &FragHeader) -> Fast {
        const WHOLE: u32 = FragFlags::FIRST.0 | FragFlags::LAST.0;
        if h.flags != WHOLE || u64::from(h.len) != h.total {
            return Fast::No;
        }
        let kind = match registered(&self.piecewise, h.handler) {
            Some((_, true)) => Fast::Piece,
            Some((_, false)) => Fast::Async,
            None => return Fast::No,
        };
        if self.by_src[h.src as usize].is_idle() {
            kind
        } else {
            Fast::No
        }
    }

    /// The general path: feed a fragment to its source's stream.
    ///
    /// # Errors
    /// [`Rejected`]: the fragment broke the protocol; release it, report
    /// the error, then perform [`SourceStream::next`] (a message it cut
    /// short has ended).
    #[inline]
    pub(in crate::endpoint) fn accept(&mut self, frag: RxFragment) -> Result<Action, Rejected> {
        let src = frag.header.src as usize;
        self.by_src[src].accept(frag, &self.piecewise)
    }

    /// Enter a whole message that [`fast`](Self::fast) judged
    /// [`Fast::Async`] (for `handler`); returns how to start it.
    #[inline]
    pub(in crate::endpoint) fn enter_whole(
        &mut self,
        frag: RxFragment,
        handler: HandlerId,
    ) -> Start {
        let src = frag.header.src as usize;
        self.by_src[src].enter_whole(frag, handler)
    }

    /// The stream of `src` (`None` outside the job).
    #[inline]
    pub(in crate::endpoint) fn get_mut(&mut self, src: Rank) -> Option<&mut SourceStream> {
        self.by_src.get_mut(src.index())
    }

    /// The stream of `src` (`None` outside the job).
    #[inline]
    pub(in crate::endpoint) fn get(&self, src: Rank) -> Option<&SourceStream> {
        self.by_src.get(src.index())
    }

    /// Forget everything without releasing (endpoint teardown).
    pub(in crate::endpoint) fn clear(&mut self) {
        for s in &mut self.by_src {
            s.frags.clear();
            s.msgs.clear();
        }
    }
}

/// How to start an async handler on its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::endpoint) struct Start {
    pub(in crate::endpoint) handler: HandlerId,
    /// The message's number in its stream (what its `Message` reads by).
    pub(in crate::endpoint) seq: u64,
    pub(in crate::endpoint) total: u64,
}

/// Where a piece sits in its message, for a plain-function handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::endpoint) struct PieceInfo {
    pub(in crate::endpoint) handler: HandlerId,
    pub(in crate::endpoint) offset: u64,
    pub(in crate::endpoint) total: u64,
    pub(in crate::endpoint) last: bool,
    /// The message was aborted and this is its last piece.
    pub(in crate::endpoint) aborted: bool,
}

/// What the engine must do after a transition.
#[derive(Debug)]
pub(in crate::endpoint) enum Action {
    /// Nothing now (a fragment stored behind a running handler, or
    /// nothing current).
    Wait,
    /// Give this fragment back to its transport; nothing else.
    Release(RxFragment),
    /// Call the current plain-function handler on this fragment, release
    /// it, then report [`SourceStream::piece_done`].
    Piece(RxFragment, PieceInfo),
    /// Call the current plain-function handler on an empty, aborted last
    /// piece (its message was cut off after every fragment had been handed
    /// out), then report [`SourceStream::piece_done`] with length 0.
    AbortedEnd(PieceInfo),
    /// Start the async handler of the current message, then report
    /// [`SourceStream::suspend`] or [`SourceStream::finish_current`].
    Start(Start),
    /// Poll the current message's suspended handler again (new bytes, or
    /// its message ended), then report as for `Start`.
    Resume { handler: HandlerId, slot: Slot },
    /// A control message is complete: release `frag`, then perform `op`.
    Control {
        frag: RxFragment,
        op: ControlOp,
        payload: Vec<u8>,
    },
}

/// A fragment that broke the protocol, to be released, and why.
#[derive(Debug)]
pub(in crate::endpoint) struct Rejected {
    pub(in crate::endpoint) frag: RxFragment,
    pub(in crate::endpoint) error: ProtocolError,
}

/// What the current message's handler is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handling {
    /// A plain function, called once per piece.
    Piecewise,
    /// An async handler: not started yet (`None`), or suspended in a pool
    /// slot.
    Async { suspended: Option<Slot> },
}

/// What the next fragment from the source continues.
#[derive(Debug)]
enum Inbound {
    /// Nothing is open: the next fragment must start a message.
    Between,
    /// The last message in `msgs` is open.
    User,
    /// A control message is being reassembled.
    Control {
        op: ControlOp,
        total: u64,
        buf: Vec<u8>,
    },
    /// The rest of a message is dropped, up to its last fragment.
    Discarding,
}

/// A message with fragments in the stream.
#[derive(Debug)]
struct MsgState {
    handler: HandlerId,
    seq: u64,
    total: u64,
    arrived: u64,
    read: u64,
    /// Fragments of this message still in `frags`.
    frags: usize,
    complete: bool,
    /// It ended without all its bytes: the sender aborted it (or died,
    /// or broke the protocol). Set together with `complete`.
    aborted: bool,
    handling: Handling,
}

impl MsgState {
    fn piece(&self, last: bool, aborted: bool) -> PieceInfo {
        PieceInfo {
            handler: self.handler,
            offset: self.read,
            total: self.total,
            last,
            aborted,
        }
    }
}

/// One source's stream.
#[derive(Debug)]
pub(in crate::endpoint) struct SourceStream {
    src: Rank,
    /// Ranks in the job (bounds a control message's length).
    world: u32,
    frags: VecDeque<RxFragment>,
    /// Bytes of `frags.front()` already read by an async handler.
    front_read: usize,
    msgs: VecDeque<MsgState>,
    inbound: Inbound,
    next_seq: u64,
}

/// Result of a read by a handler.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::endpoint) struct Read {
    /// Bytes copied.
    pub(in crate::endpoint) n: usize,
    /// Whether the message has been read to its end.
    pub(in crate::endpoint) finished: bool,
    /// Whether that end is an abort (fewer bytes than declared, or the
    /// sender aborted).
    pub(in crate::endpoint) aborted: bool,
}

impl SourceStream {
    fn new(src: Rank, world: u32) -> Self {
        SourceStream {
            src,
            world,
            frags: VecDeque::new(),
            front_read: 0,
            msgs: VecDeque::new(),
            inbound: Inbound::Between,
            next_seq: 1,
        }
    }

    /// Idle: no message current or queued, none open, nothing dropped.
    #[inline(always)]
    fn is_idle(&self) -> bool {
        self.msgs.is_empty() && matches!(self.inbound, Inbound::Between)
    }

    fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Enter a whole one-fragment message for an async handler into an idle
    /// stream (see [`Streams::enter_whole`]).
    #[inline]
    fn enter_whole(&mut self, frag: RxFragment, handler: HandlerId) -> Start {
        debug_assert!(self.is_idle());
        let seq = self.take_seq();
        let len = u64::from(frag.header.len);
        self.msgs.push_back(MsgState {
            handler,
            seq,
            total: len,
            arrived: len,
            read: 0,
            frags: 1,
            complete: true,
            aborted: false,
            handling: Handling::Async { suspended: None },
        });
        self.frags.push_back(frag);
        Start {
            handler,
            seq,
            total: len,
        }
    }

    /// An arrived fragment (any kind; the fast path is decided by
    /// [`Streams::fast`] before this). `piecewise[id]` tells the kind of
    /// each registered handler.
    fn accept(&mut self, frag: RxFragment, piecewise: &[bool]) -> Result<Action, Rejected> {
        let h = frag.header;
        let flags = h.flags();
        let first = flags.contains(FragFlags::FIRST);
        let last = flags.contains(FragFlags::LAST);
        // An abort ends a message short: the sender gave up on it (or
        // overflowed it); only meaningful on a last fragment.
        let abort = last && flags.contains(FragFlags::ABORT);
        let len = u64::from(h.len);
        let src = self.src.0;
        // Every transition leaves `inbound` as set here or by the step
        // taken: between messages unless told otherwise.
        match std::mem::replace(&mut self.inbound, Inbound::Between) {
            Inbound::Discarding if first => rejected(frag, ProtocolError::UnexpectedFirst { src }),
            Inbound::Discarding => {
                if !last {
                    self.inbound = Inbound::Discarding;
                }
                Ok(Action::Release(frag))
            }
            Inbound::Between if first && flags.contains(FragFlags::SYSTEM) => {
                self.first_control(frag, last)
            }
            Inbound::Between if first => self.first_user(frag, piecewise, last, abort),
            Inbound::Between => rejected(frag, ProtocolError::MissingFirst { src }),
            open if first => {
                // The sender broke off the open message: it ends aborted
                // (the engine then tells its handler, through `next`).
                self.inbound = open;
                self.cut_open();
                rejected(frag, ProtocolError::UnexpectedFirst { src })
            }
            Inbound::Control { op, total, mut buf } => {
                let got = buf.len() as u64 + len;
                if got > total {
                    self.inbound = end_or_discard(last);
                    return rejected(frag, ProtocolError::LengthMismatch { src, total, got });
                }
                buf.extend_from_slice(frag.bytes());
                if last {
                    return self.control_done(frag, op, total, buf);
                }
                self.inbound = Inbound::Control { op, total, buf };
                Ok(Action::Release(frag))
            }
            Inbound::User => {
                self.inbound = Inbound::User;
                self.continue_user(frag, last, abort)
            }
        }
    }

    /// The first fragment of a control message.
    fn first_control(&mut self, frag: RxFragment, last: bool) -> Result<Action, Rejected> {
        let h = frag.header;
        let Some(op) = ControlOp::from_wire(h.handler) else {
            self.inbound = end_or_discard(last);
            let src = self.src.0;
            let what = "unknown control operation";
            return rejected(frag, ProtocolError::BadControl { src, what });
        };
        // Refused before anything is buffered: a peer (or a corrupt
        // header) announcing gigabytes gets no reservation.
        let max = op.max_len(self.world);
        if h.total > max {
            self.inbound = end_or_discard(last);
            let (src, op, len) = (self.src.0, op.name(), h.total);
            return rejected(frag, ProtocolError::ControlTooLong { src, op, len, max });
        }
        let mut buf = Vec::with_capacity(h.total as usize);
        buf.extend_from_slice(frag.bytes());
        if last {
            return self.control_done(frag, op, h.total, buf);
        }
        self.inbound = Inbound::Control {
            op,
            total: h.total,
            buf,
        };
        Ok(Action::Release(frag))
    }

    /// The first fragment of a user message.
    fn first_user(
        &mut self,
        frag: RxFragment,
        piecewise: &[bool],
        last: bool,
        abort: bool,
    ) -> Result<Action, Rejected> {
        let h = frag.header;
        let src = self.src.0;
        let len = u64::from(h.len);
        let Some((handler, is_fn)) = registered(piecewise, h.handler) else {
            self.inbound = end_or_discard(last);
            let registered = piecewise.len() as u32;
            let id = h.handler;
            return rejected(
                frag,
                ProtocolError::UnknownHandler {
                    src,
                    id,
                    registered,
                },
            );
        };
        if last && (len > h.total || (len != h.total && !abort)) {
            let (total, got) = (h.total, len);
            return rejected(frag, ProtocolError::LengthMismatch { src, total, got });
        }
        let seq = self.take_seq();
        let now = self.msgs.is_empty();
        let mut m = MsgState {
            handler,
            seq,
            total: h.total,
            arrived: len,
            read: 0,
            frags: 0,
            complete: last,
            aborted: abort,
            handling: if is_fn {
                Handling::Piecewise
            } else {
                Handling::Async { suspended: None }
            },
        };
        self.inbound = if last {
            Inbound::Between
        } else {
            Inbound::User
        };
        if now && is_fn {
            let info = m.piece(last, abort);
            self.msgs.push_back(m);
            return Ok(Action::Piece(frag, info));
        }
        m.frags = 1;
        self.msgs.push_back(m);
        self.frags.push_back(frag);
        Ok(if now {
            Action::Start(Start {
                handler,
                seq,
                total: h.total,
            })
        } else {
            Action::Wait
        })
    }

    /// A continuation of the open user message (the last in `msgs`).
    fn continue_user(
        &mut self,
        frag: RxFragment,
        last: bool,
        abort: bool,
    ) -> Result<Action, Rejected> {
        let src = self.src.0;
        let len = u64::from(frag.header.len);
        let only = self.msgs.len() == 1;
        let m = self
            .msgs
            .back_mut()
            .expect("an open user message is in msgs");
        if m.arrived + len > m.total || (last && !abort && m.arrived + len != m.total) {
            let (got, total) = (m.arrived + len, m.total);
            // The message cannot be trusted any more: it ends as aborted
            // (the engine tells its handler).
            m.complete = true;
            m.aborted = true;
            self.inbound = end_or_discard(last);
            return rejected(frag, ProtocolError::LengthMismatch { src, total, got });
        }
        m.arrived += len;
        if last {
            m.complete = true;
            m.aborted = abort;
            self.inbound = Inbound::Between;
        }
        match m.handling {
            Handling::Piecewise if only => {
                let info = m.piece(last, abort);
                Ok(Action::Piece(frag, info))
            }
            handling => {
                m.frags += 1;
                let handler = m.handler;
                self.frags.push_back(frag);
                Ok(match handling {
                    Handling::Async {
                        suspended: Some(slot),
                    } if only => Action::Resume { handler, slot },
                    _ => Action::Wait,
                })
            }
        }
    }

    fn control_done(
        &mut self,
        frag: RxFragment,
        op: ControlOp,
        total: u64,
        payload: Vec<u8>,
    ) -> Result<Action, Rejected> {
        if payload.len() as u64 != total {
            let src = self.src.0;
            let got = payload.len() as u64;
            return rejected(frag, ProtocolError::LengthMismatch { src, total, got });
        }
        Ok(Action::Control { frag, op, payload })
    }

    /// The message open on this stream will get no more fragments (its
    /// sender died, or broke it off): it ends as aborted. A message whose
    /// handler already returned is simply forgotten, as is a half-received
    /// control message. Then perform [`next`](Self::next).
    pub(in crate::endpoint) fn cut_open(&mut self) {
        if let Inbound::User = self.inbound {
            if let Some(m) = self.msgs.back_mut() {
                m.complete = true;
                m.aborted = true;
            }
        }
        self.inbound = Inbound::Between;
    }

    /// What the current message needs now: its next stored piece, the
    /// start of its async handler, an aborted end (a cut-off message's
    /// empty last piece, or a resume whose read reports the abort), or
    /// nothing. Asked after a handler returned (the next message may be
    /// waiting) and after a message was cut off.
    pub(in crate::endpoint) fn next(&mut self) -> Action {
        let Some(m) = self.msgs.front_mut() else {
            return Action::Wait;
        };
        let ended_aborted = m.complete && m.aborted;
        match m.handling {
            Handling::Piecewise if m.frags > 0 => {
                let frag = self
                    .frags
                    .pop_front()
                    .expect("frags counted in msg are present");
                m.frags -= 1;
                let last = m.complete && m.frags == 0;
                Action::Piece(frag, m.piece(last, last && m.aborted))
            }
            Handling::Piecewise if ended_aborted => Action::AbortedEnd(m.piece(true, true)),
            Handling::Async { suspended: None } => Action::Start(Start {
                handler: m.handler,
                seq: m.seq,
                total: m.total,
            }),
            Handling::Async {
                suspended: Some(slot),
            } if ended_aborted => Action::Resume {
                handler: m.handler,
                slot,
            },
            Handling::Piecewise | Handling::Async { .. } => Action::Wait,
        }
    }

    /// The current async handler suspended in pool slot `slot`.
    pub(in crate::endpoint) fn suspend(&mut self, slot: Slot) {
        if let Some(m) = self.msgs.front_mut() {
            m.handling = Handling::Async {
                suspended: Some(slot),
            };
        }
    }

    /// A plain-function handler has consumed a tracked piece of `len`
    /// bytes. On `last`, or on `failed` (the rest is then dropped), the
    /// message ends: release what [`finish_current`](Self::finish_current)
    /// returns, then perform [`next`](Self::next). Returns whether it
    /// ended.
    #[must_use]
    pub(in crate::endpoint) fn piece_done(&mut self, len: u32, last: bool, failed: bool) -> bool {
        if let Some(m) = self.msgs.front_mut() {
            m.read += u64::from(len);
        }
        last || failed
    }

    /// The current message's handler returned: it leaves the stream, its
    /// unread fragments are returned for release (its later ones will be
    /// discarded as they arrive). Perform [`next`](Self::next) afterwards.
    #[inline]
    pub(in crate::endpoint) fn finish_current(&mut self) -> Used<'_> {
        let Some(m) = self.msgs.pop_front() else {
            return Used::new(&mut self.frags, 0);
        };
        self.front_read = 0;
        if !m.complete {
            // Only the last message can be incomplete: it is the open one.
            self.inbound = Inbound::Discarding;
        }
        Used::new(&mut self.frags, m.frags)
    }

    /// Copy bytes of the current message `seq` into `buf`; returns what was
    /// read and the fragments used up (release them). `None` if `seq` is
    /// not current.
    pub(in crate::endpoint) fn read(
        &mut self,
        seq: u64,
        buf: &mut [u8],
    ) -> Option<(Read, Used<'_>)> {
        let m = self.msgs.front_mut().filter(|m| m.seq == seq)?;
        let mut n = 0;
        let mut used = 0;
        while used < m.frags {
            let bytes = self.frags[used].bytes();
            let k = (bytes.len() - self.front_read).min(buf.len() - n);
            buf[n..n + k].copy_from_slice(&bytes[self.front_read..self.front_read + k]);
            n += k;
            self.front_read += k;
            m.read += k as u64;
            if self.front_read < bytes.len() {
                break;
            }
            self.front_read = 0;
            used += 1;
        }
        m.frags -= used;
        let drained = m.complete && m.frags == 0;
        let read = Read {
            n,
            finished: m.read == m.total || drained,
            aborted: m.aborted && drained,
        };
        Some((read, Used::new(&mut self.frags, used)))
    }

    /// Fragments kept in the stream, and their payload bytes.
    #[cfg(test)]
    pub(in crate::endpoint) fn held(&self) -> (usize, u64) {
        let bytes = self.frags.iter().map(|f| u64::from(f.header.len)).sum();
        (self.frags.len(), bytes)
    }

    /// Bytes of the current message `seq` that have arrived and are unread.
    pub(in crate::endpoint) fn available(&self, seq: u64) -> Option<u64> {
        let m = self.msgs.front().filter(|m| m.seq == seq)?;
        Some(m.arrived - m.read)
    }
}

fn rejected(frag: RxFragment, error: ProtocolError) -> Result<Action, Rejected> {
    Err(Rejected { frag, error })
}

/// Fragments a transition is done with, taken from the front of the
/// stream: the engine releases each (in this order, the arrival order).
#[must_use = "fragments taken from the stream must be released"]
#[derive(Debug)]
pub(in crate::endpoint) struct Used<'a> {
    frags: &'a mut VecDeque<RxFragment>,
    left: usize,
}

impl<'a> Used<'a> {
    #[inline]
    fn new(frags: &'a mut VecDeque<RxFragment>, n: usize) -> Self {
        debug_assert!(n <= frags.len());
        Used { frags, left: n }
    }
}

impl Iterator for Used<'_> {
    type Item = RxFragment;

    #[inline]
    fn next(&mut self) -> Option<RxFragment> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        self.frags.pop_front()
    }
}

impl Drop for Used<'_> {
    /// Fragments not taken still leave the stream (its counts no longer
    /// include them); the engine takes them all.
    #[inline]
    fn drop(&mut self) {
        for _ in self.by_ref() {}
    }
}

/// After a bad fragment: between messages if it was the last of its
/// message, else discarding the rest.
fn end_or_discard(last: bool) -> Inbound {
    if last {
        Inbound::Between
    } else {
        Inbound::Discarding
    }
}

#[cfg(test)]
mod tests;
