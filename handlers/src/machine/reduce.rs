//! Binomial-tree reduce to a root (NIC-REDUCE §III: the tree, unexpected
//! messages buffered, several instances outstanding).
//!
//! A rank combines its own data with its children's partial results in
//! a fixed order — nearest child first, so every partial covers a
//! contiguous block of relative indices — whatever order they arrive in:
//! a child that arrives out of turn is buffered until its turn. For a
//! commutative operator the tree is rooted at the root (relative indices
//! `me - root mod n`); otherwise it is rooted at member 0, so partials
//! follow rank order, and member 0 forwards the result to the root (step
//! 1). Everything past `start` runs in the handler: a rank whose subtree
//! is late is not held inside the call (NIC-REDUCE §IV.D).

use super::{Io, Machine, Output};
use crate::element::{as_bytes, Element};
use crate::error::CollError;
use crate::group::binomial;
use crate::op::Reduce;
use crate::wire::Kind;

pub(crate) struct ReduceMachine<T: Element, R: Reduce<T>> {
    op: R,
    data: Vec<T>,
    acc: Option<Vec<T>>,
    /// Member indices of the children, in combine order.
    children: Vec<u32>,
    next: usize,
    pending: Vec<Option<Vec<u8>>>,
    parent: Option<u32>,
    /// This rank is the tree's root but not the collective's: forward.
    forward_to: Option<u32>,
    /// This rank is the collective's root but not the tree's: wait for it.
    await_from: Option<u32>,
    is_root: bool,
    /// The collective's root (member index).
    root: u32,
    sent_up: bool,
    result: Option<Vec<T>>,
}

impl<T: Element, R: Reduce<T>> ReduceMachine<T, R> {
    pub(crate) fn new(n: u32, me: u32, root: u32, data: Vec<T>, op: R) -> Self {
        let tree_root = if op.commutative() { root } else { 0 };
        let rel = (me + n - tree_root) % n;
        let (parent, children) = binomial(rel, n);
        let abs = |r: u32| (r + tree_root) % n;
        ReduceMachine {
            op,
            data,
            acc: None,
            pending: vec![None; children.len()],
            children: children.into_iter().map(abs).collect(),
            next: 0,
            parent: parent.map(abs),
            forward_to: (me == tree_root && me != root).then_some(root),
            await_from: (me == root && me != tree_root).then_some(tree_root),
            is_root: me == root,
            root,
            sent_up: false,
            result: None,
        }
    }

    /// The partial result so far.
    fn partial(&self) -> &[T] {
        self.acc.as_deref().unwrap_or(&self.data)
    }

    fn fold(&mut self, other: &[u8]) {
        let acc = self.acc.get_or_insert_with(|| self.data.clone());
        self.op.fold(acc, other, true);
    }

    fn advance(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        while self.next < self.children.len() {
            let Some(buf) = self.pending[self.next].take() else {
                return Ok(());
            };
            self.fold(&buf);
            self.next += 1;
        }
        if self.sent_up {
            return Ok(());
        }
        self.sent_up = true;
        if let Some(p) = self.parent {
            io.send(p, 0, as_bytes(self.partial()))?;
        } else if let Some(r) = self.forward_to {
            io.send(r, 1, as_bytes(self.partial()))?;
        } else if self.is_root {
            self.result = Some(self.acc.take().unwrap_or_else(|| self.data.clone()));
        }
        Ok(())
    }
}

impl<T: Element, R: Reduce<T>> Machine for ReduceMachine<T, R> {
    fn kind(&self) -> Kind {
        Kind::Reduce
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
        let want = std::mem::size_of_val(self.data.as_slice());
        if step == 1 {
            if self.await_from != Some(from) || self.result.is_some() {
                return Err(io.unexpected(from, step, "no result expected from this rank"));
            }
            io.check_len(from, step, data.len(), want)?;
            let mut r = self.data.clone();
            crate::element::as_bytes_mut(&mut r).copy_from_slice(data);
            self.result = Some(r);
            return Ok(());
        }
        let Some(c) = self.children.iter().position(|&c| c == from) else {
            return Err(io.unexpected(from, step, "not a child of this rank in the tree"));
        };
        if step != 0 || c < self.next || self.pending[c].is_some() {
            return Err(io.unexpected(from, step, "duplicate or wrong step"));
        }
        io.check_len(from, step, data.len(), want)?;
        if c == self.next {
            // Its turn: combine straight from the message.
            self.fold(data);
            self.next += 1;
        } else {
            self.pending[c] = Some(data.to_vec());
        }
        self.advance(io)
    }

    fn is_done(&self) -> bool {
        self.sent_up && (!self.is_root || self.result.is_some())
    }

    fn take_output(&mut self) -> Output {
        Box::new(match self.result.take() {
            Some(r) => r,
            None => std::mem::take(&mut self.data),
        })
    }

    fn root(&self) -> Option<u32> {
        Some(self.root)
    }
}
