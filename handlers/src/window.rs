//! One-sided collectives through the window every rank registers: the SMP
//! flat barrier, the hierarchical barrier and pairwise exchange by
//! `put_u64` (VIA-BARRIER), the all-to-all barrier (every rank's flag in
//! every other rank's window, one step), and three allreduces for small
//! data: flat (rank 0 combines), recursive doubling and all-to-all (every
//! rank combines everyone's data in rank order), all by puts of data then
//! a flag.
//!
//! Window layout (per rank; `N` ranks in the job): one *slot* per writer
//! and epoch parity,
//!
//! ```text
//!  SLOT(w, p) at (2·w + p) · S     w: the writing rank, p: epoch mod 2
//!     +0   flag word: epoch << 24 | signature (24 bits, below)
//!     +8   data (allreduce; only if N <= 64, where S = 64 + 1 KiB; else S = 64)
//! ```
//!
//! Every algorithm here writes a given reader at most once per collective
//! (epoch), so one slot per writer suffices; the reader knows whom it
//! waits for at each step. The data of a slot is put before its flag; the
//! flag's `put_u64` is a Release store and `read_u64` an Acquire load (the
//! endpoint's SYNC POINT window-word), so whoever sees the flag sees the
//! data. Slots alternate by epoch parity: a writer writes a reader's slot
//! of parity `p` again only two collectives later, having finished the one
//! in between — which needed every rank to take part in it, hence the
//! reader to have finished (and read) the earlier one. So a flag word only
//! grows, is never reset, and the reader of epoch `e` finds exactly `e`
//! in it once written (VIA-BARRIER §6.4's growing barrier numbers).
//!
//! The 24 signature bits say what the writer is doing — which one-sided
//! algorithm, element type, operator and byte length — and the reader
//! compares them with its own call: a difference is
//! [`CollError::ArgsMismatch`], never a silent wrong answer. Each call
//! also takes a placeholder instance number in the engine (no message may
//! match it, so a member calling a message collective at the same point
//! fails), and a failure aborts the instance on every member by message
//! (see [`crate::engine`]), which ends their waits too.
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
use crate::sig::{op_code, type_code, Sig, ONE_SIDED};
use crate::wire::Kind;
use fastmsg::error::PutError;
use fastmsg::{Ctx, Endpoint, Rank, WindowId};
use std::rc::Rc;

/// Largest allreduce (bytes) the one-sided algorithms handle.
pub const SMP_ALLREDUCE_MAX_BYTES: usize = 1024;

/// Largest job with the one-sided allreduce areas in its window.
const SMP_ALLREDUCE_MAX_RANKS: u32 = 64;

/// Largest job on which the `Auto` barrier of ranks that share cores is
/// the all-to-all one (N − 1 flags stored and read per rank); past it, the
/// flat SMP barrier.
pub(crate) const ALL_TO_ALL_MAX_RANKS: u32 = 64;

const LINE: usize = 64;

/// Bytes of one slot.
fn slot_bytes(size: u32) -> usize {
    if size <= SMP_ALLREDUCE_MAX_RANKS {
        SMP_ALLREDUCE_MAX_BYTES + LINE
    } else {
        LINE
    }
}

/// Writer `w`'s slot for epoch `e`, in the reader's window.
fn slot(size: u32, w: Rank, e: u64) -> usize {
    (2 * w.index() + (e & 1) as usize) * slot_bytes(size)
}

/// A slot's flag: its first word (small data follows on the same line).
fn flag_at(slot: usize) -> usize {
    slot
}

/// A slot's data.
fn data_at(slot: usize) -> usize {
    slot + 8
}

/// Bytes of the window for a job of `size` ranks.
pub(crate) fn window_bytes(size: u32) -> usize {
    2 * size as usize * slot_bytes(size)
}

/// Which one-sided algorithm a flag comes from (3 bits of its signature).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Algo {
    SmpBarrier = 1,
    HierarchicalBarrier = 2,
    OneSidedBarrier = 3,
    SmpAllreduce = 4,
    RdAllreduce = 5,
    AllToAllBarrier = 6,
    AllToAllAllreduce = 7,
}

impl Algo {
    fn from_code(code: u32) -> Option<Algo> {
        Some(match code {
            1 => Algo::SmpBarrier,
            2 => Algo::HierarchicalBarrier,
            3 => Algo::OneSidedBarrier,
            4 => Algo::SmpAllreduce,
            5 => Algo::RdAllreduce,
            6 => Algo::AllToAllBarrier,
            7 => Algo::AllToAllAllreduce,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Algo::SmpBarrier => "the SMP barrier",
            Algo::HierarchicalBarrier => "the hierarchical barrier",
            Algo::OneSidedBarrier => "the one-sided barrier",
            Algo::SmpAllreduce => "the SMP allreduce",
            Algo::RdAllreduce => "the one-sided allreduce",
            Algo::AllToAllBarrier => "the all-to-all barrier",
            Algo::AllToAllAllreduce => "the all-to-all allreduce",
        }
    }

    fn is_allreduce(self) -> bool {
        matches!(
            self,
            Algo::SmpAllreduce | Algo::RdAllreduce | Algo::AllToAllAllreduce
        )
    }
}

/// The 24 signature bits of a one-sided call: algorithm (3 bits), element
/// type (4), operator (3), byte length (11, up to 1 KiB).
fn sig24(algo: Algo, ty: u8, op: u8, bytes: usize) -> u32 {
    u32::from(algo as u8) << 18
        | u32::from(ty & 15) << 14
        | u32::from(op & 7) << 11
        | (bytes.min(0x7ff) as u32)
}

/// A one-sided call's signature in words (for errors).
fn describe24(sig: u32) -> String {
    let Some(algo) = Algo::from_code(sig >> 18) else {
        return "an unknown one-sided collective".to_owned();
    };
    if algo.is_allreduce() {
        let ty = ((sig >> 14) & 15) as u16;
        let op = ((sig >> 11) & 7) as u16;
        let detail = Sig(ty << 10 | op << 7).describe(Kind::Allreduce as u8);
        let detail = detail
            .split_once(", ")
            .map_or(String::new(), |(_, d)| format!(", {d}"));
        format!("{}{detail}, {} bytes", algo.name(), sig & 0x7ff)
    } else {
        algo.name().to_owned()
    }
}

/// How many polls of a waiting flag between two scans of every slot.
const SCAN_EVERY: u32 = 64;

/// The flags of one one-sided call: its epoch and signature, and the
/// placeholder instance that a member's abort fails.
struct Flags {
    win: WindowId,
    ctx: Ctx,
    size: u32,
    epoch: u64,
    sig: u32,
    seq: u32,
}

impl Flags {
    fn word(&self) -> u64 {
        self.epoch << 24 | u64::from(self.sig)
    }

    /// Put our flag into `dest`'s slot for us (after any data).
    fn raise(&self, ep: &mut Endpoint, dest: Rank, me: Rank) -> Result<(), CollError> {
        let at = flag_at(slot(self.size, me, self.epoch));
        ep.put_u64(self.win, dest, at, self.word())?;
        Ok(())
    }

    /// Put `data` then our flag into `dest`'s slot for us.
    fn send(&self, ep: &mut Endpoint, dest: Rank, me: Rank, data: &[u8]) -> Result<(), CollError> {
        ep.put(
            self.win,
            dest,
            data_at(slot(self.size, me, self.epoch)),
            data,
        )?;
        self.raise(ep, dest, me)
    }

    /// Wait for `from`'s flag of this epoch in our window and check its
    /// signature against ours; stop if a member aborted the call.
    fn wait(&self, eng: &Engine, ep: &mut Endpoint, from: Rank) -> Result<(), CollError> {
        self.wait_all(eng, ep, &[from])
    }

    /// Wait for the flags of this epoch of every rank in `from`, checking
    /// each one's signature against ours, in one wait (the wait policy
    /// spins, yields and sleeps once for all of them); stop if a member
    /// aborted the call. While waiting, every [`SCAN_EVERY`] polls, look
    /// at every writer's slot of this epoch: a member that runs another
    /// one-sided collective may write to us although we wait for someone
    /// else (then nobody would ever write what anybody waits for).
    fn wait_all(&self, eng: &Engine, ep: &mut Endpoint, from: &[Rank]) -> Result<(), CollError> {
        let mut next = 0;
        let mut odd = self.poll(from, &mut next)?;
        if odd.is_none() && next < from.len() {
            let mut bad = None;
            let mut polls = 0u32;
            let mut gave_up = false;
            let mut stall = crate::stall::StallWatch::new(eng.warn_after);
            let me = ep.rank();
            let waited = ep.wait_until(|| {
                match self.poll(from, &mut next) {
                    Ok(Some(o)) => {
                        odd = Some(o);
                        return true;
                    }
                    Ok(None) if next == from.len() => return true,
                    Ok(None) => {}
                    Err(e) => {
                        bad = Some(e);
                        return true;
                    }
                }
                // Now and then (nothing here is latency-critical): did a
                // member abort the call, does a member run another one?
                polls = polls.wrapping_add(1);
                if polls % SCAN_EVERY == 0 {
                    gave_up = eng.one_sided_failed(self.seq);
                    odd = self.scan();
                    stall.tick(|| {
                        let waits_for = from.get(next).map_or(String::new(), |r| {
                            format!(" (the flag it looks for now: rank {r}'s)")
                        });
                        format!(
                            "rank {me} has waited in one-sided collective #{} of the world group{waits_for}",
                            self.seq
                        )
                    });
                }
                gave_up || odd.is_some()
            });
            if let Some(e) = eng.one_sided_failure(self.seq) {
                return Err(e);
            }
            waited?;
            if let Some(e) = bad {
                return Err(e.into());
            }
        }
        match odd {
            Some((src, theirs)) => Err(CollError::ArgsMismatch {
                group: 0,
                seq: self.seq,
                ours: describe24(self.sig),
                theirs: describe24(theirs),
                src,
            }),
            None => Ok(()),
        }
    }

    /// Move `next` past the writers of `from` whose flag of this epoch is
    /// up; a writer whose flag says it runs another call stops it.
    fn poll(&self, from: &[Rank], next: &mut usize) -> Result<Option<(Rank, u32)>, PutError> {
        let want = self.epoch << 24;
        while let Some(&w) = from.get(*next) {
            // SYNC POINT window-word (acquire side): `read_u64`
            // Acquire-loads the word a peer's `put_u64` Release-stored.
            let word = self
                .ctx
                .read_u64(self.win, flag_at(slot(self.size, w, self.epoch)))?;
            if word < want {
                return Ok(None);
            }
            let theirs = (word & 0xff_ffff) as u32;
            if word >> 24 == self.epoch && theirs != self.sig {
                return Ok(Some((w, theirs)));
            }
            *next += 1;
        }
        Ok(None)
    }

    /// A writer whose flag of this epoch says it runs another call.
    fn scan(&self) -> Option<(Rank, u32)> {
        (0..self.size).map(Rank).find_map(|w| {
            let at = flag_at(slot(self.size, w, self.epoch));
            let word = self.ctx.read_u64(self.win, at).ok()?;
            let theirs = (word & 0xff_ffff) as u32;
            (word >> 24 == self.epoch && theirs != self.sig).then_some((w, theirs))
        })
    }

    /// Wait for `from`'s data and flag, then copy the data out.
    fn recv(
        &self,
        eng: &Engine,
        ep: &mut Endpoint,
        from: Rank,
        buf: &mut [u8],
    ) -> Result<(), CollError> {
        self.wait(eng, ep, from)?;
        ep.read_window(self.win, data_at(slot(self.size, from, self.epoch)), buf)?;
        Ok(())
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
    /// Domains per kind: SMP (the host), hierarchical, one rank each.
    smp: Option<Rc<Domains>>,
    hier: Option<Rc<Domains>>,
    single: Option<Rc<Domains>>,
    scratch: Vec<u8>,
    /// Every other rank, from the next one up (the all-to-all algorithms).
    peers: Option<Rc<[Rank]>>,
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
                    let ms = self.allgather_world(ep, &[local[0].0], Kind::Barrier)?;
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

    /// Begin a one-sided call: the next epoch, and a placeholder instance
    /// (world group) for the abort path.
    #[inline]
    fn begin_flags(
        self: &Rc<Self>,
        ep: &Endpoint,
        kind: Kind,
        placeholder: Sig,
        sig: u32,
    ) -> Result<Flags, CollError> {
        let seq = self.begin_one_sided(&ep.ctx(), kind, placeholder)?;
        let mut os = self.one_sided.borrow_mut();
        os.epoch += 1;
        Ok(Flags {
            win: self.window,
            ctx: ep.ctx(),
            size: self.size,
            epoch: os.epoch,
            sig,
            seq,
        })
    }

    /// A one-sided barrier over the world (VIA-BARRIER §5).
    pub(crate) fn window_barrier(
        self: &Rc<Self>,
        ep: &mut Endpoint,
        layout: Layout,
    ) -> Result<(), CollError> {
        let d = self.domains(ep, layout)?;
        let algo = match layout {
            Layout::Smp => Algo::SmpBarrier,
            Layout::Hierarchical => Algo::HierarchicalBarrier,
            Layout::Single => Algo::OneSidedBarrier,
        };
        let placeholder = Sig::new(ONE_SIDED, 0, 0, None);
        let f = self.begin_flags(ep, Kind::Barrier, placeholder, sig24(algo, 0, 0, 0))?;
        let r = self.barrier_steps(ep, &f, &d);
        self.end_one_sided(&f.ctx, f.seq, r)
    }

    fn barrier_steps(&self, ep: &mut Endpoint, f: &Flags, d: &Domains) -> Result<(), CollError> {
        let me = self.me;
        let master = d.mine[0];
        if master != me {
            // Raise our flag in the master's window, wait to be released.
            f.raise(ep, master, me)?;
            return f.wait(self, ep, master);
        }
        for &r in &d.mine[1..] {
            f.wait(self, ep, r)?;
        }
        self.masters_exchange(ep, f, &d.masters)?;
        for &r in &d.mine[1..] {
            f.raise(ep, r, me)?;
        }
        Ok(())
    }

    /// Pairwise exchange among the masters by flags (VIA-BARRIER §5.1, with
    /// the pre and post steps for a non-power-of-two count).
    fn masters_exchange(
        &self,
        ep: &mut Endpoint,
        f: &Flags,
        masters: &[Rank],
    ) -> Result<(), CollError> {
        let h = masters.len() as u32;
        if h <= 1 {
            return Ok(());
        }
        let me = masters
            .iter()
            .position(|&r| r == self.me)
            .expect("only masters exchange") as u32;
        let m = pow2_floor(h);
        let at = |i: u32| masters[i as usize];
        if me >= m {
            f.raise(ep, at(me - m), self.me)?;
            return f.wait(self, ep, at(me - m));
        }
        if me + m < h {
            f.wait(self, ep, at(me + m))?;
        }
        let mut bit = 1;
        while bit < m {
            let p = at(me ^ bit);
            f.raise(ep, p, self.me)?;
            f.wait(self, ep, p)?;
            bit <<= 1;
        }
        if me + m < h {
            f.raise(ep, at(me + m), self.me)?;
        }
        Ok(())
    }

    /// Whether the one-sided allreduce can take `bytes` bytes here.
    pub(crate) fn smp_allreduce_fits(&self, ep: &Endpoint, bytes: usize) -> bool {
        bytes <= SMP_ALLREDUCE_MAX_BYTES
            && self.size <= SMP_ALLREDUCE_MAX_RANKS
            && ep.local_ranks().len() == self.size as usize
    }

    fn allreduce_flags<T: Element, R: Reduce<T>>(
        self: &Rc<Self>,
        ep: &Endpoint,
        algo: Algo,
        op: &R,
        bytes: usize,
    ) -> Result<Flags, CollError> {
        let (ty, opc) = (type_code::<T>(), op_code(op));
        let placeholder = Sig::new(ONE_SIDED, ty, opc, None);
        self.begin_flags(
            ep,
            Kind::Allreduce,
            placeholder,
            sig24(algo, ty, opc, bytes),
        )
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
        let f = self.allreduce_flags(ep, Algo::SmpAllreduce, op, bytes)?;
        let r = self.smp_allreduce_steps(ep, &f, data, op);
        self.end_one_sided(&f.ctx, f.seq, r)
    }

    fn smp_allreduce_steps<T: Element, R: Reduce<T>>(
        &self,
        ep: &mut Endpoint,
        f: &Flags,
        data: &mut [T],
        op: &R,
    ) -> Result<(), CollError> {
        let (n, me) = (self.size, self.me);
        if me != Rank(0) {
            f.send(ep, Rank(0), me, as_bytes(data))?;
            return f.recv(self, ep, Rank(0), as_bytes_mut(data));
        }
        let mut scratch = std::mem::take(&mut self.one_sided.borrow_mut().scratch);
        scratch.resize(std::mem::size_of_val(data), 0);
        let mut result = Ok(());
        for r in 1..n {
            result = f.recv(self, ep, Rank(r), &mut scratch);
            if result.is_err() {
                break;
            }
            op.fold(data, &scratch, true);
        }
        self.one_sided.borrow_mut().scratch = scratch;
        result?;
        for r in 1..n {
            f.send(ep, Rank(r), me, as_bytes(data))?;
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
        self.check_smp_allreduce("the one-sided allreduce", bytes)?;
        let f = self.allreduce_flags(ep, Algo::RdAllreduce, op, bytes)?;
        let mut scratch = std::mem::take(&mut self.one_sided.borrow_mut().scratch);
        scratch.resize(bytes, 0);
        let r = self.rd_steps(ep, &f, data, op, &mut scratch);
        self.one_sided.borrow_mut().scratch = scratch;
        self.end_one_sided(&f.ctx, f.seq, r)
    }

    fn rd_steps<T: Element, R: Reduce<T>>(
        &self,
        ep: &mut Endpoint,
        f: &Flags,
        data: &mut [T],
        op: &R,
        scratch: &mut [u8],
    ) -> Result<(), CollError> {
        let (n, me) = (self.size, self.me.0);
        let m = pow2_floor(n);
        let r = n - m;
        let log_m = m.trailing_zeros();
        let j = if me < 2 * r {
            if me % 2 == 0 {
                f.send(ep, Rank(me + 1), self.me, as_bytes(data))?;
                return f.recv(self, ep, Rank(me + 1), as_bytes_mut(data));
            }
            f.recv(self, ep, Rank(me - 1), scratch)?;
            op.fold(data, scratch, false);
            me / 2
        } else {
            me - r
        };
        let old = |p: u32| if p < r { 2 * p + 1 } else { p + r };
        for k in 1..=log_m {
            let p = j ^ (1 << (k - 1));
            f.send(ep, Rank(old(p)), self.me, as_bytes(data))?;
            f.recv(self, ep, Rank(old(p)), scratch)?;
            op.fold(data, scratch, p > j);
        }
        if me < 2 * r {
            f.send(ep, Rank(me - 1), self.me, as_bytes(data))?;
        }
        Ok(())
    }

    /// Refuse an allreduce through the window flags that the window cannot
    /// hold: more than `SMP_ALLREDUCE_MAX_RANKS` ranks or
    /// `SMP_ALLREDUCE_MAX_BYTES` bytes.
    fn check_smp_allreduce(&self, algo: &'static str, bytes: usize) -> Result<(), CollError> {
        if bytes > SMP_ALLREDUCE_MAX_BYTES || self.size > SMP_ALLREDUCE_MAX_RANKS {
            return Err(CollError::Unavailable {
                algo,
                why: format!(
                    "it needs at most {SMP_ALLREDUCE_MAX_RANKS} ranks and at most {SMP_ALLREDUCE_MAX_BYTES} bytes ({bytes} given)"
                ),
            });
        }
        Ok(())
    }

    /// Every other rank, from the next one up, wrapping around.
    fn peers(&self) -> Rc<[Rank]> {
        let mut os = self.one_sided.borrow_mut();
        let (n, me) = (self.size, self.me.0);
        Rc::clone(
            os.peers
                .get_or_insert_with(|| (1..n).map(|i| Rank((me + i) % n)).collect()),
        )
    }

    /// The all-to-all barrier: raise our flag in every other rank's
    /// window, then wait, once, for every other rank's flag in ours. One
    /// step and no master: each rank is released the moment it runs after
    /// the last arrival, which is what ranks sharing cores need (no rank
    /// has to be scheduled again to pass the news on).
    pub(crate) fn all_to_all_barrier(self: &Rc<Self>, ep: &mut Endpoint) -> Result<(), CollError> {
        let peers = self.peers();
        let placeholder = Sig::new(ONE_SIDED, 0, 0, None);
        let sig = sig24(Algo::AllToAllBarrier, 0, 0, 0);
        let f = self.begin_flags(ep, Kind::Barrier, placeholder, sig)?;
        let r = peers
            .iter()
            .try_for_each(|&p| f.raise(ep, p, self.me))
            .and_then(|()| f.wait_all(self, ep, &peers));
        self.end_one_sided(&f.ctx, f.seq, r)
    }

    /// The all-to-all allreduce: put our data and flag into every other
    /// rank's window, wait once for everyone's, and combine all of them in
    /// rank order (the same order, hence the same bits, on every rank).
    pub(crate) fn all_to_all_allreduce<T: Element, R: Reduce<T>>(
        self: &Rc<Self>,
        ep: &mut Endpoint,
        data: &mut [T],
        op: &R,
    ) -> Result<(), CollError> {
        let bytes = std::mem::size_of_val(data);
        self.check_smp_allreduce("the all-to-all allreduce", bytes)?;
        let peers = self.peers();
        let f = self.allreduce_flags(ep, Algo::AllToAllAllreduce, op, bytes)?;
        let mut scratch = std::mem::take(&mut self.one_sided.borrow_mut().scratch);
        scratch.resize(2 * bytes, 0);
        let r = self.all_to_all_steps(ep, &f, &peers, data, op, &mut scratch);
        self.one_sided.borrow_mut().scratch = scratch;
        self.end_one_sided(&f.ctx, f.seq, r)
    }

    fn all_to_all_steps<T: Element, R: Reduce<T>>(
        &self,
        ep: &mut Endpoint,
        f: &Flags,
        peers: &[Rank],
        data: &mut [T],
        op: &R,
        scratch: &mut [u8],
    ) -> Result<(), CollError> {
        for &p in peers {
            f.send(ep, p, self.me, as_bytes(data))?;
        }
        f.wait_all(self, ep, peers)?;
        let (mine, theirs) = scratch.split_at_mut(std::mem::size_of_val(data));
        mine.copy_from_slice(as_bytes(data));
        // x[0] ⊕ x[1] ⊕ … ⊕ x[n-1], left to right.
        for r in 0..self.size {
            let x: &[u8] = if Rank(r) == self.me {
                mine
            } else {
                let at = data_at(slot(self.size, Rank(r), f.epoch));
                ep.read_window(self.window, at, theirs)?;
                theirs
            };
            if r == 0 {
                as_bytes_mut(data).copy_from_slice(x);
            } else {
                op.fold(data, x, true);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_do_not_overlap_and_signatures_tell_calls_apart() {
        for size in [1, 2, 3, 64, 65, 200] {
            let s = slot_bytes(size);
            assert_eq!(s % LINE, 0);
            assert_eq!(slot(size, Rank(size - 1), 1) + s, window_bytes(size));
            assert_eq!(slot(size, Rank(0), 1), s);
        }
        let a = sig24(Algo::RdAllreduce, 3, 1, 16);
        assert_ne!(a, sig24(Algo::RdAllreduce, 3, 1, 8), "length");
        assert_ne!(a, sig24(Algo::RdAllreduce, 3, 3, 16), "operator");
        assert_ne!(a, sig24(Algo::RdAllreduce, 2, 1, 16), "type");
        assert_ne!(a, sig24(Algo::SmpAllreduce, 3, 1, 16), "algorithm");
        assert!(
            describe24(a).contains("SUM on f64, 16 bytes"),
            "{}",
            describe24(a)
        );
        assert_eq!(sig24(Algo::RdAllreduce, 3, 1, 1024) & 0x7ff, 1024);
        assert_eq!(
            describe24(sig24(Algo::AllToAllBarrier, 0, 0, 0)),
            "the all-to-all barrier"
        );
        assert!(
            describe24(sig24(Algo::AllToAllAllreduce, 3, 1, 8)).ends_with("SUM on f64, 8 bytes")
        );
        assert_eq!(describe24(0), "an unknown one-sided collective");
    }
}
