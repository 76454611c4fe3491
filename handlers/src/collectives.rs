//! [`Collectives`]: the user's entry point. Register before `start`, then
//! call collectives on the world or on a sub-group. The personalized
//! exchanges (alltoall, gather, scatter) and the prefix reductions (scan,
//! exscan) live in the child modules.

mod alltoall;
mod rooted;
mod scan;

use crate::config::{AllreduceAlgo, BarrierAlgo, CollConfig};
use crate::element::Element;
use crate::engine::Engine;
use crate::error::CollError;
use crate::group::Group;
use crate::machine::allgather::Allgather;
use crate::machine::allreduce::{RecursiveDoubling, ReduceBcast};
use crate::machine::barrier::{Dissemination, Pairwise};
use crate::machine::bcast::Bcast;
use crate::machine::reduce::ReduceMachine;
use crate::machine::setup::OnBehalf;
use crate::machine::{Machine, Output};
use crate::op::Reduce;
use crate::request::Request;
use crate::sig::{op_code, type_code, Sig, SETUP};
use crate::window::{window_bytes, Layout, ALL_TO_ALL_MAX_RANKS};
use crate::wire::{Kind, HEADER};
use fastmsg::{Endpoint, EndpointBuilder, Rank};
use std::cell::Cell;
use std::rc::Rc;

/// Collectives over a group of ranks (the world, or a sub-group made with
/// [`subgroup`](Self::subgroup)), built on fastmsg's public API: one
/// registered plain-function handler and one one-sided window.
///
/// ```
/// use fastmsg::{threads, Rank};
/// use fastmsg_handlers::{CollConfig, Collectives, Op};
///
/// let out = threads::run(4, |_| {}, |mut b| {
///     let coll = Collectives::register(&mut b, CollConfig::default()); // before start
///     let mut ep = b.start()?;
///     coll.barrier(&mut ep)?;
///     let mut x = [f64::from(ep.rank().0)];
///     coll.allreduce(&mut ep, &mut x, Op::Sum)?;                  // same bits everywhere
///     let req = coll.ireduce(&ep, vec![1u64], Op::Sum, Rank(0))?; // returns at once
///     // … compute; any extract (or another collective) progresses it …
///     let total = req.wait(&mut ep)?;                             // 4 at rank 0
///     ep.close()?;
///     Ok((x[0], total[0]))
/// }).unwrap();
/// assert_eq!(out[0], (6.0, 4));
/// ```
#[derive(Clone)]
pub struct Collectives {
    eng: Rc<Engine>,
    group: Rc<Group>,
    /// Ranks per core on the most crowded host (agreed by all), once known.
    crowded: Rc<Cell<Option<u64>>>,
}

impl std::fmt::Debug for Collectives {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collectives")
            .field("rank", &self.eng.me)
            .field("group", &self.group.members)
            .finish()
    }
}

impl Collectives {
    /// Register the collectives' handler (`fastmsg-coll/<name>`) and window
    /// on `b`, before `start`. Every rank must do the same, with the same
    /// configuration.
    pub fn register(b: &mut EndpointBuilder, cfg: CollConfig) -> Collectives {
        let (me, size) = (b.rank(), b.size());
        let window = b.window(&format!("fastmsg-coll/{}", cfg.name), window_bytes(size));
        let name = format!("fastmsg-coll/{}", cfg.name);
        let eng = Engine::new(me, size, window, cfg, b.config().close_warn);
        let e = Rc::clone(&eng);
        // A rooted collective's messages in a group of more than 128 members
        // carry the root after the payload (`crate::sig`).
        let max = eng
            .cfg
            .max_message_bytes
            .saturating_add(HEADER + crate::sig::ROOT_TAIL);
        let id = b.register_whole(&name, max, move |ctx, src, bytes| {
            e.on_message(ctx, src, bytes)
                .map_err(|err| Box::new(err) as _)
        });
        eng.handler
            .set(id)
            .expect("a fresh engine has no handler yet");
        let group = eng.world();
        Collectives {
            eng,
            group,
            crowded: Rc::new(Cell::new(None)),
        }
    }

    /// Collectives over `members` (in that order: indices, roots and the
    /// rank order of reductions follow it). Every member must create the
    /// same groups in the same order; messages of a group a rank has not
    /// created yet wait in the early buffer. Sub-groups use message
    /// algorithms only (the one-sided ones need every rank).
    ///
    /// # Errors
    /// [`CollError::NotMember`] if this rank is not in `members`;
    /// [`CollError::BadGroup`] for an empty list, a repeated or
    /// out-of-range rank.
    pub fn subgroup(&self, members: &[Rank]) -> Result<Collectives, CollError> {
        let group = self.eng.subgroup(members)?;
        Ok(Collectives {
            eng: Rc::clone(&self.eng),
            group,
            crowded: Rc::clone(&self.crowded),
        })
    }

    /// Ranks in the group.
    pub fn size(&self) -> u32 {
        self.group.n()
    }

    /// The group's members, in order.
    pub fn members(&self) -> &[Rank] {
        &self.group.members
    }

    /// The configuration.
    pub fn config(&self) -> &CollConfig {
        &self.eng.cfg
    }

    /// The registered handler (for tools and tests that talk to it
    /// directly).
    pub fn handler(&self) -> fastmsg::HandlerId {
        *self.eng.handler.get().expect("set by register")
    }

    /// Messages held for collectives this rank has not started yet.
    pub fn early_messages(&self) -> usize {
        self.eng.early_len()
    }

    fn index_of(&self, r: Rank) -> Result<u32, CollError> {
        self.group.index(r).ok_or_else(|| {
            CollError::BadArgument(format!(
                "root {r} is not a member of the group {:?}",
                self.group.members
            ))
        })
    }

    fn begin(&self, ep: &Endpoint, m: Box<dyn Machine>, sig: Sig) -> Result<u32, CollError> {
        self.eng.start(&ep.ctx(), &self.group, m, sig)
    }

    fn run(&self, ep: &mut Endpoint, m: Box<dyn Machine>, sig: Sig) -> Result<Output, CollError> {
        let seq = self.begin(ep, m, sig)?;
        self.eng.wait(ep, self.group.tag, seq)
    }

    fn request<T: 'static>(
        &self,
        ep: &Endpoint,
        m: Box<dyn Machine>,
        sig: Sig,
    ) -> Result<Request<T>, CollError> {
        let seq = self.begin(ep, m, sig)?;
        Ok(Request::new(Rc::clone(&self.eng), self.group.tag, seq))
    }

    /// How many times ranks outnumber cores on the most crowded host
    /// (1: a core per rank): each rank looks at its own host, then all
    /// agree by a message allreduce (once), so that every rank makes the
    /// same choice of algorithm. The allreduce runs as part of the
    /// collective `called` (its messages, errors and warnings name that
    /// one: [`OnBehalf`]).
    fn crowding(&self, ep: &mut Endpoint, called: Kind) -> Result<u64, CollError> {
        if let Some(c) = self.crowded.get() {
            return Ok(c);
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mine = ep.local_ranks().len().div_ceil(cores).max(1) as u64;
        let world = self.eng.world();
        let op = crate::op::Op::Max;
        let sig = Sig::new(SETUP, type_code::<u64>(), op_code::<u64, _>(&op), None);
        let m = RecursiveDoubling::new(world.n(), world.me, vec![mine], op);
        let m = OnBehalf::new(called, Box::new(m));
        let seq = self.eng.start(&ep.ctx(), &world, Box::new(m), sig)?;
        let out = self.eng.wait(ep, 0, seq)?;
        let c = downcast::<Vec<u64>>(out)[0];
        self.crowded.set(Some(c));
        Ok(c)
    }

    /// Whether the world spans more than one host. Every rank answers
    /// alike without talking: if one host held every rank, each rank
    /// would see all of them as local.
    fn spans_hosts(&self, ep: &Endpoint) -> bool {
        ep.local_ranks().len() != self.eng.size as usize
    }

    // ---- barrier ----

    /// Barrier with the configured algorithm ([`CollConfig::barrier`]; a
    /// one-sided one is replaced by dissemination on a sub-group).
    ///
    /// # Errors
    /// A send, put or progress failure; [`CollError::Unavailable`] if the
    /// algorithm cannot run on this group or host.
    pub fn barrier(&self, ep: &mut Endpoint) -> Result<(), CollError> {
        let algo = match self.eng.cfg.barrier {
            // A configured one-sided barrier on a sub-group: the default
            // message barrier instead.
            a if a.is_one_sided() && !self.group.is_world() => BarrierAlgo::Dissemination,
            a => a,
        };
        self.barrier_with(ep, algo)
    }

    /// The barrier algorithm `Auto` resolves to on this group.
    ///
    /// # Errors
    /// As [`barrier`](Self::barrier) (the first call agrees, by a message
    /// allreduce, how crowded the most crowded host is).
    pub fn auto_barrier(&self, ep: &mut Endpoint) -> Result<BarrierAlgo, CollError> {
        Ok(if !self.group.is_world() {
            BarrierAlgo::Dissemination
        } else if self.spans_hosts(ep) {
            // Only the hosts' masters cross the network: one put per
            // master per step instead of one per rank, and the network
            // steps are ⌈log2 hosts⌉ instead of ⌈log2 N⌉ mixed ones.
            BarrierAlgo::Hierarchical
        } else if self.crowding(ep, Kind::Barrier)? < 2 {
            BarrierAlgo::OneSided
        } else if self.eng.size <= ALL_TO_ALL_MAX_RANKS {
            // Ranks share cores: one step, and each rank is released the
            // moment it next runs (BENCHMARKS.md, oversubscribed
            // collectives).
            BarrierAlgo::AllToAll
        } else {
            BarrierAlgo::Hierarchical
        })
    }

    /// Barrier with algorithm `algo`.
    ///
    /// # Errors
    /// As [`barrier`](Self::barrier).
    pub fn barrier_with(&self, ep: &mut Endpoint, algo: BarrierAlgo) -> Result<(), CollError> {
        let algo = match algo {
            BarrierAlgo::Auto => self.auto_barrier(ep)?,
            a => a,
        };
        if algo.is_one_sided() {
            if !self.group.is_world() {
                return Err(CollError::Unavailable {
                    algo: algo.name(),
                    why: "one-sided barriers run on the world group only".into(),
                });
            }
            self.eng.refuse_one_sided(&ep.ctx())?;
            if algo == BarrierAlgo::AllToAll {
                return self.eng.all_to_all_barrier(ep);
            }
            let layout = match algo {
                BarrierAlgo::Smp => Layout::Smp,
                BarrierAlgo::Hierarchical => Layout::Hierarchical,
                _ => Layout::Single,
            };
            return self.eng.window_barrier(ep, layout);
        }
        let (m, sig) = self.barrier_machine(algo);
        self.run(ep, m, sig).map(|_| ())
    }

    fn barrier_machine(&self, algo: BarrierAlgo) -> (Box<dyn Machine>, Sig) {
        let (n, me) = (self.group.n(), self.group.me);
        match algo {
            BarrierAlgo::PairwiseExchange => {
                (Box::new(Pairwise::new(n, me)), Sig::new(1, 0, 0, None))
            }
            _ => (Box::new(Dissemination::new(n, me)), Sig::new(0, 0, 0, None)),
        }
    }

    /// Non-blocking barrier ([`CollConfig::ibarrier`]: dissemination or
    /// pairwise exchange, by messages).
    ///
    /// # Errors
    /// [`CollError::Unavailable`] for a one-sided algorithm; a send failure.
    pub fn ibarrier(&self, ep: &Endpoint) -> Result<Request<()>, CollError> {
        let algo = match self.eng.cfg.ibarrier {
            BarrierAlgo::Auto => BarrierAlgo::Dissemination,
            a if a.is_one_sided() => {
                return Err(CollError::Unavailable {
                    algo: a.name(),
                    why: "a one-sided barrier cannot progress inside extract (no handler runs when a flag is written); use dissemination or pairwise".into(),
                })
            }
            a => a,
        };
        let (m, sig) = self.barrier_machine(algo);
        self.request(ep, m, sig)
    }

    // ---- broadcast ----

    /// Broadcast `data` from `root` (binomial tree): on return every
    /// member's `data` equals the root's.
    ///
    /// # Members passing different arguments
    /// A length, element type or root that differs between members is
    /// found by a member that receives a message from one that disagrees
    /// (each message carries the call's signature and, in groups of more
    /// than 128 members, the full root); that member fails, and aborts the
    /// instance on every other member. A member whose part ended before —
    /// the root, which only sends, or a member whose own path from the root
    /// agreed — cannot learn it within this call without a confirming round
    /// that would double the broadcast's latency: it returns `Ok` with the
    /// root's data (never a wrong value). The collectives are then poisoned
    /// on every member: its next call fails with [`CollError::Poisoned`]
    /// naming the mismatch — unless that call ends before the news arrives,
    /// which only one needing no message from the others can (a broadcast
    /// it is the root of, a reduce it is a leaf of); then the call after
    /// it — and so does every later call. A [`Request`] from
    /// [`ibcast`](Self::ibcast) not yet waited for when the news comes
    /// reports the mismatch itself. Members whose roots make no member send
    /// (each names another as the root: two members naming each other) are
    /// not told, and wait: no message passes that could tell them.
    ///
    /// # Errors
    /// [`CollError::LengthMismatch`] if members pass different lengths,
    /// [`CollError::ArgsMismatch`] other element types or roots,
    /// [`CollError::Aborted`] if another member found the mismatch first,
    /// [`CollError::Poisoned`] after an earlier collective failed (see
    /// above); [`CollError::BadArgument`] if `root` is not a member; send
    /// and progress failures.
    pub fn bcast<T: Element>(
        &self,
        ep: &mut Endpoint,
        data: &mut [T],
        root: Rank,
    ) -> Result<(), CollError> {
        let root = self.index_of(root)?;
        let m = Bcast::new(self.group.n(), self.group.me, root, data.to_vec());
        let sig = Sig::new(0, type_code::<T>(), 0, Some(root));
        let out = downcast::<Vec<T>>(self.run(ep, Box::new(m), sig)?);
        data.copy_from_slice(&out);
        Ok(())
    }

    /// Non-blocking broadcast; the request yields the root's data (`data`
    /// gives the length, and the value at the root).
    ///
    /// # Errors
    /// As [`bcast`](Self::bcast), at start.
    pub fn ibcast<T: Element>(
        &self,
        ep: &Endpoint,
        data: Vec<T>,
        root: Rank,
    ) -> Result<Request<Vec<T>>, CollError> {
        let root = self.index_of(root)?;
        let m = Bcast::new(self.group.n(), self.group.me, root, data);
        let sig = Sig::new(0, type_code::<T>(), 0, Some(root));
        self.request(ep, Box::new(m), sig)
    }

    // ---- reduce ----

    /// Reduce `data` with `op` to `root` (binomial tree, fixed combine
    /// order): on return the root's `data` holds `x[0] ⊕ … ⊕ x[n-1]`;
    /// other members' `data` is unchanged.
    ///
    /// Members passing different lengths, element types, operators (as
    /// told apart by [`Reduce::id`]) or roots: the member that receives a
    /// part from one that disagrees fails and aborts the instance
    /// everywhere; a member whose part was handed over before returns `Ok`
    /// with its own data unchanged, and learns it at its next collective
    /// call, as for [`bcast`](Self::bcast). Where no part passes between
    /// members that disagree (roots that leave a member waiting for
    /// children that send to another parent), nobody is told, and they
    /// wait.
    ///
    /// # Errors
    /// [`CollError::OpUndefined`] (e.g. AND on floats); as
    /// [`bcast`](Self::bcast).
    pub fn reduce<T: Element, R: Reduce<T>>(
        &self,
        ep: &mut Endpoint,
        data: &mut [T],
        op: R,
        root: Rank,
    ) -> Result<(), CollError> {
        op.check()?;
        let root = self.index_of(root)?;
        let sig = Sig::new(0, type_code::<T>(), op_code(&op), Some(root));
        let m = ReduceMachine::new(self.group.n(), self.group.me, root, data.to_vec(), op);
        let out = downcast::<Vec<T>>(self.run(ep, Box::new(m), sig)?);
        data.copy_from_slice(&out);
        Ok(())
    }

    /// Non-blocking reduce: returns as soon as this rank's part is
    /// handed over; children's data is combined and forwarded by the
    /// handler inside later `extract`s (NIC-REDUCE). The request yields the
    /// result at the root and the rank's own data elsewhere.
    ///
    /// # Errors
    /// As [`reduce`](Self::reduce), at start.
    pub fn ireduce<T: Element, R: Reduce<T>>(
        &self,
        ep: &Endpoint,
        data: Vec<T>,
        op: R,
        root: Rank,
    ) -> Result<Request<Vec<T>>, CollError> {
        op.check()?;
        let root = self.index_of(root)?;
        let sig = Sig::new(0, type_code::<T>(), op_code(&op), Some(root));
        let m = ReduceMachine::new(self.group.n(), self.group.me, root, data, op);
        self.request(ep, Box::new(m), sig)
    }

    // ---- allreduce ----

    /// Allreduce `data` with `op` ([`CollConfig::allreduce`]; a one-sided
    /// algorithm is replaced by recursive doubling where it cannot run —
    /// on a sub-group, past 1 KiB or 64 ranks, across hosts): on return
    /// every member's `data` holds the same bits, `x[0] ⊕ … ⊕ x[n-1]`.
    ///
    /// # Errors
    /// As [`reduce`](Self::reduce).
    pub fn allreduce<T: Element, R: Reduce<T>>(
        &self,
        ep: &mut Endpoint,
        data: &mut [T],
        op: R,
    ) -> Result<(), CollError> {
        let algo = match self.eng.cfg.allreduce {
            // A configured one-sided allreduce where it cannot run: the
            // message algorithm instead.
            a if a.is_one_sided()
                && !(self.group.is_world()
                    && self.eng.smp_allreduce_fits(ep, std::mem::size_of_val(data))) =>
            {
                AllreduceAlgo::RecursiveDoubling
            }
            a => a,
        };
        self.allreduce_with(ep, data, op, algo)
    }

    /// The allreduce algorithm `Auto` resolves to for `bytes` bytes.
    ///
    /// # Errors
    /// As [`barrier`](Self::barrier) (the first call agrees, by a message
    /// allreduce, how crowded the most crowded host is).
    pub fn auto_allreduce(
        &self,
        ep: &mut Endpoint,
        bytes: usize,
    ) -> Result<AllreduceAlgo, CollError> {
        if !self.group.is_world() || !self.eng.smp_allreduce_fits(ep, bytes) {
            return Ok(AllreduceAlgo::RecursiveDoubling);
        }
        Ok(if self.crowding(ep, Kind::Allreduce)? >= 2 {
            AllreduceAlgo::AllToAll
        } else {
            AllreduceAlgo::OneSided
        })
    }

    /// Allreduce with algorithm `algo`.
    ///
    /// # Errors
    /// As [`allreduce`](Self::allreduce); [`CollError::Unavailable`] if
    /// `algo` cannot run here.
    pub fn allreduce_with<T: Element, R: Reduce<T>>(
        &self,
        ep: &mut Endpoint,
        data: &mut [T],
        op: R,
        algo: AllreduceAlgo,
    ) -> Result<(), CollError> {
        op.check()?;
        let algo = match algo {
            AllreduceAlgo::Auto => self.auto_allreduce(ep, std::mem::size_of_val(data))?,
            a => a,
        };
        if algo.is_one_sided() {
            if !self.group.is_world() {
                return Err(CollError::Unavailable {
                    algo: algo.name(),
                    why: "one-sided allreduces run on the world group only".into(),
                });
            }
            self.eng.refuse_one_sided(&ep.ctx())?;
            return match algo {
                AllreduceAlgo::Smp => self.eng.smp_allreduce(ep, data, &op),
                AllreduceAlgo::AllToAll => self.eng.all_to_all_allreduce(ep, data, &op),
                _ => self.eng.onesided_allreduce(ep, data, &op),
            };
        }
        let (m, sig) = self.allreduce_machine(algo, data.to_vec(), op);
        let out = downcast::<Vec<T>>(self.run(ep, m, sig)?);
        data.copy_from_slice(&out);
        Ok(())
    }

    fn allreduce_machine<T: Element, R: Reduce<T>>(
        &self,
        algo: AllreduceAlgo,
        data: Vec<T>,
        op: R,
    ) -> (Box<dyn Machine>, Sig) {
        let (n, me) = (self.group.n(), self.group.me);
        let (ty, opc) = (type_code::<T>(), op_code(&op));
        match algo {
            AllreduceAlgo::ReduceBcast => (
                Box::new(ReduceBcast::new(n, me, data, op)),
                Sig::new(1, ty, opc, None),
            ),
            _ => (
                Box::new(RecursiveDoubling::new(n, me, data, op)),
                Sig::new(0, ty, opc, None),
            ),
        }
    }

    /// Non-blocking allreduce (recursive doubling, or reduce-broadcast if
    /// configured; the one-sided algorithm cannot progress inside
    /// `extract`).
    ///
    /// # Errors
    /// As [`allreduce`](Self::allreduce), at start.
    pub fn iallreduce<T: Element, R: Reduce<T>>(
        &self,
        ep: &Endpoint,
        data: Vec<T>,
        op: R,
    ) -> Result<Request<Vec<T>>, CollError> {
        op.check()?;
        let algo = match self.eng.cfg.allreduce {
            AllreduceAlgo::ReduceBcast => AllreduceAlgo::ReduceBcast,
            _ => AllreduceAlgo::RecursiveDoubling,
        };
        let (m, sig) = self.allreduce_machine(algo, data, op);
        self.request(ep, m, sig)
    }

    // ---- allgather ----

    /// Allgather (Bruck): every member contributes `mine` (same length
    /// everywhere); returns all contributions in member order.
    ///
    /// # Errors
    /// [`CollError::LengthMismatch`] if lengths differ; send and progress
    /// failures.
    pub fn allgather<T: Element>(
        &self,
        ep: &mut Endpoint,
        mine: &[T],
    ) -> Result<Vec<T>, CollError> {
        let m = Allgather::new(self.group.n(), self.group.me, mine);
        let sig = Sig::new(0, type_code::<T>(), 0, None);
        Ok(downcast::<Vec<T>>(self.run(ep, Box::new(m), sig)?))
    }

    /// Non-blocking allgather.
    ///
    /// # Errors
    /// As [`allgather`](Self::allgather), at start.
    pub fn iallgather<T: Element>(
        &self,
        ep: &Endpoint,
        mine: &[T],
    ) -> Result<Request<Vec<T>>, CollError> {
        let m = Allgather::new(self.group.n(), self.group.me, mine);
        let sig = Sig::new(0, type_code::<T>(), 0, None);
        self.request(ep, Box::new(m), sig)
    }
}

impl Engine {
    /// A blocking allgather over the world, the set-up of collective
    /// `called` at its first call (it runs under that one's name:
    /// [`OnBehalf`]).
    pub(crate) fn allgather_world(
        self: &Rc<Self>,
        ep: &mut Endpoint,
        mine: &[u32],
        called: Kind,
    ) -> Result<Vec<u32>, CollError> {
        let world = self.world();
        let m = Allgather::new(world.n(), world.me, mine);
        let m = OnBehalf::new(called, Box::new(m));
        let sig = Sig::new(SETUP, type_code::<u32>(), 0, None);
        let seq = self.start(&ep.ctx(), &world, Box::new(m), sig)?;
        Ok(downcast::<Vec<u32>>(self.wait(ep, 0, seq)?))
    }
}

fn downcast<T: 'static>(out: Output) -> T {
    match out.downcast::<T>() {
        Ok(v) => *v,
        Err(_) => unreachable!("each machine outputs the type its caller expects"),
    }
}
