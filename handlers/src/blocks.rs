//! [`Blocks`]: one block of elements per member, of lengths that may
//! differ, stored back to back — what the collectives with varying counts
//! (`alltoallv`, `gatherv`) hand back.

use crate::element::Element;

/// One block of elements per member of a group, in member order, stored
/// back to back in one vector; block `i` holds what member `i` sent.
///
/// ```
/// use fastmsg::threads;
/// use fastmsg_handlers::{CollConfig, Collectives};
///
/// let out = threads::run(3, |_| {}, |mut b| {
///     let coll = Collectives::register(&mut b, CollConfig::default());
///     let mut ep = b.start()?;
///     let me = ep.rank().0 as u64;
///     // Member r sends r + 1 copies of its rank to every member.
///     let send = vec![me; 3 * (me as usize + 1)];
///     let got = coll.alltoallv(&mut ep, &send, &[me as usize + 1; 3])?;
///     ep.close()?;
///     Ok(got)
/// }).unwrap();
/// assert_eq!(out[0].block(2), &[2, 2, 2]);
/// assert_eq!(out[1].counts().collect::<Vec<_>>(), vec![1, 2, 3]);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Blocks<T> {
    data: Vec<T>,
    /// `offsets[i] .. offsets[i + 1]` is block `i` (one more than blocks).
    offsets: Vec<usize>,
}

impl<T> Default for Blocks<T> {
    /// No blocks.
    fn default() -> Self {
        Blocks {
            data: Vec::new(),
            offsets: vec![0],
        }
    }
}

impl<T: Element> Blocks<T> {
    /// Blocks of `counts[i]` elements, back to back in `data`.
    ///
    /// # Panics
    /// If the counts do not add up to `data.len()` (the collectives build
    /// only blocks that do).
    pub(crate) fn new(data: Vec<T>, counts: impl IntoIterator<Item = usize>) -> Blocks<T> {
        let mut offsets = vec![0];
        let mut at = 0usize;
        for c in counts {
            at += c;
            offsets.push(at);
        }
        assert_eq!(at, data.len(), "block counts add up to the data");
        Blocks { data, offsets }
    }

    /// How many blocks (members); 0 where the collective gives this
    /// member nothing (`gatherv` off the root).
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Whether there are no blocks.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Block `i`.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn block(&self, i: usize) -> &[T] {
        &self.data[self.offsets[i]..self.offsets[i + 1]]
    }

    /// The blocks in member order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[T]> + '_ {
        (0..self.len()).map(|i| self.block(i))
    }

    /// Each block's length, in member order.
    pub fn counts(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        self.offsets.windows(2).map(|w| w[1] - w[0])
    }

    /// Where each block starts in [`data`](Self::data), and (last) the
    /// total: `len() + 1` offsets (MPI's displacements).
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// Every block, back to back.
    pub fn data(&self) -> &[T] {
        &self.data
    }

    /// The blocks, back to back, and the offsets (see
    /// [`offsets`](Self::offsets)).
    pub fn into_parts(self) -> (Vec<T>, Vec<usize>) {
        (self.data, self.offsets)
    }
}
