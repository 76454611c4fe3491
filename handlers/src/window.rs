//! One-sided collectives through the window every rank registers: the SMP
//! flat barrier, the hierarchical barrier and pairwise exchange by
//! `put_u64` (seed 000), and two allreduces for small data: flat (rank 0
//! combines) and recursive doubling, both by puts of data then a flag.
//!
//! Window layout (per rank; `N` ranks in the job):
//!
//! ```text
//!  0                  RELEASE   word: the master's release (SMP phase)
//!  64 + 64·r          ARRIVE(r) word, own cache line: rank r arrived (in its master's window)
//!  64·(N+1) + 8·w     PEER(w)   word: writer w's barrier number (inter-master exchange)
//!  then, if N <= 64:  IN(r)     slot of 64 + 1 KiB: a flag word, then rank r's allreduce data
//!                     OUT       slot: flag, then the allreduce result
//!                     RD(s, p)  slots: recursive-doubling step s, calls of parity p
//! ```
//!
//! Every word only grows: it holds the number (epoch) of the last
//! one-sided collective its writer reached, counted alike on every rank,
//! and readers test `>= epoch`, so consecutive collectives never confuse
//! each other and nothing is ever reset (seed 000 §6.4). The data of a
//! slot is put before its flag; the flag's `put_u64` is a Release store
//! and `read_u64` an Acquire load (the endpoint's SYNC POINT window-word),
//! so whoever sees the flag sees the data. A slot is rewritten only after
//! its reader has moved on: rank r writes IN(r) for epoch e+1 only after
//! reading the result of e, which the master publishes only after reading
//! every IN of e; the master writes OUT of e+1 only after rank r arrived at
//! e+1, i.e. after r read OUT of e. Recursive doubling alternates two
//! slot sets by call parity: a rank writes a peer's slot of parity p again
//! only two calls later, after finishing the call in between, which needed
//! every rank's input to it — given only after that peer finished (and so
//! read) the call of parity p.
//!
//! These collectives run inside the blocking call only: no handler runs
//! when a word is written, so they cannot progress inside `extract`. They
//! work on the world group, all ranks of which take part.

use crate::config::SmpDomain;
use crate::element::{as_bytes, as_bytes_mut, Element};
use crate::engine::Engine;
use crate::error::CollError;
use crate::group::pow2_floor;
use crate::op::Reduce;
use fastmsg::{Ctx, Endpoint, Rank, WindowId};
use std::rc::Rc;

/// Largest allreduce (bytes) the one-sided algorithms handle.
pub const SMP_ALLREDUCE_MAX_BYTES: usize = 1024;

/// Largest job with the one-sided allreduce areas in its window.
const SMP_ALLREDUCE_MAX_RANKS: u32 = 64;

const LINE: usize = 64;
const RELEASE: usize = 0;
/// A data slot: up to `SMP_ALLREDUCE_MAX_BYTES` of data, then its flag.
const SLOT: usize = SMP_ALLREDUCE_MAX_BYTES + LINE;

fn arrive(r: Rank) -> usize {
    LINE + LINE * r.index()
}

fn peer(size: u32, w: Rank) -> usize {
    LINE * (size as usize + 1) + 8 * w.index()
}

fn slots_at(size: u32) -> usize {
    (LINE * (size as usize + 1) + 8 * size as usize).div_ceil(LINE) * LINE
}

fn in_slot(size: u32, r: Rank) -> usize {
    slots_at(size) + SLOT * r.index()
}

fn out_slot(size: u32) -> usize {
    slots_at(size) + SLOT * size as usize
}

/// Steps of the one-sided recursive doubling: pre, log2 M exchanges, post.
fn rd_steps(size: u32) -> usize {
    pow2_floor(size).trailing_zeros() as usize + 2
}

/// The slot of recursive-doubling step `s` for calls of parity `par`.
fn rd_slot(size: u32, s: u32, par: u64) -> usize {
    out_slot(size) + SLOT * (1 + 2 * s as usize + par as usize)
}

/// A slot's flag: its first word, always (a flag placed after the data
/// would sit, for another length, inside an earlier call's data — not a
/// growing word). Small data follows on the same cache line.
fn flag_at(slot: usize) -> usize {
    slot
}

/// A slot's data.
fn data_at(slot: usize) -> usize {
    slot + 8
}

/// Bytes of the window for a job of `size` ranks.
pub(crate) fn window_bytes(size: u32) -> usize {
    let base = slots_at(size);
    if size <= SMP_ALLREDUCE_MAX_RANKS {
        base + SLOT * (size as usize + 1 + 2 * rd_steps(size))
    } else {
        base
    }
}

/// The ranks of one SMP domain and the masters of all domains.
#[derive(Debug)]
pub(crate) struct Domains {
    /// This rank's domain, master (lowest rank) first.
    mine: Vec<Rank>,
    /// Every domain's master, in rank order.
    masters: Vec<Rank>,
}

/// State of the one-sided collectives.
#[derive(Debug, Default)]
pub(crate) struct OneSided {
    /// One-sided collectives reached so far (the same count on every rank).
    epoch: u64,
    /// One-sided recursive-doubling allreduces so far (slot parity).
    rd_calls: u64,
    /// Domains per kind: SMP (the host), hierarchical, one rank each.
    smp: Option<Rc<Domains>>,
    hier: Option<Rc<Domains>>,
    single: Option<Rc<Domains>>,
    scratch: Vec<u8>,
}

/// Which domains a barrier uses.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Layout {
    /// All ranks one domain (must share a host).
    Smp,
    /// Per `CollConfig::smp_domain`.
    Hierarchical,
    /// Every rank its own domain.
    Single,
}

/// Wait until word `off` of our own window is `>= v`.
fn wait_word(
    ep: &mut Endpoint,
    ctx: &Ctx,
    win: WindowId,
    off: usize,
    v: u64,
) -> Result<(), CollError> {
    // SYNC POINT window-word (acquire side): `read_u64` Acquire-loads the
    // word a peer's `put_u64` Release-stored.
    if ctx.read_u64(win, off)? >= v {
        return Ok(());
    }
    let mut bad = None;
    ep.wait_until(|| match ctx.read_u64(win, off) {
        Ok(x) => x >= v,
        Err(e) => {
            bad = Some(e);
            true
        }
    })?;
    match bad {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

impl Engine {
    /// The domains of `layout`, computed on first use.
    fn domains(
        self: &Rc<Self>,
        ep: &mut Endpoint,
        layout: Layout,
    ) -> Result<Rc<Domains>, CollError> {
        {
            let os = self.one_sided.borrow();
            let cached = match layout {
                Layout::Smp => &os.smp,
                Layout::Hierarchical => &os.hier,
                Layout::Single => &os.single,
            };
            if let Some(d) = cached {
                return Ok(Rc::clone(d));
            }
        }
        let local = ep.local_ranks().to_vec();
        let all: Vec<Rank> = (0..self.size).map(Rank).collect();
        let d = match (layout, self.cfg.smp_domain) {
            (Layout::Single, _) => Domains {
                mine: vec![self.me],
                masters: all,
            },
            (Layout::Smp, _) => {
                if local.len() != self.size as usize {
                    return Err(CollError::Unavailable {
                        algo: "the SMP barrier",
                        why: format!(
                            "only {} of the {} ranks share this host; use the hierarchical barrier",
                            local.len(),
                            self.size
                        ),
                    });
                }
                Domains {
                    mine: all,
                    masters: vec![Rank(0)],
                }
            }
            (Layout::Hierarchical, SmpDomain::Blocks(k)) => {
                if k == 0 {
                    return Err(CollError::BadArgument("SmpDomain::Blocks(0)".into()));
                }
                let b = self.me.0 / k;
                let mine: Vec<Rank> = (b * k..((b + 1) * k).min(self.size)).map(Rank).collect();
                if let Some(r) = mine.iter().find(|r| !local.contains(r)) {
                    return Err(CollError::Unavailable {
                        algo: "the hierarchical barrier",
                        why: format!("SmpDomain::Blocks({k}) puts rank {r} on this rank's host, but it is not"),
                    });
                }
                Domains {
                    mine,
                    masters: (0..self.size).step_by(k as usize).map(Rank).collect(),
                }
            }
            (Layout::Hierarchical, SmpDomain::Host) => {
                let masters = if local.len() == self.size as usize {
                    vec![local[0]]
                } else {
                    // Several hosts: learn every rank's master.
                    let ms = self.allgather_world(ep, &[local[0].0])?;
                    let mut ms: Vec<Rank> = ms.into_iter().map(Rank).collect();
                    ms.sort_unstable();
                    ms.dedup();
                    ms
                };
                Domains {
                    mine: local,
                    masters,
                }
            }
        };
        let d = Rc::new(d);
        let mut os = self.one_sided.borrow_mut();
        let slot = match layout {
            Layout::Smp => &mut os.smp,
            Layout::Hierarchical => &mut os.hier,
            Layout::Single => &mut os.single,
        };
        *slot = Some(Rc::clone(&d));
        Ok(d)
    }

    fn next_epoch(&self) -> u64 {
        let mut os = self.one_sided.borrow_mut();
        os.epoch += 1;
        os.epoch
    }

    /// A one-sided barrier over the world (seed 000 §5).
    pub(crate) fn window_barrier(
        self: &Rc<Self>,
        ep: &mut Endpoint,
        layout: Layout,
    ) -> Result<(), CollError> {
        let d = self.domains(ep, layout)?;
        let e = self.next_epoch();
        let (win, ctx) = (self.window, ep.ctx());
        let master = d.mine[0];
        if master != self.me {
            // Raise our flag in the master's window, wait to be released.
            ep.put_u64(win, master, arrive(self.me), e)?;
            return wait_word(ep, &ctx, win, RELEASE, e);
        }
        for &r in &d.mine[1..] {
            wait_word(ep, &ctx, win, arrive(r), e)?;
        }
        self.masters_exchange(ep, &ctx, &d.masters, e)?;
        for &r in &d.mine[1..] {
            ep.put_u64(win, r, RELEASE, e)?;
        }
        Ok(())
    }

    /// Pairwise exchange among the masters by `put_u64` of the epoch into
    /// `PEER(writer)` (seed 000 §5.1, with the pre and post steps for a
    /// non-power-of-two count).
    fn masters_exchange(
        &self,
        ep: &mut Endpoint,
        ctx: &Ctx,
        masters: &[Rank],
        e: u64,
    ) -> Result<(), CollError> {
        let h = masters.len() as u32;
        if h <= 1 {
            return Ok(());
        }
        let win = self.window;
        let me = masters
            .iter()
            .position(|&r| r == self.me)
            .expect("only masters exchange") as u32;
        let m = pow2_floor(h);
        let at = |i: u32| masters[i as usize];
        if me >= m {
            ep.put_u64(win, at(me - m), peer(self.size, self.me), e)?;
            return wait_word(ep, ctx, win, peer(self.size, at(me - m)), e);
        }
        if me + m < h {
            wait_word(ep, ctx, win, peer(self.size, at(me + m)), e)?;
        }
        let mut bit = 1;
        while bit < m {
            let p = at(me ^ bit);
            ep.put_u64(win, p, peer(self.size, self.me), e)?;
            wait_word(ep, ctx, win, peer(self.size, p), e)?;
            bit <<= 1;
        }
        if me + m < h {
            ep.put_u64(win, at(me + m), peer(self.size, self.me), e)?;
        }
        Ok(())
    }

    /// Whether the one-sided allreduce can take `bytes` bytes here.
    pub(crate) fn smp_allreduce_fits(&self, ep: &Endpoint, bytes: usize) -> bool {
        bytes <= SMP_ALLREDUCE_MAX_BYTES
            && self.size <= SMP_ALLREDUCE_MAX_RANKS
            && ep.local_ranks().len() == self.size as usize
    }

    /// Flat one-sided allreduce over the world: rank 0 combines in rank
    /// order and hands everyone the same bits.
    pub(crate) fn smp_allreduce<T: Element, R: Reduce<T>>(
        self: &Rc<Self>,
        ep: &mut Endpoint,
        data: &mut [T],
        op: &R,
    ) -> Result<(), CollError> {
        let bytes = std::mem::size_of_val(data);
        if !self.smp_allreduce_fits(ep, bytes) {
            return Err(CollError::Unavailable {
                algo: "the SMP allreduce",
                why: format!(
                    "it needs all ranks on one host, at most {SMP_ALLREDUCE_MAX_RANKS} ranks and at most {SMP_ALLREDUCE_MAX_BYTES} bytes ({bytes} given)"
                ),
            });
        }
        let e = self.next_epoch();
        let (win, ctx, n) = (self.window, ep.ctx(), self.size);
        let out = out_slot(n);
        if self.me != Rank(0) {
            let slot = in_slot(n, self.me);
            ep.put(win, Rank(0), data_at(slot), as_bytes(data))?;
            ep.put_u64(win, Rank(0), flag_at(slot), e)?;
            wait_word(ep, &ctx, win, flag_at(out), e)?;
            ep.read_window(win, data_at(out), as_bytes_mut(data))?;
            return Ok(());
        }
        let mut scratch = std::mem::take(&mut self.one_sided.borrow_mut().scratch);
        scratch.resize(bytes, 0);
        for r in 1..n {
            let slot = in_slot(n, Rank(r));
            wait_word(ep, &ctx, win, flag_at(slot), e)?;
            ep.read_window(win, data_at(slot), &mut scratch)?;
            op.fold(data, &scratch, true);
        }
        self.one_sided.borrow_mut().scratch = scratch;
        for r in 1..n {
            ep.put(win, Rank(r), data_at(out), as_bytes(data))?;
            ep.put_u64(win, Rank(r), flag_at(out), e)?;
        }
        Ok(())
    }

    /// One-sided recursive doubling over the world (see
    /// `machine::allreduce` for the folding of a non-power-of-two count):
    /// each step puts the partial and a flag into the partner's slot and
    /// waits for the partner's; lower block ⊕ upper block on both sides.
    pub(crate) fn onesided_allreduce<T: Element, R: Reduce<T>>(
        self: &Rc<Self>,
        ep: &mut Endpoint,
        data: &mut [T],
        op: &R,
    ) -> Result<(), CollError> {
        let bytes = std::mem::size_of_val(data);
        if bytes > SMP_ALLREDUCE_MAX_BYTES || self.size > SMP_ALLREDUCE_MAX_RANKS {
            return Err(CollError::Unavailable {
                algo: "the one-sided allreduce",
                why: format!(
                    "it needs at most {SMP_ALLREDUCE_MAX_RANKS} ranks and at most {SMP_ALLREDUCE_MAX_BYTES} bytes ({bytes} given)"
                ),
            });
        }
        let (e, par) = {
            let mut os = self.one_sided.borrow_mut();
            os.epoch += 1;
            os.rd_calls += 1;
            (os.epoch, os.rd_calls & 1)
        };
        let (win, ctx, n, me) = (self.window, ep.ctx(), self.size, self.me.0);
        let m = pow2_floor(n);
        let r = n - m;
        let log_m = m.trailing_zeros();
        let post = log_m + 1;
        let mut scratch = std::mem::take(&mut self.one_sided.borrow_mut().scratch);
        scratch.resize(bytes, 0);
        let send = |ep: &mut Endpoint, to: u32, s: u32, d: &[T]| -> Result<(), CollError> {
            let slot = rd_slot(n, s, par);
            ep.put(win, Rank(to), data_at(slot), as_bytes(d))?;
            ep.put_u64(win, Rank(to), flag_at(slot), e)?;
            Ok(())
        };
        let recv = |ep: &mut Endpoint, s: u32, buf: &mut [u8]| -> Result<(), CollError> {
            let slot = rd_slot(n, s, par);
            wait_word(ep, &ctx, win, flag_at(slot), e)?;
            ep.read_window(win, data_at(slot), buf)?;
            Ok(())
        };
        let result = (|| {
            let j = if me < 2 * r {
                if me % 2 == 0 {
                    send(ep, me + 1, 0, data)?;
                    recv(ep, post, as_bytes_mut(data))?;
                    return Ok(());
                }
                recv(ep, 0, &mut scratch)?;
                op.fold(data, &scratch, false);
                me / 2
            } else {
                me - r
            };
            let old = |p: u32| if p < r { 2 * p + 1 } else { p + r };
            for k in 1..=log_m {
                let p = j ^ (1 << (k - 1));
                send(ep, old(p), k, data)?;
                recv(ep, k, &mut scratch)?;
                op.fold(data, &scratch, p > j);
            }
            if me < 2 * r {
                send(ep, me - 1, post, data)?;
            }
            Ok(())
        })();
        self.one_sided.borrow_mut().scratch = scratch;
        result
    }
}
