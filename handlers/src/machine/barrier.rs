//! Message barriers (NIC-BARRIER §5.1): dissemination and pairwise exchange.
//!
//! Both carry no payload: a message for step `k` says "I reached step
//! `k`". Messages of later steps that arrive before this rank gets there
//! are remembered in a bit set (a rank can receive step `k + 1` before
//! step `k`: its partners differ per step).

use super::{Io, Machine, Output};
use crate::error::CollError;
use crate::group::{ceil_log2, pow2_floor};
use crate::wire::Kind;

/// Dissemination: step `k`, send to `me + 2^k`, wait for `me - 2^k` (mod n).
pub(crate) struct Dissemination {
    n: u32,
    me: u32,
    rounds: u32,
    /// Steps completed.
    round: u32,
    /// Steps received.
    got: u64,
}

impl Dissemination {
    pub(crate) fn new(n: u32, me: u32) -> Self {
        Dissemination {
            n,
            me,
            rounds: ceil_log2(n),
            round: 0,
            got: 0,
        }
    }

    fn advance(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        while self.round < self.rounds && self.got & (1 << self.round) != 0 {
            self.round += 1;
            if self.round < self.rounds {
                self.send_round(io)?;
            }
        }
        Ok(())
    }

    fn send_round(&self, io: &Io<'_>) -> Result<(), CollError> {
        let to = (self.me + (1 << self.round)) % self.n;
        io.send(to, self.round as u16, &[])
    }
}

impl Machine for Dissemination {
    fn kind(&self) -> Kind {
        Kind::Barrier
    }

    fn start(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        if self.rounds > 0 {
            self.send_round(io)?;
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
        if k >= self.rounds {
            return Err(io.unexpected(from, step, "no such dissemination step"));
        }
        if from != (self.me + self.n - (1 << k) % self.n) % self.n {
            return Err(io.unexpected(from, step, "not this step's sender"));
        }
        if self.got & (1 << k) != 0 {
            return Err(io.unexpected(from, step, "duplicate"));
        }
        io.check_len(from, step, data.len(), 0)?;
        self.got |= 1 << k;
        self.advance(io)
    }

    fn is_done(&self) -> bool {
        self.round == self.rounds
    }

    fn take_output(&mut self) -> Output {
        Box::new(())
    }
}

/// Pairwise exchange with pre and post steps for a non-power-of-two n:
/// step 0 = pre (`i >= M` notifies `i - M`), steps `1 ..= log2 M` the
/// exchange with `i xor 2^(k-1)`, step `log2 M + 1` = post (release).
pub(crate) struct Pairwise {
    me: u32,
    m: u32,
    log_m: u32,
    /// `me + M`, the extra rank this one serves, if any.
    extra: Option<u32>,
    /// Next step to complete (0 = waiting for pre).
    step: u32,
    got: u64,
    done: bool,
}

impl Pairwise {
    pub(crate) fn new(n: u32, me: u32) -> Self {
        let m = pow2_floor(n);
        Pairwise {
            me,
            m,
            log_m: m.trailing_zeros(),
            extra: (me + m < n).then_some(me + m),
            step: 0,
            got: 0,
            done: false,
        }
    }

    fn post(&self) -> u32 {
        self.log_m + 1
    }

    fn advance(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        if self.me >= self.m {
            // An extra rank: released by the post step.
            self.done = self.got & (1 << self.post()) != 0;
            return Ok(());
        }
        loop {
            if self.step == 0 {
                if self.extra.is_some() && self.got & 1 == 0 {
                    return Ok(());
                }
                self.step = 1;
                if self.log_m > 0 {
                    io.send(self.me ^ 1, 1, &[])?;
                }
                continue;
            }
            if self.step <= self.log_m {
                if self.got & (1 << self.step) == 0 {
                    return Ok(());
                }
                self.step += 1;
                if self.step <= self.log_m {
                    io.send(self.me ^ (1 << (self.step - 1)), self.step as u16, &[])?;
                }
                continue;
            }
            if let Some(x) = self.extra {
                io.send(x, self.post() as u16, &[])?;
            }
            self.done = true;
            return Ok(());
        }
    }
}

impl Machine for Pairwise {
    fn kind(&self) -> Kind {
        Kind::Barrier
    }

    fn start(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        if self.me >= self.m {
            io.send(self.me - self.m, 0, &[])?;
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
        let expected = if self.me >= self.m {
            (k == self.post()).then_some(self.me - self.m)
        } else if k == 0 {
            self.extra
        } else if k <= self.log_m {
            Some(self.me ^ (1 << (k - 1)))
        } else {
            None
        };
        if expected != Some(from) {
            return Err(io.unexpected(from, step, "not this step's sender"));
        }
        if self.got & (1 << k) != 0 {
            return Err(io.unexpected(from, step, "duplicate"));
        }
        io.check_len(from, step, data.len(), 0)?;
        self.got |= 1 << k;
        self.advance(io)
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn take_output(&mut self) -> Output {
        Box::new(())
    }
}
