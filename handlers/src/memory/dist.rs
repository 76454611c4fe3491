//! [`DistVec`]: a block-distributed array of `u64` over [`RemoteWords`].

use super::{MemError, RemoteWords, WordFuture};
use crate::aggregate::Aggregator;
use crate::rpc::RpcError;
use fastmsg::{Ctx, EndpointBuilder, Rank, WordOp};

/// `len` words spread in blocks over the ranks (rank `r` owns global
/// indices `r·per .. (r+1)·per`, `per = ⌈len / ranks⌉`), reached by global
/// index: a thin layer over [`RemoteWords`], with its promises. Cheap to
/// clone.
///
/// ```no_run
/// use fastmsg::EndpointBuilder;
/// use fastmsg_handlers::aggregate::{AggConfig, Aggregator};
/// use fastmsg_handlers::memory::DistVec;
///
/// # fn main() -> Result<(), fastmsg::Error> {
/// let mut b = EndpointBuilder::from_env()?;
/// let agg = Aggregator::new(&mut b, AggConfig::default());
/// let counts = DistVec::new(&agg, &mut b, "counts", 1 << 20);
/// let mut ep = b.start()?;
/// let ctx = ep.ctx();
/// for i in 0..1000u64 {
///     counts.add(&ctx, (i * 7919) % counts.len(), 1)?;   // one call per update
/// }
/// agg.quiesce(&mut ep)?;                                  // all applied
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct DistVec {
    words: RemoteWords,
    len: u64,
    per: u64,
}

impl DistVec {
    /// `len` zeroed words named `name`, spread over the job's ranks.
    pub fn new(agg: &Aggregator, b: &mut EndpointBuilder, name: &str, len: u64) -> Self {
        let per = len.div_ceil(u64::from(b.size().max(1))).max(1);
        DistVec {
            words: RemoteWords::new(agg, b, name, per as usize),
            len,
            per,
        }
    }

    /// This array with every operation sent to the owner's handler (see
    /// [`RemoteWords::through_owner`]).
    pub fn through_owner(mut self) -> Self {
        self.words = self.words.through_owner();
        self
    }

    /// Global length.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it holds no word.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Words per rank (the block size).
    pub fn block(&self) -> u64 {
        self.per
    }

    /// The words underneath (their completion is this array's).
    pub fn words(&self) -> &RemoteWords {
        &self.words
    }

    /// The owner and local index of global index `i`.
    ///
    /// # Errors
    /// [`MemError::OutOfRange`].
    #[inline]
    pub fn locate(&self, i: u64) -> Result<(Rank, u64), MemError> {
        if i >= self.len {
            return Err(MemError::OutOfRange {
                name: self.words.name.clone(),
                index: i,
                words: self.len,
            });
        }
        Ok((Rank((i / self.per) as u32), i % self.per))
    }

    /// The completion of [`get`](Self::get) and
    /// [`fetch_add`](Self::fetch_add) (see [`RemoteWords::on_complete`]).
    pub fn on_complete<F>(&self, f: F)
    where
        F: FnMut(&Ctx, Rank, u64, Result<u64, RpcError>) + 'static,
    {
        self.words.on_complete(f)
    }

    /// Read global index `i`; the completion gets it with `token`.
    ///
    /// # Errors
    /// As [`RemoteWords::get`].
    #[inline]
    pub fn get(&self, ctx: &Ctx, i: u64, token: u64) -> Result<(), MemError> {
        let (o, l) = self.locate(i)?;
        self.words.get(ctx, o, l, token)
    }

    /// Add `v` to global index `i` (nothing comes back).
    ///
    /// # Errors
    /// As [`RemoteWords::add`].
    #[inline]
    pub fn add(&self, ctx: &Ctx, i: u64, v: u64) -> Result<(), MemError> {
        let (o, l) = self.locate(i)?;
        self.words.add(ctx, o, l, v)
    }

    /// Add `v` to global index `i`; the completion gets the previous value
    /// with `token`.
    ///
    /// # Errors
    /// As [`RemoteWords::fetch`].
    #[inline]
    pub fn fetch_add(&self, ctx: &Ctx, i: u64, v: u64, token: u64) -> Result<(), MemError> {
        let (o, l) = self.locate(i)?;
        self.words.fetch(ctx, o, l, WordOp::FetchAdd(v), token)
    }

    /// Read global index `i` into a future.
    ///
    /// # Errors
    /// As [`RemoteWords::call`].
    pub fn get_future(&self, ctx: &Ctx, i: u64) -> Result<WordFuture, MemError> {
        let (o, l) = self.locate(i)?;
        self.words.call(ctx, o, l, None)
    }

    /// Read every index of `idx`: the completion gets the `k`-th with token
    /// `first_token + k`.
    ///
    /// # Errors
    /// The first error; the reads before it were made.
    pub fn get_batch(&self, ctx: &Ctx, idx: &[u64], first_token: u64) -> Result<(), MemError> {
        for (k, &i) in idx.iter().enumerate() {
            self.get(ctx, i, first_token + k as u64)?;
        }
        Ok(())
    }

    /// Add each `(index, value)` of `updates`.
    ///
    /// # Errors
    /// The first error; the updates before it were made.
    pub fn add_batch(&self, ctx: &Ctx, updates: &[(u64, u64)]) -> Result<(), MemError> {
        for &(i, v) in updates {
            self.add(ctx, i, v)?;
        }
        Ok(())
    }

    /// This rank's block, read atomically word by word.
    ///
    /// # Errors
    /// [`MemError::Put`] (the endpoint closed).
    pub fn local_block(&self, ctx: &Ctx) -> Result<Vec<u64>, MemError> {
        let mine = u64::from(ctx.rank().0) * self.per;
        let n = self.per.min(self.len.saturating_sub(mine));
        (0..n).map(|l| self.words.local(ctx, l)).collect()
    }
}
