//! Reads of words on this host, overlapped: what [`RemoteWords::get`]
//! does for an owner whose memory this rank shares.
//!
//! A read of a random word misses the cache; made one after another,
//! each waits for its miss. So a `get` to an owner on this host does not
//! read at once: it asks the CPU to start bringing the word's line in,
//! queues the read, and returns. The read itself is made, and its
//! completion run, when [`READS_IN_FLIGHT`](super::READS_IN_FLIGHT) later
//! gets have been queued behind it (inside the `get` that queues the next
//! one), or when the queue is drained:
//!
//! ```text
//!  get(owner on this host, index, token)
//!    prefetch the word; queue (owner, index, token)
//!    queue full → read the oldest now, run its completion
//!  drained, oldest first, every read read and completed:
//!    Aggregator::flush / quiesce, and whenever the rank is idle (the
//!    aggregator's idle hook); before this rank's next update through the
//!    same words (fetch, add, set_local, a fetching call)
//! ```
//!
//! So the misses of consecutive reads overlap, as in a loop over a batch
//! of indices, while the program still makes one call per read. Promises:
//! a read takes place after its call and before its completion runs;
//! completions run in the order the reads were made; an update this rank
//! makes through the same words after a read is not seen by that read;
//! an owner that fails before its read is made completes it with
//! [`RpcError::PeerGone`] — nothing waits for ever.
//!
//! [`RemoteWords::get`]: super::RemoteWords::get

use super::READS_IN_FLIGHT as IN_FLIGHT;
use crate::aggregate::{AggError, Buffers};
use crate::rpc::{Completer, RpcError};
use fastmsg::error::PutError;
use fastmsg::{Ctx, Rank, WindowId, WindowWords};
use std::cell::{Cell, OnceCell};
use std::rc::Rc;

/// A queued read.
#[derive(Clone, Copy, Default)]
struct Pending {
    owner: Rank,
    index: u64,
    token: u64,
}

/// The queued reads of one set of words (shared by its clones).
pub(crate) struct Reads {
    /// The name the calls' errors carry (the read channel's).
    channel: String,
    win: WindowId,
    /// Per rank: its window's words if it is on this host (`None`: on
    /// another host), found at the first read.
    views: Box<[OnceCell<Option<WindowWords>>]>,
    /// A ring of `IN_FLIGHT` reads: `len` of them from `head` on.
    ring: [Cell<Pending>; IN_FLIGHT],
    head: Cell<usize>,
    len: Cell<usize>,
    complete: Rc<Completer<u64>>,
}

impl Reads {
    /// The reads of window `win` in a job of `ranks` ranks, completed by
    /// `complete`, their errors naming `channel`.
    pub(crate) fn new(
        channel: String,
        win: WindowId,
        ranks: u32,
        complete: Rc<Completer<u64>>,
    ) -> Self {
        Reads {
            channel,
            win,
            views: (0..ranks).map(|_| OnceCell::new()).collect(),
            ring: Default::default(),
            head: Cell::new(0),
            len: Cell::new(0),
            complete,
        }
    }

    /// `owner`'s words if it is on this host and alive; `None` for an
    /// owner on another host or not a rank of the job (its call reports
    /// that).
    ///
    /// # Errors
    /// [`PutError::PeerGone`], [`PutError::Closed`].
    #[inline]
    pub(crate) fn words_of(
        &self,
        ctx: &Ctx,
        owner: Rank,
    ) -> Result<Option<&WindowWords>, PutError> {
        let Some(cell) = self.views.get(owner.index()) else {
            return Ok(None);
        };
        let words = match cell.get() {
            Some(w) => w.as_ref(),
            None => self.resolve(ctx, owner, cell)?,
        };
        if words.is_some() && ctx.is_gone(owner) {
            return Err(PutError::PeerGone { rank: owner });
        }
        Ok(words)
    }

    /// Find `owner`'s words (once: where a rank lives does not change).
    #[cold]
    fn resolve<'a>(
        &self,
        ctx: &Ctx,
        owner: Rank,
        cell: &'a OnceCell<Option<WindowWords>>,
    ) -> Result<Option<&'a WindowWords>, PutError> {
        let found = match ctx.window_words(self.win, owner) {
            Ok(w) => Some(w),
            Err(PutError::NotOnHost { .. }) => None,
            Err(e) => return Err(e),
        };
        Ok(cell.get_or_init(|| found).as_ref())
    }

    /// Queue a read of word `index` (checked) of `owner`, whose words are
    /// `words`; if the queue was full, the oldest read is made and
    /// completed first.
    #[inline]
    pub(crate) fn issue(&self, ctx: &Ctx, words: &WindowWords, index: u64, token: u64) {
        words.prefetch(index);
        let p = Pending {
            owner: words.rank(),
            index,
            token,
        };
        let (head, len) = (self.head.get(), self.len.get());
        if len < IN_FLIGHT {
            if len == 0 {
                // The idle hook drains the queue if nothing else does.
                ctx.note_idle_work();
            }
            self.ring[(head + len) % IN_FLIGHT].set(p);
            self.len.set(len + 1);
            return;
        }
        // Full: the new read takes the oldest's place, which is made now
        // (the queue is whole again before its completion runs, which may
        // read too).
        let oldest = self.ring[head].replace(p);
        self.head.set((head + 1) % IN_FLIGHT);
        self.finish(ctx, oldest);
    }

    /// Make every queued read and run its completion, oldest first
    /// (reads queued by those completions included).
    pub(crate) fn drain(&self, ctx: &Ctx) {
        while self.len.get() > 0 {
            let head = self.head.get();
            let oldest = self.ring[head].get();
            self.head.set((head + 1) % IN_FLIGHT);
            self.len.set(self.len.get() - 1);
            self.finish(ctx, oldest);
        }
    }

    /// Reads queued and not completed.
    pub(crate) fn queued(&self) -> usize {
        self.len.get()
    }

    /// Make the read `p` and run its completion.
    #[inline]
    fn finish(&self, ctx: &Ctx, p: Pending) {
        // The owner's words were found and the index checked when the
        // read was queued: no value means the owner is gone.
        let value = if ctx.is_gone(p.owner) {
            None
        } else {
            self.views
                .get(p.owner.index())
                .and_then(OnceCell::get)
                .and_then(Option::as_ref)
                .and_then(|w| w.load(p.index))
        };
        let r = value.ok_or_else(|| RpcError::PeerGone {
            channel: self.channel.clone(),
            rank: p.owner,
        });
        self.complete.run(ctx, p.owner, p.token, r);
    }
}

impl Buffers for Reads {
    fn flush_all(&self, ctx: &Ctx) -> Result<(), AggError> {
        self.drain(ctx);
        Ok(())
    }

    fn buffered(&self) -> usize {
        0
    }
}
