//! Gather and gatherv by a binomial tree rooted at the root (MPICH's and
//! Open MPI's binomial gather).
//!
//! Relative index `rel = me - root mod n`; a member's subtree covers the
//! relative indices `rel .. rel + subtree(rel)` ([`crate::group::subtree`]),
//! its own block first, then each child's subtree in turn, nearest child
//! first. A member waits for all its children's blocks (arriving in any
//! order, each placed by its sender), then sends its whole subtree to its
//! parent in one message: ⌈log2 n⌉ steps, `n - 1` messages in all; the
//! root receives `(n - 1)` blocks, a member at depth `d` forwards
//! `subtree` blocks. The root rotates the blocks from relative into member
//! order. Everything past `start` runs in the handler: a member whose
//! subtree is late is not held inside the call.
//!
//! Gatherv's messages carry each block's count before the blocks
//! ([`super::counted`]), so neither the root nor the members in between
//! need to be told the counts.

use super::{counted, Io, Machine, Output};
use crate::blocks::Blocks;
use crate::element::{as_bytes, as_bytes_mut, from_bytes, Element};
use crate::error::CollError;
use crate::group::{binomial, subtree};
use crate::wire::Kind;

/// Where a member sits in the gather (or scatter) tree.
pub(crate) struct Tree {
    pub(crate) n: u32,
    pub(crate) root: u32,
    pub(crate) rel: u32,
    /// The parent's relative index.
    pub(crate) parent: Option<u32>,
    /// The children's relative indices, nearest first.
    pub(crate) children: Vec<u32>,
}

impl Tree {
    pub(crate) fn new(n: u32, me: u32, root: u32) -> Tree {
        let rel = (me + n - root) % n;
        let (parent, children) = binomial(rel, n);
        Tree {
            n,
            root,
            rel,
            parent,
            children,
        }
    }

    /// Member index of relative index `r`.
    pub(crate) fn abs(&self, r: u32) -> u32 {
        (r + self.root) % self.n
    }

    /// Relative index of member `m`.
    pub(crate) fn rel_of(&self, m: u32) -> u32 {
        (m + self.n - self.root) % self.n
    }

    /// Whether member `m` is this member's parent.
    pub(crate) fn is_parent(&self, m: u32) -> bool {
        self.parent.map(|p| self.abs(p)) == Some(m)
    }

    /// Which child (position in `children`) member `m` is.
    pub(crate) fn child(&self, m: u32) -> Option<usize> {
        let r = self.rel_of(m);
        self.children.iter().position(|&c| c == r)
    }

    /// Blocks in this member's subtree.
    pub(crate) fn span(&self) -> usize {
        subtree(self.rel, self.n) as usize
    }

    /// Blocks in child `c`'s (relative index) subtree.
    pub(crate) fn span_of(&self, c: u32) -> usize {
        subtree(c, self.n) as usize
    }
}

/// Gather of `count` elements per member.
pub(crate) struct Gather<T: Element> {
    tree: Tree,
    /// Elements per block.
    count: usize,
    /// This member's subtree's blocks, in relative order.
    buf: Vec<T>,
    seen: Vec<bool>,
    left: usize,
    sent: bool,
    out: Option<Vec<T>>,
}

impl<T: Element> Gather<T> {
    pub(crate) fn new(n: u32, me: u32, root: u32, mine: &[T]) -> Self {
        let tree = Tree::new(n, me, root);
        let count = mine.len();
        let mut buf = vec![T::zeroed(); count * tree.span()];
        buf[..count].copy_from_slice(mine);
        Gather {
            seen: vec![false; tree.children.len()],
            left: tree.children.len(),
            tree,
            count,
            buf,
            sent: false,
            out: None,
        }
    }

    fn advance(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        if self.left > 0 || self.sent {
            return Ok(());
        }
        self.sent = true;
        if let Some(p) = self.tree.parent {
            io.send(self.tree.abs(p), 0, as_bytes(&self.buf))?;
            self.buf = Vec::new();
        } else {
            // Relative block j is member (j + root)'s: rotate by the root.
            let cut = (self.tree.n - self.tree.root) as usize * self.count;
            self.buf.rotate_left(cut);
            self.out = Some(std::mem::take(&mut self.buf));
        }
        Ok(())
    }
}

impl<T: Element> Machine for Gather<T> {
    fn kind(&self) -> Kind {
        Kind::Gather
    }

    fn start(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        self.advance(io)
    }

    fn on_message(
        &mut self,
        io: &Io<'_>,
        from: u32,
        step: u16,
        data: &[u8],
    ) -> Result<(), CollError> {
        let Some(i) = self.tree.child(from) else {
            return Err(io.unexpected(from, step, "not a child of this rank in the tree"));
        };
        if step != 0 || self.seen[i] {
            return Err(io.unexpected(from, step, "duplicate or wrong step"));
        }
        let c = self.tree.children[i];
        let len = self.tree.span_of(c) * self.count;
        let at = (c - self.tree.rel) as usize * self.count;
        let dst = as_bytes_mut(&mut self.buf[at..at + len]);
        io.check_len(from, step, data.len(), dst.len())?;
        dst.copy_from_slice(data);
        self.seen[i] = true;
        self.left -= 1;
        self.advance(io)
    }

    fn is_done(&self) -> bool {
        self.sent
    }

    fn take_output(&mut self) -> Output {
        Box::new(self.out.take().unwrap_or_default())
    }

    fn root(&self) -> Option<u32> {
        Some(self.tree.root)
    }
}

/// Gatherv: blocks of any length, their counts carried with them.
pub(crate) struct Gatherv<T: Element> {
    tree: Tree,
    mine: Vec<T>,
    /// Each child's counts and blocks, until all have come.
    got: Vec<Option<(Vec<usize>, Vec<u8>)>>,
    left: usize,
    sent: bool,
    out: Option<Blocks<T>>,
}

impl<T: Element> Gatherv<T> {
    pub(crate) fn new(n: u32, me: u32, root: u32, mine: &[T]) -> Self {
        let tree = Tree::new(n, me, root);
        Gatherv {
            got: vec![None; tree.children.len()],
            left: tree.children.len(),
            tree,
            mine: mine.to_vec(),
            sent: false,
            out: None,
        }
    }

    fn advance(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        if self.left > 0 || self.sent {
            return Ok(());
        }
        self.sent = true;
        // The subtree's counts and blocks, in relative order.
        let mut counts = vec![self.mine.len()];
        let mut bytes = as_bytes(&self.mine).to_vec();
        for (c, b) in self.got.drain(..).flatten() {
            counts.extend(c);
            bytes.extend(b);
        }
        self.mine = Vec::new();
        if let Some(p) = self.tree.parent {
            let mut msg = counted::header(&counts);
            msg.extend(bytes);
            return io.send(self.tree.abs(p), 0, &msg);
        }
        // The root: from relative into member order.
        let size = std::mem::size_of::<T>();
        let mut at = vec![0usize; counts.len() + 1];
        for (j, c) in counts.iter().enumerate() {
            at[j + 1] = at[j] + c * size;
        }
        let n = self.tree.n;
        let mut data = Vec::with_capacity(bytes.len());
        let mut member_counts = Vec::with_capacity(n as usize);
        for m in 0..n {
            let j = self.tree.rel_of(m) as usize;
            data.extend_from_slice(&bytes[at[j]..at[j + 1]]);
            member_counts.push(counts[j]);
        }
        self.out = Some(Blocks::new(from_bytes(&data), member_counts));
        Ok(())
    }
}

impl<T: Element> Machine for Gatherv<T> {
    fn kind(&self) -> Kind {
        Kind::Gatherv
    }

    fn start(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        self.advance(io)
    }

    fn on_message(
        &mut self,
        io: &Io<'_>,
        from: u32,
        step: u16,
        data: &[u8],
    ) -> Result<(), CollError> {
        let Some(i) = self.tree.child(from) else {
            return Err(io.unexpected(from, step, "not a child of this rank in the tree"));
        };
        if step != 0 || self.got[i].is_some() {
            return Err(io.unexpected(from, step, "duplicate or wrong step"));
        }
        let blocks = self.tree.span_of(self.tree.children[i]);
        let (counts, bytes) =
            counted::split(io, from, step, blocks, std::mem::size_of::<T>(), data)?;
        self.got[i] = Some((counts, bytes.to_vec()));
        self.left -= 1;
        self.advance(io)
    }

    fn is_done(&self) -> bool {
        self.sent
    }

    fn take_output(&mut self) -> Output {
        Box::new(self.out.take().unwrap_or_default())
    }

    fn root(&self) -> Option<u32> {
        Some(self.tree.root)
    }
}
