//! Allgather by Bruck's algorithm: ⌈log2 n⌉ steps for any n.
//!
//! A rank keeps blocks in relative order (block `j` is member `me + j`'s).
//! In step `k` it sends its first `min(2^k, n - 2^k)` blocks to
//! `me - 2^k` and receives as many from `me + 2^k`, which land at block
//! `2^k`. A step's blocks can be placed as soon as they arrive (their place
//! does not depend on earlier steps); only sending step `k` waits for
//! steps `< k`. At the end the blocks are rotated into rank order.

use super::{Io, Machine, Output};
use crate::element::{as_bytes_mut, Element};
use crate::error::CollError;
use crate::group::ceil_log2;
use crate::wire::Kind;

pub(crate) struct Allgather<T: Element> {
    n: u32,
    me: u32,
    count: usize,
    /// Relative-order blocks, as bytes.
    buf: Vec<u8>,
    rounds: u32,
    /// Steps sent.
    sent: u32,
    /// Steps received.
    got: u64,
    out: Option<Vec<T>>,
}

impl<T: Element> Allgather<T> {
    pub(crate) fn new(n: u32, me: u32, mine: &[T]) -> Self {
        let block = std::mem::size_of_val(mine);
        let mut buf = vec![0u8; block * n as usize];
        buf[..block].copy_from_slice(bytemuck::cast_slice(mine));
        Allgather {
            n,
            me,
            count: mine.len(),
            buf,
            rounds: ceil_log2(n),
            sent: 0,
            got: 0,
            out: None,
        }
    }

    fn block(&self) -> usize {
        self.count * std::mem::size_of::<T>()
    }

    /// Blocks moved in step `k`.
    fn blocks(&self, k: u32) -> u32 {
        (1u32 << k).min(self.n - (1 << k))
    }

    fn advance(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        while self.sent < self.rounds {
            // Step k sends blocks 0 .. 2^k, complete once steps < k arrived.
            let need = (1u64 << self.sent) - 1;
            if self.got & need != need {
                return Ok(());
            }
            let k = self.sent;
            let to = (self.me + self.n - (1 << k)) % self.n;
            let len = self.blocks(k) as usize * self.block();
            io.send(to, k as u16, &self.buf[..len])?;
            self.sent += 1;
        }
        let all = (1u64 << self.rounds) - 1;
        if self.got == all && self.out.is_none() {
            let mut out = vec![T::zeroed(); self.count * self.n as usize];
            let b = self.block();
            let bytes = as_bytes_mut(&mut out);
            for j in 0..self.n as usize {
                let owner = (self.me as usize + j) % self.n as usize;
                bytes[owner * b..(owner + 1) * b].copy_from_slice(&self.buf[j * b..(j + 1) * b]);
            }
            self.out = Some(out);
        }
        Ok(())
    }
}

impl<T: Element> Machine for Allgather<T> {
    fn kind(&self) -> Kind {
        Kind::Allgather
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
        let k = u32::from(step);
        if k >= self.rounds || from != (self.me + (1 << k)) % self.n {
            return Err(io.unexpected(from, step, "not this step's sender"));
        }
        if self.got & (1 << k) != 0 {
            return Err(io.unexpected(from, step, "duplicate"));
        }
        let at = (1usize << k) * self.block();
        let len = self.blocks(k) as usize * self.block();
        io.check_len(from, step, data.len(), len)?;
        self.buf[at..at + len].copy_from_slice(data);
        self.got |= 1 << k;
        self.advance(io)
    }

    fn is_done(&self) -> bool {
        self.out.is_some()
    }

    fn take_output(&mut self) -> Output {
        Box::new(self.out.take().unwrap_or_default())
    }
}
