//! Reads of words on this host, overlapped: what [`RemoteWords::get`]
//! does for an owner whose memory this rank shares.
//!
//! A read of a random word misses the cache; made one after another,
//! each waits for its miss. So a `get` to an owner on this host does not
//! read at once: it asks the CPU to start bringing the word's line in,
//! queues the read, and returns. The reads are made, and their
//! completions run, a batch at a time: the oldest third of the queue when
//! a `get` finds [`READS_IN_FLIGHT`](super::READS_IN_FLIGHT) reads queued
//! (inside that call, before it queues its own), or the whole queue when
//! it is drained:
//!
//! ```text
//!  get(owner on this host, index, token)
//!    queue full → make the oldest third of the reads, run their
//!                 completions (the callback taken out once for them)
//!    prefetch the word; queue (owner, index, token)
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

/// Reads made and completed together when the queue is full: the oldest
/// third, so that two thirds of the queue's misses are still on their way
/// while the batch is read.
const BATCH: usize = IN_FLIGHT / 3;

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
    /// `words`; if the queue is full, its oldest [`BATCH`] reads are made
    /// and completed first.
    #[inline]
    pub(crate) fn issue(&self, ctx: &Ctx, words: &WindowWords, index: u64, token: u64) {
        words.prefetch(index);
        // (Again if the completions queued reads of their own.)
        while self.len.get() == IN_FLIGHT {
            self.complete_oldest(ctx, BATCH);
        }
        let (head, len) = (self.head.get(), self.len.get());
        if len == 0 {
            // The idle hook drains the queue if nothing else does.
            ctx.note_idle_work();
        }
        self.ring[(head + len) % IN_FLIGHT].set(Pending {
            owner: words.rank(),
            index,
            token,
        });
        self.len.set(len + 1);
    }

    /// Make every queued read and run its completion, oldest first
    /// (reads queued by those completions included).
    pub(crate) fn drain(&self, ctx: &Ctx) {
        self.complete_oldest(ctx, usize::MAX);
    }

    /// Make the oldest `n` queued reads (or as many as are queued, reads
    /// that their completions queue included) and run their completions,
    /// with the callback taken out once. Each read leaves the queue before
    /// its completion runs, so a completion may read again.
    #[inline(never)]
    fn complete_oldest(&self, ctx: &Ctx, n: usize) {
        let mut held = self.complete.hold();
        for _ in 0..n {
            let len = self.len.get();
            if len == 0 {
                break;
            }
            let head = self.head.get();
            let p = self.ring[head].get();
            self.head.set((head + 1) % IN_FLIGHT);
            self.len.set(len - 1);
            let r = self.read(ctx, p);
            held.run(ctx, p.owner, p.token, r);
        }
    }

    /// Reads queued and not completed.
    pub(crate) fn queued(&self) -> usize {
        self.len.get()
    }

    /// Make the read `p`.
    #[inline]
    fn read(&self, ctx: &Ctx, p: Pending) -> Result<u64, RpcError> {
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
        value.ok_or_else(|| RpcError::PeerGone {
            channel: self.channel.clone(),
            rank: p.owner,
        })
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
