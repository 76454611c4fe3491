//! What a handler can do with the handles it receives: [`Message`] (an
//! async handler pulls the message's bytes, streamed) and [`Ctx`] (send
//! from inside a handler). The handles themselves are defined with the
//! engine (`crate::endpoint::engine::core`): they hold it, and its handler
//! table holds functions of them. A plain-function handler's
//! [`Piece`](crate::endpoint::Piece) is plain data
//! (`crate::endpoint::engine::handler::piece`).

// The handles, for the rooms that use them with their methods.
pub(in crate::endpoint) use crate::endpoint::engine::core::{Ctx, Message};
use crate::endpoint::engine::net::OutStream;
use crate::error::{PutError, ReceiveError, SendError};
use crate::id::{HandlerId, Rank, WindowId};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

impl Message {
    /// The sending rank.
    #[inline]
    pub fn source(&self) -> Rank {
        self.src
    }

    /// The message's length in bytes (as given to `begin_message`).
    #[inline]
    pub fn len(&self) -> usize {
        self.total as usize
    }

    /// Whether the message has no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Bytes not yet received by this handler.
    #[inline]
    pub fn remaining(&self) -> usize {
        (self.total - self.read) as usize
    }

    /// The handler this message names.
    #[inline]
    pub fn handler(&self) -> HandlerId {
        self.handler
    }

    /// Copy the bytes that have already arrived, up to `buf.len()`, without
    /// waiting. Returns how many were copied.
    ///
    /// # Errors
    /// [`ReceiveError::Stale`] if used after the handler returned;
    /// [`ReceiveError::Aborted`] once every byte that arrived before an
    /// abort has been received.
    pub fn try_receive(&mut self, buf: &mut [u8]) -> Result<usize, ReceiveError> {
        let r = self
            .core()
            .read_message(self.src, self.seq, buf)
            .ok_or(ReceiveError::Stale)?;
        self.read += r.n as u64;
        if r.aborted && r.n == 0 {
            return Err(self.aborted());
        }
        Ok(r.n)
    }

    /// Bytes that have arrived and not been received yet.
    pub fn available(&self) -> usize {
        self.core().available(self.src, self.seq).unwrap_or(0) as usize
    }

    /// Fill `buf` with the next bytes of the message, waiting for them to
    /// arrive; stops early only at the end of the message. Resolves to the
    /// number of bytes copied.
    ///
    /// A message that ends short — its sender aborted it, or failed while
    /// sending it — resolves to [`ReceiveError::Aborted`] once the bytes
    /// that did arrive have been received (those may have been copied into
    /// `buf` by this call); it is never padded.
    ///
    /// ```no_run
    /// # async fn h(mut msg: fastmsg::Message) -> fastmsg::HandlerResult {
    /// let mut header = [0u8; 8];
    /// let n = msg.receive(&mut header).await?;
    /// # let _ = n; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`ReceiveError::Stale`] if used after the handler returned;
    /// [`ReceiveError::Aborted`] as above.
    pub fn receive<'a>(&'a mut self, buf: &'a mut [u8]) -> Receive<'a> {
        Receive {
            msg: self,
            buf,
            filled: 0,
        }
    }

    /// Receive the rest of the message into a new vector, if the message
    /// is at most [`Config::max_receive`](crate::Config::max_receive)
    /// bytes long (`FASTMSG_MAX_RECEIVE`, 1 GiB by default).
    ///
    /// # Errors
    /// [`ReceiveError::TooLong`] if the length the sender declared is
    /// longer (nothing is allocated or received; the message stays
    /// readable with [`receive`](Self::receive)); otherwise as
    /// [`receive`](Self::receive).
    pub async fn receive_vec(&mut self) -> Result<Vec<u8>, ReceiveError> {
        let max = self.core().max_receive();
        self.receive_vec_max(max).await
    }

    /// Receive the rest of the message into a new vector, if the message
    /// is at most `max` bytes long (a handler's own bound on what it
    /// accepts).
    ///
    /// # Errors
    /// [`ReceiveError::TooLong`] if the length the sender declared is
    /// longer than `max` (nothing is allocated or received); otherwise as
    /// [`receive`](Self::receive).
    pub async fn receive_vec_max(&mut self, max: usize) -> Result<Vec<u8>, ReceiveError> {
        if self.total > max as u64 {
            return Err(ReceiveError::TooLong {
                src: self.src,
                len: self.total,
                max: max as u64,
            });
        }
        let mut v = vec![0u8; self.remaining()];
        let n = self.receive(&mut v).await?;
        v.truncate(n);
        Ok(v)
    }

    fn finished(&self) -> bool {
        self.read == self.total
    }

    fn aborted(&self) -> ReceiveError {
        ReceiveError::Aborted {
            src: self.src,
            declared: self.total,
            received: self.read,
        }
    }
}

/// Future returned by [`Message::receive`].
#[derive(Debug)]
pub struct Receive<'a> {
    msg: &'a mut Message,
    buf: &'a mut [u8],
    filled: usize,
}

impl Future for Receive<'_> {
    type Output = Result<usize, ReceiveError>;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let msg = &mut *this.msg;
        let r = msg
            .core()
            .read_message(msg.src, msg.seq, &mut this.buf[this.filled..]);
        let Some(r) = r else {
            return Poll::Ready(Err(ReceiveError::Stale));
        };
        msg.read += r.n as u64;
        this.filled += r.n;
        if r.aborted {
            return Poll::Ready(Err(msg.aborted()));
        }
        if this.filled == this.buf.len() || r.finished || msg.finished() {
            Poll::Ready(Ok(this.filled))
        } else {
            // Resumed by the engine when the next fragment of this message
            // arrives (no waker needed: the engine knows which handler).
            Poll::Pending
        }
    }
}

impl Ctx {
    /// This rank.
    #[inline]
    pub fn rank(&self) -> Rank {
        self.core().rank()
    }

    /// Ranks in the job.
    #[inline]
    pub fn size(&self) -> u32 {
        self.core().size()
    }

    /// The ranks on this host (sharing its memory), in rank order.
    pub fn local_ranks(&self) -> &[Rank] {
        self.core().local()
    }

    /// One-sided put: copy `data` to byte `offset` of window `win` on
    /// `dest` (no handler runs there). Visible to `dest` before any later
    /// message or put from this rank. Never runs handlers here either:
    /// safe to call while holding borrows of handler state.
    ///
    /// # Errors
    /// [`PutError::UnknownWindow`], [`PutError::OutOfBounds`],
    /// [`PutError::BadDestination`], [`PutError::PeerGone`];
    /// [`PutError::OwnerOnly`]: `win` is owner-only
    /// ([`EndpointBuilder::window_owner_only`](crate::EndpointBuilder::window_owner_only))
    /// and `dest` is another rank.
    pub fn put(
        &self,
        win: WindowId,
        dest: Rank,
        offset: usize,
        data: &[u8],
    ) -> Result<(), PutError> {
        self.core().put(win, dest, offset, data)
    }

    /// One-sided put of an 8-byte word, stored atomically with Release
    /// ordering (a flag after data); wakes `dest` if it sleeps. Never runs
    /// handlers.
    ///
    /// # Errors
    /// As [`put`](Self::put), and [`PutError::Misaligned`].
    pub fn put_u64(
        &self,
        win: WindowId,
        dest: Rank,
        offset: usize,
        value: u64,
    ) -> Result<(), PutError> {
        self.core().put_u64(win, dest, offset, value)
    }

    /// Read a word of this rank's own window (Acquire).
    ///
    /// # Errors
    /// [`PutError::UnknownWindow`], [`PutError::OutOfBounds`],
    /// [`PutError::Misaligned`].
    pub fn read_u64(&self, win: WindowId, offset: usize) -> Result<u64, PutError> {
        self.core().read_u64(win, offset)
    }

    /// Copy bytes out of this rank's own window.
    ///
    /// # Errors
    /// [`PutError::UnknownWindow`], [`PutError::OutOfBounds`].
    pub fn read_window(
        &self,
        win: WindowId,
        offset: usize,
        buf: &mut [u8],
    ) -> Result<(), PutError> {
        self.core().read_window(win, offset, buf)
    }

    /// Send a message made of `pieces` (gathered) to `handler` on `dest`.
    ///
    /// **Runs handlers** only from the main program, and only when this
    /// rank's parked bytes pass [`Config::max_parked`](crate::Config::max_parked):
    /// it then makes progress until they fall below. Inside a handler or an
    /// idle hook it never runs handlers and never blocks (without credit
    /// the message is parked and sent, in order, by later progress).
    ///
    /// # Errors
    /// [`SendError::BadDestination`], [`SendError::UnknownHandler`],
    /// [`SendError::PeerGone`]; [`SendError::Closed`] through a `Ctx`
    /// kept past [`Endpoint::close`](crate::Endpoint::close);
    /// [`SendError::Aborted`] if the job is aborted while this send makes
    /// progress for the parked-send bound.
    #[inline]
    pub fn send(&self, dest: Rank, handler: HandlerId, pieces: &[&[u8]]) -> Result<(), SendError> {
        if self.core().watchdog().alarm().raised() {
            // A peer failed (one relaxed load while none did): learn which
            // before sending, so that sends to a dead peer fail now instead
            // of parking until the parked-send bound makes progress.
            self.core().learn_failures();
        }
        self.core().check_send(dest, handler)?;
        let total = pieces.iter().map(|p| p.len() as u64).sum();
        let mut net = self.core().net().borrow_mut();
        if net.try_send_inline(self.core().rank(), dest, handler, total, pieces) {
            return Ok(());
        }
        let stream = OutStream::user(self.core().rank(), dest, handler, total);
        net.send_or_park(stream, pieces);
        drop(net);
        self.core().relieve()
    }

    /// Send like [`send`](Self::send) from inside a handler or an idle
    /// hook (never blocks: parks without credit), and like
    /// [`Endpoint::send`](crate::Endpoint::send) from anywhere else —
    /// without credit it makes progress until credit returns instead of
    /// copying the message into the pending queue (behind sends already
    /// parked towards `dest` it takes its place and waits for them to
    /// leave; what handlers send to `dest` meanwhile leaves after it).
    /// What a library that sends both from handlers and from the main
    /// loop wants (aggregation buffers: no copy, no parked memory from the
    /// main loop, order per destination kept across both).
    ///
    /// # Errors
    /// As [`send`](Self::send); from outside handlers also as
    /// [`Endpoint::send`](crate::Endpoint::send) (a destination that fails
    /// while this waits for its credit: [`SendError::PeerGone`]).
    #[inline]
    pub fn post(&self, dest: Rank, handler: HandlerId, pieces: &[&[u8]]) -> Result<(), SendError> {
        if self.core().in_handler() {
            self.send(dest, handler, pieces)
        } else {
            self.core().send_waiting(dest, handler, pieces)
        }
    }

    /// Whether this is running inside a handler or an idle hook (where
    /// sends never block).
    #[inline]
    pub fn in_handler(&self) -> bool {
        self.core().in_handler()
    }

    /// Raise the idle-work flag: some idle hook
    /// ([`EndpointBuilder::on_idle`](crate::EndpointBuilder::on_idle)) has
    /// work, so the engine runs the hooks at the next idle moment — an
    /// idle round of any wait, or an `extract` that finds nothing. The
    /// engine lowers the flag before running the hooks; a hook that still
    /// has work afterwards raises it again. While the flag is up this rank
    /// is not quiescent: [`quiesce`](crate::Endpoint::quiesce) and
    /// [`close`](crate::Endpoint::close) wait for the hooks to run.
    #[inline]
    pub fn note_idle_work(&self) {
        self.core().hooks().note_work();
    }

    /// Whether the idle-work flag is up (see [`note_idle_work`](Self::note_idle_work)).
    #[inline]
    pub fn idle_work_pending(&self) -> bool {
        self.core().hooks().has_work()
    }

    /// Bytes of this rank's sends parked for credit now (see
    /// [`Config::max_parked`](crate::Config::max_parked)).
    pub fn parked_bytes(&self) -> usize {
        self.core().net().borrow().parked_bytes()
    }
}
