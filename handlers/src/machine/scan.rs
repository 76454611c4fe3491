//! Scan and exscan (inclusive and exclusive prefix reductions over
//! member order) by recursive doubling (Hillis and Steele's parallel
//! prefix, MPICH's `MPI_Scan` algorithm): ⌈log2 n⌉ steps.
//!
//! In step `k` member `i` sends its partial — `x[i - 2^k + 1] ⊕ … ⊕ x[i]`
//! (from `x[0]` where that index is below 0) — to `i + 2^k`, and combines
//! the partial it receives from `i - 2^k`, which covers the block just
//! below its own, on the left: `received ⊕ partial`. After step `k` the
//! partial covers `2^(k+1)` members; after the last it is the inclusive
//! prefix. The exclusive prefix is kept beside it: the received partials
//! alone, combined the same way (`received ⊕ exclusive`). Every combine
//! has the lower block on the left and its place in the tree depends only
//! on `n` and `i`, so the operator need not commute and floats give the
//! same bits run to run, whatever the arrival order (the association
//! differs from a left-to-right loop's, as in every parallel scan).
//!
//! Cost: ⌈log2 n⌉ message latencies; each member sends and receives at
//! most one message of the whole vector per step, and combines at most
//! one vector per step (two for exscan). A linear chain would send `n - 1`
//! messages in all, against about `n log2 n` here, but cost `n - 1`
//! latencies. Member 0 only sends, so it can finish before a member that
//! disagrees is found: a mismatch is handled as for a rooted collective.

use super::{Io, Machine, Output};
use crate::element::{as_bytes, from_bytes, Element};
use crate::error::CollError;
use crate::group::ceil_log2;
use crate::op::Reduce;
use crate::wire::Kind;

pub(crate) struct ScanMachine<T: Element, R: Reduce<T>> {
    op: R,
    n: u32,
    me: u32,
    exclusive: bool,
    /// The inclusive partial.
    acc: Vec<T>,
    /// The exclusive partial (exscan; `None` until something came).
    ex: Option<Vec<T>>,
    rounds: u32,
    /// Next step to complete.
    step: u32,
    pending: Vec<Option<Vec<u8>>>,
}

impl<T: Element, R: Reduce<T>> ScanMachine<T, R> {
    pub(crate) fn new(n: u32, me: u32, data: Vec<T>, op: R, exclusive: bool) -> Self {
        let rounds = ceil_log2(n);
        ScanMachine {
            op,
            n,
            me,
            exclusive,
            acc: data,
            ex: None,
            rounds,
            step: 0,
            pending: vec![None; rounds as usize],
        }
    }

    /// Whether a partial comes in step `k` (from `me - 2^k`).
    fn receives(&self, k: u32) -> bool {
        self.me >= 1 << k
    }

    /// Send this step's partial, if anyone is to get it.
    fn send_step(&self, io: &Io<'_>) -> Result<(), CollError> {
        if self.step < self.rounds {
            let to = u64::from(self.me) + (1u64 << self.step);
            if to < u64::from(self.n) {
                io.send(to as u32, self.step as u16, as_bytes(&self.acc))?;
            }
        }
        Ok(())
    }

    /// Combine the partial of the current step.
    fn fold(&mut self, data: &[u8]) {
        // Exscan's inclusive partial after the last step is sent nowhere.
        if !self.exclusive || self.step + 1 < self.rounds {
            self.op.fold(&mut self.acc, data, false);
        }
        if self.exclusive {
            match &mut self.ex {
                Some(ex) => self.op.fold(ex, data, false),
                None => self.ex = Some(from_bytes(data)),
            }
        }
    }

    fn advance(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        while self.step < self.rounds {
            if self.receives(self.step) {
                let Some(buf) = self.pending[self.step as usize].take() else {
                    return Ok(());
                };
                self.fold(&buf);
            }
            self.step += 1;
            self.send_step(io)?;
        }
        Ok(())
    }
}

impl<T: Element, R: Reduce<T>> Machine for ScanMachine<T, R> {
    fn kind(&self) -> Kind {
        if self.exclusive {
            Kind::Exscan
        } else {
            Kind::Scan
        }
    }

    fn start(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        self.send_step(io)?;
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
        if k >= self.rounds || !self.receives(k) || from != self.me - (1 << k) {
            return Err(io.unexpected(from, step, "not this step's sender"));
        }
        if k < self.step || self.pending[k as usize].is_some() {
            return Err(io.unexpected(from, step, "duplicate"));
        }
        io.check_len(
            from,
            step,
            data.len(),
            std::mem::size_of_val(self.acc.as_slice()),
        )?;
        if k == self.step {
            // Its turn: combine straight from the message.
            self.fold(data);
            self.step += 1;
            self.send_step(io)?;
        } else {
            self.pending[k as usize] = Some(data.to_vec());
        }
        self.advance(io)
    }

    fn is_done(&self) -> bool {
        self.step == self.rounds
    }

    fn take_output(&mut self) -> Output {
        if self.exclusive {
            Box::new(self.ex.take())
        } else {
            Box::new(std::mem::take(&mut self.acc))
        }
    }
}
