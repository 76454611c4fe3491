//! Direct remote memory: one-sided `get` and remote atomics on the windows
//! of ranks that share this host's memory (and this rank's own).
//!
//! A rank's windows live in the host's shared segment, so a peer on the
//! same host reads them with a copy and updates their 8-byte words with
//! the CPU's atomic instructions ([`crate::window::update_word`]) — no
//! message, no handler on the owner. A rank on another host cannot be
//! reached this way ([`PutError::NotOnHost`]): there the owner applies
//! the operation in a handler, which `fastmsg-handlers`' remote memory
//! does on top of these calls. Checks: the destination, the window, the
//! bounds, the alignment of words, a peer gone, this endpoint closed, an
//! update of another rank's owner-only window — each a typed [`PutError`].
//! An owner-only window
//! ([`EndpointBuilder::window_owner_only`](crate::EndpointBuilder::window_owner_only))
//! is read by every rank but updated by its owner alone, which may then
//! apply updates as the words' only writer
//! ([`Ctx::update_own_words_unshared`]).

use crate::endpoint::engine::core::Core;
use crate::endpoint::receive::message::Ctx;
use crate::error::PutError;
use crate::id::{Rank, WindowId};
use crate::window::{self, WindowArea, WindowView, WindowWords, WordOp};

impl Core {
    /// Whose window a one-sided access to `rank` reaches, checked as every
    /// such access is: `None` for this rank's own, `Some(rank)` for a live
    /// peer on this host; an error for a closed endpoint, a rank out of
    /// range, off this host or gone.
    fn window_peer(&self, rank: Rank) -> Result<Option<Rank>, PutError> {
        window::check_dest(rank, self.size())?;
        if self.net().borrow().shm().is_closed() {
            return Err(PutError::Closed);
        }
        if rank == self.rank() {
            return Ok(None);
        }
        if self.local().binary_search(&rank).is_err() {
            return Err(PutError::NotOnHost { rank });
        }
        if self.health().is_gone(rank) {
            return Err(PutError::PeerGone { rank });
        }
        Ok(Some(rank))
    }

    /// The window area of `rank`: this rank's own, or a live peer's on this
    /// host.
    fn area_of(&self, rank: Rank) -> Result<WindowArea, PutError> {
        match self.window_peer(rank)? {
            None => Ok(**self.my_window()),
            Some(peer) => self.net().borrow().shm().peer_area(peer),
        }
    }

    /// As [`area_of`](Self::area_of), keeping the memory mapped.
    fn view_of(&self, rank: Rank) -> Result<WindowView, PutError> {
        match self.window_peer(rank)? {
            None => Ok(self.my_window().clone()),
            Some(peer) => self.net().borrow().shm().peer_view(peer),
        }
    }
}

impl Ctx {
    /// One-sided get: copy `buf.len()` bytes at byte `offset` of window
    /// `win` on `src` (this rank, or a rank on this host) into `buf`; no
    /// handler runs there. Sees every put and update `src`'s window
    /// received before a word this rank has since read with Acquire (a
    /// flag), as the window protocol orders them. Allowed on an owner-only
    /// window too. Never runs handlers.
    ///
    /// # Errors
    /// [`PutError::BadDestination`], [`PutError::UnknownWindow`],
    /// [`PutError::OutOfBounds`], [`PutError::PeerGone`],
    /// [`PutError::NotOnHost`] (a rank on another host: ask its owner, as
    /// `fastmsg-handlers`' remote memory does), [`PutError::Closed`].
    pub fn get(
        &self,
        win: WindowId,
        src: Rank,
        offset: usize,
        buf: &mut [u8],
    ) -> Result<(), PutError> {
        let core = self.core();
        let at = core.windows().locate(win, offset, buf.len())?;
        core.area_of(src)?.read(at, buf);
        Ok(())
    }

    /// One-sided atomic read of the 8-byte word at `offset` of window
    /// `win` on `src` (Acquire). Never runs handlers.
    ///
    /// # Errors
    /// As [`get`](Self::get), and [`PutError::Misaligned`].
    pub fn get_u64(&self, win: WindowId, src: Rank, offset: usize) -> Result<u64, PutError> {
        let core = self.core();
        let at = core.windows().locate_word(win, offset)?;
        Ok(core.area_of(src)?.load_u64(at))
    }

    /// Window `win` of `src` (this rank, or a rank on this host) as
    /// 8-byte words, resolved once: [`WindowWords::load`] and
    /// [`WindowWords::prefetch`] then reach word `i` without this call's
    /// checks — for a library that reads many words of the same ranks
    /// (`fastmsg-handlers`' remote memory overlaps its on-host reads this
    /// way). The handle does not notice `src` failing later: check
    /// [`is_gone`](Self::is_gone) before taking a value it read as
    /// `src`'s. Never runs handlers.
    ///
    /// ```no_run
    /// use fastmsg::{EndpointBuilder, Rank};
    /// # fn main() -> Result<(), fastmsg::Error> {
    /// let mut b = EndpointBuilder::from_env()?;
    /// let table = b.window("table", 8 * 1024);
    /// let ep = b.start()?;
    /// let words = ep.ctx().window_words(table, Rank(0))?;
    /// let wanted = [7u64, 300, 12, 999];
    /// for &i in &wanted {
    ///     words.prefetch(i); // the misses overlap
    /// }
    /// let sum: u64 = wanted.iter().filter_map(|&i| words.load(i)).sum();
    /// # let _ = sum; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`PutError::BadDestination`], [`PutError::UnknownWindow`],
    /// [`PutError::PeerGone`], [`PutError::NotOnHost`],
    /// [`PutError::Closed`].
    pub fn window_words(&self, win: WindowId, src: Rank) -> Result<WindowWords, PutError> {
        let core = self.core();
        let windows = core.windows();
        let len = windows.len_of(win)? as u64;
        let base = if len < 8 {
            0
        } else {
            windows.locate_word(win, 0)?
        };
        let view = core.view_of(src)?;
        Ok(WindowWords::new(view, base, len / 8 * 8, src))
    }

    /// A hint that the 8-byte word at `offset` of window `win` on `src`
    /// (this rank, or a rank on this host) is about to be read or updated:
    /// the CPU starts bringing its cache line in, so that a loop that
    /// hints a few items ahead overlaps their cache misses. No effect and
    /// no error for a bad window, offset or rank (the access itself
    /// reports those); never runs handlers.
    #[inline]
    pub fn prefetch_u64(&self, win: WindowId, src: Rank, offset: usize) {
        let core = self.core();
        if let (Ok(at), Ok(area)) = (core.windows().locate_word(win, offset), core.area_of(src)) {
            area.prefetch(at);
        }
    }

    /// Remote atomic: apply `op` to the aligned 8-byte word at `offset` of
    /// window `win` on `dest` (this rank, or a rank on this host) with the
    /// CPU's atomic instructions, ordered AcqRel; returns the word's
    /// previous value. Atomic with respect to every other update of the
    /// word, whichever rank makes it (the owner's handler included). On an
    /// owner-only window, only the owner updates its own words. Never runs
    /// handlers.
    ///
    /// ```no_run
    /// use fastmsg::{EndpointBuilder, Rank, WordOp};
    /// # fn main() -> Result<(), fastmsg::Error> {
    /// let mut b = EndpointBuilder::from_env()?;
    /// let counters = b.window("counters", 64);
    /// let ep = b.start()?;
    /// let before = ep.ctx().update_u64(counters, Rank(0), 8, WordOp::FetchAdd(1))?;
    /// # let _ = before; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_u64`](Self::get_u64); [`PutError::OwnerOnly`]: `win` is
    /// owner-only and `dest` is another rank (send the owner the update).
    pub fn update_u64(
        &self,
        win: WindowId,
        dest: Rank,
        offset: usize,
        op: WordOp,
    ) -> Result<u64, PutError> {
        let core = self.core();
        let at = core.windows().locate_word(win, offset)?;
        core.windows().check_writer(win, core.rank(), dest)?;
        Ok(core.area_of(dest)?.update_u64(at, op))
    }

    /// Remote atomics in bulk on this rank's own window `win`, for an
    /// owner applying a batch of updates it was sent: `n` updates, the
    /// `k`-th being `item(k)` = (word index, operation). Every index is
    /// checked before any update is made (one pass over the indices; the
    /// first bad one is found only when there is one); then each update
    /// is made in order exactly as [`update_u64`](Self::update_u64) would
    /// (atomic with respect to every other update of the word, AcqRel),
    /// with the words of the next few items prefetched, so that their
    /// cache misses overlap instead of each waiting behind the previous
    /// locked update. The previous values are not returned. `item` is
    /// called up to three times per item and must give the same answer
    /// each time: keep it small (it is inlined into the loops). Never runs
    /// handlers.
    ///
    /// # Errors
    /// [`PutError::UnknownWindow`]; [`PutError::OutOfBounds`] naming the
    /// first item whose index is past the window (its offset is the
    /// index times 8; none applied); [`PutError::Closed`].
    #[inline]
    pub fn update_own_words<F>(&self, win: WindowId, n: usize, item: F) -> Result<(), PutError>
    where
        F: Fn(usize) -> (u64, WordOp),
    {
        self.own_words(win, n, item, |area, at, op| {
            area.update_u64(at, op);
        })
    }

    /// As [`update_own_words`](Self::update_own_words), for an owner-only
    /// window
    /// ([`EndpointBuilder::window_owner_only`](crate::EndpointBuilder::window_owner_only)),
    /// whose words this rank alone updates (every other rank sends it its
    /// updates; their direct writes are refused): each update is a load
    /// and a Release store, no locked instruction, several times cheaper
    /// than an atomic read-modify-write. Readers on this host still see
    /// each word whole. Refused on any other window, where another rank's
    /// direct update made meanwhile would be lost.
    ///
    /// # Errors
    /// As [`update_own_words`](Self::update_own_words);
    /// [`PutError::NotOwnerOnly`]: `win` is not owner-only (nothing
    /// applied).
    #[inline]
    pub fn update_own_words_unshared<F>(
        &self,
        win: WindowId,
        n: usize,
        item: F,
    ) -> Result<(), PutError>
    where
        F: Fn(usize) -> (u64, WordOp),
    {
        self.core().windows().check_owner_only(win)?;
        self.own_words(win, n, item, |area, at, op| {
            area.update_u64_unshared(at, op);
        })
    }

    /// Check the `n` items' indices in one pass, then `apply` each in
    /// order, prefetching the words of the items ahead.
    #[inline(always)]
    fn own_words<F, A>(&self, win: WindowId, n: usize, item: F, apply: A) -> Result<(), PutError>
    where
        F: Fn(usize) -> (u64, WordOp),
        A: Fn(&WindowArea, u64, WordOp),
    {
        /// Items prefetched ahead of the one being applied.
        const AHEAD: usize = 8;
        let core = self.core();
        let windows = core.windows();
        let len = windows.len_of(win)?;
        if n == 0 {
            return Ok(());
        }
        let words = (len / 8) as u64;
        // The bounds in one pass without an early exit (it vectorises);
        // the first bad item is looked for only when there is one.
        let highest = (0..n).map(|k| item(k).0).max().unwrap_or(0);
        if highest >= words {
            let index = (0..n)
                .map(|k| item(k).0)
                .find(|&i| i >= words)
                .unwrap_or(highest);
            return Err(PutError::OutOfBounds {
                window: windows.name_of(win)?,
                offset: usize::try_from(index.saturating_mul(8)).unwrap_or(usize::MAX),
                len: 8,
                size: len as u64,
            });
        }
        let base = windows.locate_word(win, 0)?;
        let area = core.area_of(core.rank())?;
        let at = |k: usize| base + item(k).0 * 8;
        for k in 0..n.min(AHEAD) {
            area.prefetch(at(k));
        }
        for k in 0..n {
            if k + AHEAD < n {
                area.prefetch(at(k + AHEAD));
            }
            apply(&area, at(k), item(k).1);
        }
        Ok(())
    }

    /// Whether `rank` shares this host's memory (this rank included): its
    /// windows are reached directly by [`get`](Self::get) and
    /// [`update_u64`](Self::update_u64).
    pub fn is_on_host(&self, rank: Rank) -> bool {
        self.core().local().binary_search(&rank).is_ok()
    }

    /// Whether `rank` is known to be gone: failed (died, lost on the
    /// network) or left. A library that waits for answers from `rank`
    /// (request/response) stops waiting once this is true.
    #[inline]
    pub fn is_gone(&self, rank: Rank) -> bool {
        self.core().health().is_gone(rank)
    }

    /// Bytes of window `win` (as registered).
    ///
    /// # Errors
    /// [`PutError::UnknownWindow`].
    pub fn window_len(&self, win: WindowId) -> Result<usize, PutError> {
        self.core().windows().len_of(win)
    }
}
