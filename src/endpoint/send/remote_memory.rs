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
//! bounds, the alignment of words, a peer gone, this endpoint closed — each
//! a typed [`PutError`].

use crate::endpoint::engine::core::Core;
use crate::endpoint::receive::message::Ctx;
use crate::error::PutError;
use crate::id::{Rank, WindowId};
use crate::window::{self, WindowArea, WordOp};

impl Core {
    /// The window area of `rank`: this rank's own, or a live peer's on this
    /// host.
    fn area_of(&self, rank: Rank) -> Result<WindowArea, PutError> {
        window::check_dest(rank, self.size())?;
        let net = self.net().borrow();
        if net.shm.is_closed() {
            return Err(PutError::Closed);
        }
        if rank == self.rank() {
            return Ok(**self.my_window());
        }
        if self.local().binary_search(&rank).is_err() {
            return Err(PutError::NotOnHost { rank });
        }
        if self.health().is_gone(rank) {
            return Err(PutError::PeerGone { rank });
        }
        net.shm.peer_area(rank)
    }
}

impl Ctx {
    /// One-sided get: copy `buf.len()` bytes at byte `offset` of window
    /// `win` on `src` (this rank, or a rank on this host) into `buf`; no
    /// handler runs there. Sees every put and update `src`'s window
    /// received before a word this rank has since read with Acquire (a
    /// flag), as the window protocol orders them. Never runs handlers.
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

    /// Remote atomic: apply `op` to the aligned 8-byte word at `offset` of
    /// window `win` on `dest` (this rank, or a rank on this host) with the
    /// CPU's atomic instructions, ordered AcqRel; returns the word's
    /// previous value. Atomic with respect to every other update of the
    /// word, whichever rank makes it (the owner's handler included). Never
    /// runs handlers.
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
    /// As [`get_u64`](Self::get_u64).
    pub fn update_u64(
        &self,
        win: WindowId,
        dest: Rank,
        offset: usize,
        op: WordOp,
    ) -> Result<u64, PutError> {
        let core = self.core();
        let at = core.windows().locate_word(win, offset)?;
        Ok(core.area_of(dest)?.update_u64(at, op))
    }

    /// Remote atomics in bulk on this rank's own window `win`, for an
    /// owner applying a batch of updates it was sent: `n` updates, the
    /// `k`-th being `item(k)` = (word index, operation). Every index is
    /// checked before any update is made; then each update is made in
    /// order exactly as [`update_u64`](Self::update_u64) would (atomic
    /// with respect to every other update of the word, AcqRel), with the
    /// words of the next few items prefetched, so that their cache misses
    /// overlap instead of each waiting behind the previous locked update.
    /// The previous values are not returned. `item` is called up to three
    /// times per item and must give the same answer each time. Never runs
    /// handlers.
    ///
    /// # Errors
    /// [`PutError::UnknownWindow`]; [`PutError::OutOfBounds`] naming the
    /// first item whose index is past the window (none applied);
    /// [`PutError::Closed`].
    pub fn update_own_words<F>(&self, win: WindowId, n: usize, item: F) -> Result<(), PutError>
    where
        F: Fn(usize) -> (u64, WordOp),
    {
        /// Items prefetched ahead of the one being applied.
        const AHEAD: usize = 8;
        let core = self.core();
        let windows = core.windows();
        let len = windows.len_of(win)?;
        let words = (len / 8) as u64;
        if let Some(k) = (0..n).find(|&k| item(k).0 >= words) {
            let index = item(k).0;
            return Err(PutError::OutOfBounds {
                window: windows.name_of(win)?,
                offset: usize::try_from(index.saturating_mul(8)).unwrap_or(usize::MAX),
                len: 8,
                size: len as u64,
            });
        }
        if n == 0 {
            return Ok(());
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
            area.update_u64(at(k), item(k).1);
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
