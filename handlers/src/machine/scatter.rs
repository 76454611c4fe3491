//! Scatter and scatterv by a binomial tree rooted at the root (MPICH's and
//! Open MPI's binomial scatter): the gather tree of [`super::gather`] run
//! backwards.
//!
//! The root puts the blocks into relative order (one copy) and sends each
//! child the blocks of its subtree in one message, farthest child — the
//! largest subtree — first; a member keeps its own block and forwards the
//! rest the same way, from inside the handler. ⌈log2 n⌉ steps, `n - 1`
//! messages; the root sends `n - 1` blocks, a member forwards its subtree
//! but one.
//!
//! Scatterv's messages carry each block's count before the blocks
//! ([`super::counted`]): only the root needs the counts.

use super::gather::Tree;
use super::{counted, Io, Machine, Output};
use crate::element::{as_bytes, from_bytes, Element};
use crate::error::CollError;
use crate::wire::Kind;

/// Scatter of `count` elements per member.
pub(crate) struct Scatter<T: Element> {
    tree: Tree,
    count: usize,
    /// At the root, from the start, and elsewhere once the parent's
    /// message came: the subtree's blocks in relative order, as bytes.
    buf: Option<Vec<u8>>,
    /// The root's arguments disagree (reported by `start`, which tells
    /// the other members).
    bad: Option<String>,
    out: Option<Vec<T>>,
}

impl<T: Element> Scatter<T> {
    /// `send` matters at the root only: `n` blocks of `count` elements.
    pub(crate) fn new(n: u32, me: u32, root: u32, send: &[T], count: usize) -> Self {
        let tree = Tree::new(n, me, root);
        let (mut buf, mut bad) = (None, None);
        if me == root {
            if Some(send.len()) == count.checked_mul(n as usize) {
                // Member m's block goes to relative place m - root.
                let mut b = as_bytes(send).to_vec();
                b.rotate_left(root as usize * count * std::mem::size_of::<T>());
                buf = Some(b);
            } else {
                bad = Some(format!(
                    "scatter: the root's {} elements are not {n} blocks of {count}",
                    send.len()
                ));
            }
        }
        Scatter {
            tree,
            count,
            buf,
            bad,
            out: None,
        }
    }

    fn forward(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        let buf = self.buf.take().expect("the subtree's blocks");
        let block = self.count * std::mem::size_of::<T>();
        for &c in self.tree.children.iter().rev() {
            let at = (c - self.tree.rel) as usize * block;
            let len = self.tree.span_of(c) * block;
            io.send(self.tree.abs(c), 0, &buf[at..at + len])?;
        }
        self.out = Some(from_bytes(&buf[..block]));
        Ok(())
    }
}

impl<T: Element> Machine for Scatter<T> {
    fn kind(&self) -> Kind {
        Kind::Scatter
    }

    fn start(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        if let Some(why) = self.bad.take() {
            return Err(CollError::BadArgument(why));
        }
        if self.buf.is_some() {
            self.forward(io)?;
        }
        Ok(())
    }

    fn on_message(
        &mut self,
        io: &Io<'_>,
        from: u32,
        step: u16,
        data: &[u8],
    ) -> Result<(), CollError> {
        if step != 0 || !self.tree.is_parent(from) {
            return Err(io.unexpected(from, step, "not from this rank's parent in the tree"));
        }
        if self.out.is_some() {
            return Err(io.unexpected(from, step, "duplicate"));
        }
        let want = self.tree.span() * self.count * std::mem::size_of::<T>();
        io.check_len(from, step, data.len(), want)?;
        self.buf = Some(data.to_vec());
        self.forward(io)
    }

    fn is_done(&self) -> bool {
        self.out.is_some()
    }

    fn take_output(&mut self) -> Output {
        Box::new(self.out.take().unwrap_or_default())
    }

    fn root(&self) -> Option<u32> {
        Some(self.tree.root)
    }
}

/// Scatterv: blocks of any length, their counts carried with them.
pub(crate) struct Scatterv<T: Element> {
    tree: Tree,
    /// The subtree's counts and blocks in relative order (as for
    /// [`Scatter`]).
    blocks: Option<(Vec<usize>, Vec<u8>)>,
    bad: Option<String>,
    out: Option<Vec<T>>,
}

impl<T: Element> Scatterv<T> {
    /// `send` and `counts` matter at the root only: block `m` of
    /// `counts[m]` elements for member `m`, back to back.
    pub(crate) fn new(n: u32, me: u32, root: u32, send: &[T], counts: &[usize]) -> Self {
        let tree = Tree::new(n, me, root);
        let (mut blocks, mut bad) = (None, None);
        if me == root {
            let total = counts.iter().try_fold(0usize, |a, &c| a.checked_add(c));
            if counts.len() != n as usize || total != Some(send.len()) {
                bad = Some(format!(
                    "scatterv: the root passed {} counts adding up to {total:?} for {} elements and {n} members",
                    counts.len(),
                    send.len()
                ));
            } else {
                let mut at = vec![0usize; n as usize + 1];
                for (m, c) in counts.iter().enumerate() {
                    at[m + 1] = at[m] + c;
                }
                let mut rel_counts = Vec::with_capacity(n as usize);
                let mut data = Vec::with_capacity(std::mem::size_of_val(send));
                for j in 0..n {
                    let m = tree.abs(j) as usize;
                    rel_counts.push(counts[m]);
                    data.extend_from_slice(as_bytes(&send[at[m]..at[m + 1]]));
                }
                blocks = Some((rel_counts, data));
            }
        }
        Scatterv {
            tree,
            blocks,
            bad,
            out: None,
        }
    }

    fn forward(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        let (counts, bytes) = self.blocks.take().expect("the subtree's blocks");
        let size = std::mem::size_of::<T>();
        let mut at = vec![0usize; counts.len() + 1];
        for (j, c) in counts.iter().enumerate() {
            at[j + 1] = at[j] + c * size;
        }
        for &c in self.tree.children.iter().rev() {
            let first = (c - self.tree.rel) as usize;
            let last = first + self.tree.span_of(c);
            let mut msg = counted::header(&counts[first..last]);
            msg.extend_from_slice(&bytes[at[first]..at[last]]);
            io.send(self.tree.abs(c), 0, &msg)?;
        }
        self.out = Some(from_bytes(&bytes[..at[1]]));
        Ok(())
    }
}

impl<T: Element> Machine for Scatterv<T> {
    fn kind(&self) -> Kind {
        Kind::Scatterv
    }

    fn start(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        if let Some(why) = self.bad.take() {
            return Err(CollError::BadArgument(why));
        }
        if self.blocks.is_some() {
            self.forward(io)?;
        }
        Ok(())
    }

    fn on_message(
        &mut self,
        io: &Io<'_>,
        from: u32,
        step: u16,
        data: &[u8],
    ) -> Result<(), CollError> {
        if step != 0 || !self.tree.is_parent(from) {
            return Err(io.unexpected(from, step, "not from this rank's parent in the tree"));
        }
        if self.out.is_some() {
            return Err(io.unexpected(from, step, "duplicate"));
        }
        let size = std::mem::size_of::<T>();
        let (counts, bytes) = counted::split(io, from, step, self.tree.span(), size, data)?;
        self.blocks = Some((counts, bytes.to_vec()));
        self.forward(io)
    }

    fn is_done(&self) -> bool {
        self.out.is_some()
    }

    fn take_output(&mut self) -> Output {
        Box::new(self.out.take().unwrap_or_default())
    }

    fn root(&self) -> Option<u32> {
        Some(self.tree.root)
    }
}
