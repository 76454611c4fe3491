//! Allreduce by messages: recursive doubling, or reduce then broadcast.
//!
//! Recursive doubling with MPICH's folding for a non-power-of-two n: with
//! `M` the largest power of two `<= n` and `r = n - M`, the first `2r`
//! members pair up, even `2i` sending its data to odd `2i + 1`
//! (step 0), which combines `x[2i] ⊕ x[2i+1]` and takes part as new index
//! `i`; members `>= 2r` take part as `me - r`. In exchange step `k` new
//! indices `j` and `j xor 2^(k-1)` swap partials, each covering a
//! contiguous block of ranks, and both compute *lower block ⊕ upper
//! block* — the same bits on both sides. At the end each odd member hands
//! the result to its even partner (the post step). So every rank ends
//! with identical bits, in rank order.

use super::bcast::Bcast;
use super::reduce::ReduceMachine;
use super::{Io, Machine, Output};
use crate::element::{as_bytes, as_bytes_mut, Element};
use crate::error::CollError;
use crate::group::pow2_floor;
use crate::op::Reduce;
use crate::wire::Kind;

pub(crate) struct RecursiveDoubling<T: Element, R: Reduce<T>> {
    op: R,
    acc: Vec<T>,
    me: u32,
    r: u32,
    log_m: u32,
    /// Index among the `M` exchanging members (None: folded away).
    new: Option<u32>,
    /// Next step to complete.
    step: u32,
    pending: Vec<Option<Vec<u8>>>,
    done: bool,
}

impl<T: Element, R: Reduce<T>> RecursiveDoubling<T, R> {
    pub(crate) fn new(n: u32, me: u32, data: Vec<T>, op: R) -> Self {
        let m = pow2_floor(n);
        let r = n - m;
        let log_m = m.trailing_zeros();
        let new = if me < 2 * r {
            (me % 2 == 1).then_some(me / 2)
        } else {
            Some(me - r)
        };
        RecursiveDoubling {
            op,
            acc: data,
            me,
            r,
            log_m,
            new,
            step: 0,
            pending: vec![None; log_m as usize + 2],
            done: false,
        }
    }

    fn post(&self) -> u32 {
        self.log_m + 1
    }

    /// Old index of new index `j`.
    fn old(&self, j: u32) -> u32 {
        if j < self.r {
            2 * j + 1
        } else {
            j + self.r
        }
    }

    /// Exchange partner (old index) of step `k` (1 ..= log M), and whether
    /// its block lies above ours.
    fn partner(&self, k: u32) -> (u32, bool) {
        let j = self.new.unwrap_or(0);
        let p = j ^ (1 << (k - 1));
        (self.old(p), p > j)
    }

    /// Combine the partner's data of the current step.
    fn fold(&mut self, data: &[u8]) {
        let acc_left = match self.step {
            0 => false, // the even partner's data is the lower block
            k => self.partner(k).1,
        };
        self.op.fold(&mut self.acc, data, acc_left);
    }

    fn advance(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        if self.new.is_none() {
            // Folded away: released by the post step.
            let post = self.post() as usize;
            if let Some(buf) = self.pending[post].take() {
                as_bytes_mut(&mut self.acc).copy_from_slice(&buf);
                self.done = true;
            }
            return Ok(());
        }
        loop {
            if self.step == 0 {
                if self.me < 2 * self.r {
                    let Some(buf) = self.pending[0].take() else {
                        return Ok(());
                    };
                    self.fold(&buf);
                }
                self.step = 1;
                self.send_step(io)?;
                continue;
            }
            if self.step <= self.log_m {
                let Some(buf) = self.pending[self.step as usize].take() else {
                    return Ok(());
                };
                self.fold(&buf);
                self.step += 1;
                self.send_step(io)?;
                continue;
            }
            if self.me < 2 * self.r {
                io.send(self.me - 1, self.post() as u16, as_bytes(&self.acc))?;
            }
            self.done = true;
            return Ok(());
        }
    }

    fn send_step(&self, io: &Io<'_>) -> Result<(), CollError> {
        if self.step <= self.log_m {
            io.send(
                self.partner(self.step).0,
                self.step as u16,
                as_bytes(&self.acc),
            )?;
        }
        Ok(())
    }

    fn expected_sender(&self, k: u32) -> Option<u32> {
        match self.new {
            None => (k == self.post()).then(|| self.me + 1),
            Some(_) if k == 0 => (self.me < 2 * self.r).then(|| self.me - 1),
            Some(_) if k <= self.log_m => Some(self.partner(k).0),
            Some(_) => None,
        }
    }
}

impl<T: Element, R: Reduce<T>> Machine for RecursiveDoubling<T, R> {
    fn kind(&self) -> Kind {
        Kind::Allreduce
    }

    fn start(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        if self.new.is_none() {
            io.send(self.me + 1, 0, as_bytes(&self.acc))?;
        }
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
        if self.expected_sender(k) != Some(from) {
            return Err(io.unexpected(from, step, "not this step's sender"));
        }
        if k < self.step || self.pending[k as usize].is_some() || self.done {
            return Err(io.unexpected(from, step, "duplicate"));
        }
        io.check_len(
            from,
            step,
            data.len(),
            std::mem::size_of_val(self.acc.as_slice()),
        )?;
        if k == self.step && self.new.is_some() && (k > 0 || self.me < 2 * self.r) {
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
        self.done
    }

    fn take_output(&mut self) -> Output {
        Box::new(std::mem::take(&mut self.acc))
    }
}

/// Binomial reduce to member 0 (steps 0–1), then binomial broadcast from
/// it (step 2): 2⌈log2 n⌉ steps, rank order, identical bits everywhere.
pub(crate) struct ReduceBcast<T: Element, R: Reduce<T>> {
    n: u32,
    me: u32,
    reduce: ReduceMachine<T, R>,
    bcast: Option<Bcast<T>>,
}

impl<T: Element, R: Reduce<T>> ReduceBcast<T, R> {
    pub(crate) fn new(n: u32, me: u32, data: Vec<T>, op: R) -> Self {
        ReduceBcast {
            n,
            me,
            reduce: ReduceMachine::new(n, me, 0, data, op),
            bcast: None,
        }
    }

    fn advance(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        if self.bcast.is_none() && self.reduce.is_done() {
            let Ok(v) = self.reduce.take_output().downcast::<Vec<T>>() else {
                unreachable!("a reduce machine outputs Vec<T>")
            };
            // Non-roots get their own data back: the broadcast overwrites it.
            let mut b = Bcast::new(self.n, self.me, 0, *v);
            b.start(&io.phase(2))?;
            self.bcast = Some(b);
        }
        Ok(())
    }
}

impl<T: Element, R: Reduce<T>> Machine for ReduceBcast<T, R> {
    fn kind(&self) -> Kind {
        Kind::Allreduce
    }

    fn start(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        self.reduce.start(io)?;
        self.advance(io)
    }

    fn on_message(
        &mut self,
        io: &Io<'_>,
        from: u32,
        step: u16,
        data: &[u8],
    ) -> Result<(), CollError> {
        if step < 2 {
            if self.bcast.is_some() {
                return Err(io.unexpected(from, step, "reduce phase already over"));
            }
            self.reduce.on_message(io, from, step, data)?;
            return self.advance(io);
        }
        match &mut self.bcast {
            Some(b) => b.on_message(&io.phase(2), from, step - 2, data),
            None => Err(io.unexpected(from, step, "broadcast before the reduce finished")),
        }
    }

    fn is_done(&self) -> bool {
        self.bcast.as_ref().is_some_and(Bcast::is_done)
    }

    fn take_output(&mut self) -> Output {
        match &mut self.bcast {
            Some(b) => b.take_output(),
            None => Box::new(Vec::<T>::new()),
        }
    }
}
