//! Alltoall and alltoallv by direct exchange in pairwise order.
//!
//! Member `me` sends its block for member `me + s mod n` as its `s`-th
//! message, `s = 1 .. n`, all at once in `start` — the order of MPICH's
//! and Open MPI's pairwise exchange, so that at every moment each member
//! sends to a different one and no receiver is the hot spot — and takes
//! the `n - 1` blocks addressed to it in whatever order they arrive,
//! placing each by its sender. Where pairwise exchange proper waits for
//! step `s`'s block before sending step `s + 1`'s (a blocking send must
//! not deadlock), fastmsg's sends never block (a send without credit
//! parks, and progress drains it), so nothing is gained by waiting: every
//! block leaves at once and the exchange costs one message latency plus
//! `(n - 1)` blocks' transfer, instead of `n - 1` latencies. Credit-based
//! flow control bounds what is in flight per peer. Each block travels
//! once (Bruck's log-step alltoall would forward each block up to
//! ⌈log2 n⌉ times: fewer messages for tiny blocks, more bytes).
//!
//! With varying counts (alltoallv) a block's length travels as its
//! message's length: the receiver needs no counts, so members cannot
//! disagree on them.

use super::{Io, Machine, Output};
use crate::blocks::Blocks;
use crate::element::{as_bytes, as_bytes_mut, Element};
use crate::error::CollError;
use crate::wire::Kind;

/// Alltoall with `count` elements per block.
pub(crate) struct Alltoall<T: Element> {
    n: u32,
    me: u32,
    count: usize,
    /// The send buffer at first; each block is replaced by the block
    /// received from that member (this member's own stays in place).
    buf: Vec<T>,
    seen: Vec<bool>,
    left: u32,
    /// The arguments are wrong (reported by `start`, which tells the
    /// other members).
    bad: Option<String>,
}

impl<T: Element> Alltoall<T> {
    /// `send` holds `n` blocks of `send.len() / n` elements.
    pub(crate) fn new(n: u32, me: u32, send: &[T]) -> Self {
        let mut seen = vec![false; n as usize];
        seen[me as usize] = true;
        let bad = (send.len() % n as usize != 0).then(|| {
            format!(
                "alltoall: {} elements are not {n} blocks of one length",
                send.len()
            )
        });
        Alltoall {
            n,
            me,
            count: send.len() / n as usize,
            buf: send.to_vec(),
            seen,
            left: n - 1,
            bad,
        }
    }
}

impl<T: Element> Machine for Alltoall<T> {
    fn kind(&self) -> Kind {
        Kind::Alltoall
    }

    fn start(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        if let Some(why) = self.bad.take() {
            return Err(CollError::BadArgument(why));
        }
        let c = self.count;
        for s in 1..self.n {
            let to = (self.me + s) % self.n;
            let at = to as usize * c;
            io.send(to, 0, as_bytes(&self.buf[at..at + c]))?;
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
        if step != 0 || self.seen[from as usize] {
            return Err(io.unexpected(from, step, "duplicate or wrong step"));
        }
        let c = self.count;
        let at = from as usize * c;
        let dst = as_bytes_mut(&mut self.buf[at..at + c]);
        io.check_len(from, step, data.len(), dst.len())?;
        dst.copy_from_slice(data);
        self.seen[from as usize] = true;
        self.left -= 1;
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.left == 0
    }

    fn take_output(&mut self) -> Output {
        Box::new(std::mem::take(&mut self.buf))
    }
}

/// Alltoallv: blocks of any length, learnt from the messages.
pub(crate) struct Alltoallv<T: Element> {
    n: u32,
    me: u32,
    /// This member's blocks (until `start` has sent them) and where each
    /// begins (`n + 1` offsets).
    send: Vec<T>,
    offsets: Vec<usize>,
    /// The block from each member, as bytes.
    got: Vec<Option<Vec<u8>>>,
    left: u32,
    out: Option<Blocks<T>>,
    /// The arguments are wrong (reported by `start`).
    bad: Option<String>,
}

impl<T: Element> Alltoallv<T> {
    /// Block `j` of `counts[j]` elements of `send` goes to member `j`.
    pub(crate) fn new(n: u32, me: u32, send: &[T], counts: &[usize]) -> Self {
        let mut offsets = Vec::with_capacity(counts.len() + 1);
        offsets.push(0);
        let mut at = Some(0usize);
        for &c in counts {
            at = at.and_then(|a| a.checked_add(c));
            offsets.push(at.unwrap_or(0));
        }
        let mut got = vec![None; n as usize];
        let bad = if counts.len() != n as usize || at != Some(send.len()) {
            Some(format!(
                "alltoallv: {} counts adding up to {at:?} for {} elements and {n} members",
                counts.len(),
                send.len()
            ))
        } else {
            let (a, b) = (offsets[me as usize], offsets[me as usize + 1]);
            got[me as usize] = Some(as_bytes(&send[a..b]).to_vec());
            None
        };
        Alltoallv {
            n,
            me,
            send: send.to_vec(),
            offsets,
            got,
            left: n - 1,
            out: None,
            bad,
        }
    }

    fn finish(&mut self) {
        let size = std::mem::size_of::<T>();
        let counts: Vec<usize> = self
            .got
            .iter()
            .map(|b| b.as_ref().map_or(0, Vec::len) / size)
            .collect();
        let mut data = vec![T::zeroed(); counts.iter().sum()];
        let mut at = 0;
        let bytes = as_bytes_mut(&mut data);
        for b in self.got.drain(..).flatten() {
            bytes[at..at + b.len()].copy_from_slice(&b);
            at += b.len();
        }
        self.out = Some(Blocks::new(data, counts));
    }
}

impl<T: Element> Machine for Alltoallv<T> {
    fn kind(&self) -> Kind {
        Kind::Alltoallv
    }

    fn start(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        if let Some(why) = self.bad.take() {
            return Err(CollError::BadArgument(why));
        }
        for s in 1..self.n {
            let to = ((self.me + s) % self.n) as usize;
            let block = &self.send[self.offsets[to]..self.offsets[to + 1]];
            io.send(to as u32, 0, as_bytes(block))?;
        }
        self.send = Vec::new();
        if self.left == 0 {
            self.finish();
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
        if step != 0 || self.got[from as usize].is_some() || self.out.is_some() {
            return Err(io.unexpected(from, step, "duplicate or wrong step"));
        }
        if data.len() % std::mem::size_of::<T>() != 0 {
            return Err(io.unexpected(from, step, "not a whole number of elements"));
        }
        self.got[from as usize] = Some(data.to_vec());
        self.left -= 1;
        if self.left == 0 {
            self.finish();
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.out.is_some()
    }

    fn take_output(&mut self) -> Output {
        Box::new(self.out.take().unwrap_or_default())
    }
}
