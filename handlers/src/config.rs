//! [`CollConfig`]: which algorithm each collective uses, and the bounds of
//! the buffer that holds messages of instances not started yet.
//!
//! Every rank of a job must use the same configuration (the algorithms
//! decide who sends what to whom); the handler and window names derived
//! from [`CollConfig::name`] are checked equal across ranks at start.

/// Barrier algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BarrierAlgo {
    /// Dissemination (NIC-BARRIER §5.1): in step `k` rank `i` sends to
    /// `i + 2^k mod N` and waits for `i - 2^k`; ⌈log2 N⌉ steps, by
    /// messages to a registered handler. Works on any group.
    Dissemination,
    /// Pairwise exchange / recursive doubling (NIC-BARRIER §5.1, as in
    /// MPICH): partners `i xor 2^k`; for a non-power-of-two N the ranks
    /// past the largest power of two M first notify rank `i - M` and are
    /// released by it at the end (⌊log2 N⌋ + 2 steps). By messages; works
    /// on any group.
    PairwiseExchange,
    /// The SMP flat barrier (VIA-BARRIER §5.2): each rank raises its own flag,
    /// on its own cache line, in the master's window; the master waits
    /// for all flags and releases everyone through a flag in each rank's
    /// window. One-sided stores only; the whole group must share one host
    /// (the world group only).
    Smp,
    /// The hierarchical barrier (VIA-BARRIER §5.3): the SMP barrier inside
    /// each host (or [`SmpDomain`]), then the hosts' masters run pairwise
    /// exchange by `put_u64` of the barrier number into a per-rank word
    /// array, checked with `>=` so that consecutive barriers never confuse
    /// each other, then each master releases its host. **With one host
    /// this is exactly the SMP barrier.** Across hosts the masters' puts
    /// travel over the network transport (TCP: one write record each,
    /// applied by the peer's NIC thread as a Release store that wakes a
    /// sleeping rank); hosts are the groups of `Endpoint::local_ranks`.
    /// World group only.
    Hierarchical,
    /// Pairwise exchange by one-sided `put_u64` among all ranks (VIA-BARRIER
    /// §5.1, the inter-node barrier, with every rank its own "node"): the
    /// hierarchical barrier with SMP domains of one rank. One store per
    /// step and no handler: the lowest-latency barrier with a core per
    /// rank. World group only.
    OneSided,
    /// All-to-all flags (one-sided): each rank raises its flag in every
    /// other rank's window and waits for all of theirs in its own. One
    /// step, no master, N − 1 stores per rank: a rank is released the
    /// moment it runs after the last arrival, so ranks that share cores
    /// are switched in once per barrier and never again just to pass the
    /// news on. World group only.
    AllToAll,
    /// For the world group: [`Hierarchical`](Self::Hierarchical) when the
    /// ranks span more than one host (only the hosts' masters cross the
    /// network, ⌈log2 hosts⌉ network steps; every rank knows this from
    /// its own `local_ranks`, without talking; faster than one-sided
    /// across two network namespaces: BENCHMARKS.md, collectives).
    /// On one host: [`OneSided`](Self::OneSided) with a
    /// core per rank; when ranks outnumber cores (twice or more, rounded
    /// up), [`AllToAll`](Self::AllToAll) up to 64 ranks and
    /// [`Hierarchical`](Self::Hierarchical) (flat SMP on one host) past
    /// that. Measured at 4, 8, 16 and 32 ranks on 2 cores: all-to-all is
    /// the fastest (BENCHMARKS.md, collectives), since
    /// one-sided's ⌈log2 N⌉ dependent steps each wait for a descheduled
    /// partner and the flat SMP barrier's release waits for its master
    /// to be scheduled. How crowded the host is is agreed by all ranks at
    /// the first `Auto` call.
    /// Sub-groups: [`Dissemination`](Self::Dissemination).
    #[default]
    Auto,
}

impl BarrierAlgo {
    /// Whether the algorithm uses one-sided windows (world group only,
    /// blocking only).
    pub fn is_one_sided(self) -> bool {
        matches!(
            self,
            BarrierAlgo::Smp
                | BarrierAlgo::Hierarchical
                | BarrierAlgo::OneSided
                | BarrierAlgo::AllToAll
        )
    }

    /// Short name (for benchmarks and errors).
    pub fn name(self) -> &'static str {
        match self {
            BarrierAlgo::Dissemination => "dissemination",
            BarrierAlgo::PairwiseExchange => "pairwise",
            BarrierAlgo::Smp => "smp",
            BarrierAlgo::Hierarchical => "hierarchical",
            BarrierAlgo::OneSided => "one-sided",
            BarrierAlgo::AllToAll => "all-to-all",
            BarrierAlgo::Auto => "auto",
        }
    }

    /// Every concrete algorithm.
    pub const ALL: [BarrierAlgo; 6] = [
        BarrierAlgo::Dissemination,
        BarrierAlgo::PairwiseExchange,
        BarrierAlgo::Smp,
        BarrierAlgo::Hierarchical,
        BarrierAlgo::OneSided,
        BarrierAlgo::AllToAll,
    ];
}

impl std::str::FromStr for BarrierAlgo {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        BarrierAlgo::ALL
            .into_iter()
            .chain([BarrierAlgo::Auto])
            .find(|a| a.name() == s)
            .ok_or_else(|| {
                format!("unknown barrier algorithm {s:?}: expected dissemination, pairwise, smp, hierarchical, one-sided, all-to-all or auto")
            })
    }
}

/// Allreduce algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AllreduceAlgo {
    /// Recursive doubling, with MPICH's even/odd folding for a
    /// non-power-of-two N so that every partial result covers a
    /// contiguous block of ranks: ⌈log2 N⌉ (+2) steps; every rank computes
    /// the same bits. By messages; any group, blocking or not.
    RecursiveDoubling,
    /// Binomial reduce to the first rank, then binomial broadcast.
    ReduceBcast,
    /// Flat, through one-sided windows (blocking, world group on one
    /// host, at most [`SMP_ALLREDUCE_MAX_BYTES`](crate::SMP_ALLREDUCE_MAX_BYTES)):
    /// each rank puts its data and a flag into the master's window; the
    /// master combines in rank order and puts the result and a flag into
    /// every rank's window.
    Smp,
    /// Recursive doubling by one-sided puts (blocking, world group, at
    /// most [`SMP_ALLREDUCE_MAX_BYTES`](crate::SMP_ALLREDUCE_MAX_BYTES)
    /// and 64 ranks): each step puts the partial and a flag into the
    /// partner's window; no handler runs, nothing is allocated. Runs
    /// across hosts too: a transport makes a put visible before any later
    /// put from the same rank, so the data lands before its flag.
    OneSided,
    /// All-to-all (one-sided; the same bounds as
    /// [`OneSided`](Self::OneSided)): each rank puts its data and a flag
    /// into every other rank's window, waits once for all of theirs and
    /// combines all N in rank order itself — one step, no master, the same
    /// bits everywhere.
    AllToAll,
    /// For the world group and small data on one host:
    /// [`OneSided`](Self::OneSided) with a core per rank,
    /// [`AllToAll`](Self::AllToAll) when ranks outnumber cores twice or
    /// more (faster than `Smp` and `OneSided` at 4 to 32 ranks on 2
    /// cores: BENCHMARKS.md, collectives);
    /// otherwise — sub-groups, more than 1 KiB, ranks on several hosts —
    /// [`RecursiveDoubling`](Self::RecursiveDoubling) (faster than the
    /// one-sided form for 1 f64 across two network namespaces over TCP,
    /// which pays two write records per step: BENCHMARKS.md,
    /// collectives).
    #[default]
    Auto,
}

impl AllreduceAlgo {
    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            AllreduceAlgo::RecursiveDoubling => "recursive-doubling",
            AllreduceAlgo::ReduceBcast => "reduce-bcast",
            AllreduceAlgo::Smp => "smp",
            AllreduceAlgo::OneSided => "one-sided",
            AllreduceAlgo::AllToAll => "all-to-all",
            AllreduceAlgo::Auto => "auto",
        }
    }

    /// Every concrete algorithm.
    pub const ALL: [AllreduceAlgo; 5] = [
        AllreduceAlgo::RecursiveDoubling,
        AllreduceAlgo::ReduceBcast,
        AllreduceAlgo::Smp,
        AllreduceAlgo::OneSided,
        AllreduceAlgo::AllToAll,
    ];

    /// Whether the algorithm uses one-sided windows (world group only,
    /// blocking only).
    pub fn is_one_sided(self) -> bool {
        matches!(
            self,
            AllreduceAlgo::Smp | AllreduceAlgo::OneSided | AllreduceAlgo::AllToAll
        )
    }
}

impl std::str::FromStr for AllreduceAlgo {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        AllreduceAlgo::ALL
            .into_iter()
            .chain([AllreduceAlgo::Auto])
            .find(|a| a.name() == s)
            .ok_or_else(|| {
                format!("unknown allreduce algorithm {s:?}: expected recursive-doubling, reduce-bcast, smp, one-sided, all-to-all or auto")
            })
    }
}

/// What the SMP phase of the hierarchical barrier treats as one host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SmpDomain {
    /// The ranks that share this host's memory (`Endpoint::local_ranks`).
    #[default]
    Host,
    /// Consecutive blocks of this many ranks (each block must lie on one
    /// host). Lets one host exercise the inter-master phase of the
    /// hierarchical barrier, as if each block were a host.
    Blocks(u32),
}

/// Configuration of a [`Collectives`](crate::Collectives) instance.
///
/// ```
/// use fastmsg_handlers::{BarrierAlgo, CollConfig};
/// let cfg = CollConfig { barrier: BarrierAlgo::Dissemination, ..CollConfig::default() };
/// assert_eq!(cfg.max_early_messages, 4096);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CollConfig {
    /// Names the handler (`fastmsg-coll/<name>`) and window; two
    /// instances registered on one builder need different names.
    pub name: String,
    /// Algorithm of the blocking barrier.
    pub barrier: BarrierAlgo,
    /// Algorithm of the non-blocking barrier (must be a message algorithm:
    /// one-sided barriers cannot progress inside `extract`, since no
    /// handler runs when a flag is written); `Auto` is dissemination.
    pub ibarrier: BarrierAlgo,
    /// Algorithm of allreduce.
    pub allreduce: AllreduceAlgo,
    /// Hosts as seen by the hierarchical barrier.
    pub smp_domain: SmpDomain,
    /// Most messages buffered for instances not started yet on this rank
    /// (early messages of later collectives). Past it: a
    /// [`CollError::EarlyOverflow`](crate::CollError::EarlyOverflow).
    pub max_early_messages: usize,
    /// Most bytes buffered for instances not started yet.
    pub max_early_bytes: usize,
    /// Largest collective message accepted (a bound on what a peer can
    /// make this rank allocate).
    pub max_message_bytes: usize,
}

impl Default for CollConfig {
    fn default() -> Self {
        CollConfig {
            name: "coll".to_owned(),
            barrier: BarrierAlgo::Auto,
            ibarrier: BarrierAlgo::Auto,
            allreduce: AllreduceAlgo::Auto,
            smp_domain: SmpDomain::Host,
            max_early_messages: 4096,
            max_early_bytes: 64 << 20,
            max_message_bytes: 1 << 30,
        }
    }
}
