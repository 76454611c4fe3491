//! Binomial-tree broadcast: relative index `rel = me - root mod n`; a
//! rank receives from `rel - lowbit(rel)` and forwards to `rel + 2^j` for
//! the `2^j` below its lowest set bit, farthest first — from inside the
//! handler, so a forwarding rank need not be inside a collective call.

use super::{Io, Machine, Output};
use crate::element::{as_bytes, as_bytes_mut, Element};
use crate::error::CollError;
use crate::group::binomial;
use crate::wire::Kind;

pub(crate) struct Bcast<T: Element> {
    data: Vec<T>,
    n: u32,
    root: u32,
    parent: Option<u32>,
    /// Relative indices of the children, nearest first.
    children: Vec<u32>,
    done: bool,
}

impl<T: Element> Bcast<T> {
    pub(crate) fn new(n: u32, me: u32, root: u32, data: Vec<T>) -> Self {
        let rel = (me + n - root) % n;
        let (parent, children) = binomial(rel, n);
        Bcast {
            data,
            n,
            root,
            parent,
            children,
            done: false,
        }
    }

    fn forward(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        for &c in self.children.iter().rev() {
            io.send((c + self.root) % self.n, 0, as_bytes(&self.data))?;
        }
        self.done = true;
        Ok(())
    }
}

impl<T: Element> Machine for Bcast<T> {
    fn kind(&self) -> Kind {
        Kind::Bcast
    }

    fn start(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        if self.parent.is_none() {
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
        let parent = self.parent.map(|p| (p + self.root) % self.n);
        if step != 0 || parent != Some(from) {
            return Err(io.unexpected(from, step, "not from this rank's parent in the tree"));
        }
        if self.done {
            return Err(io.unexpected(from, step, "duplicate"));
        }
        let bytes = as_bytes_mut(&mut self.data);
        io.check_len(from, step, data.len(), bytes.len())?;
        bytes.copy_from_slice(data);
        self.forward(io)
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn take_output(&mut self) -> Output {
        Box::new(std::mem::take(&mut self.data))
    }

    fn root(&self) -> Option<u32> {
        Some(self.root)
    }
}
