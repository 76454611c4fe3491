//! The collectives across hosts: two Linux network namespaces that the
//! test creates itself act as two hosts (the root crate's netns helper,
//! `tests/common/netns.rs`); `fmrun` in each starts that host's ranks of
//! one job — 2 × 2 ranks, and 2 × 3 (not a power of two, three ranks per
//! SMP domain, every rank sleeping when it waits). Ranks on one host talk over shared memory, across hosts
//! over the TCP transport, whose one-sided puts carry the flag-based
//! algorithms (the hierarchical barrier's master exchange, the one-sided
//! barrier and allreduce).
//!
//! Each rank program runs, interleaved with checked point-to-point
//! traffic (every message arrives once, in order, with its bytes):
//! - every barrier algorithm (`Smp` must refuse: the ranks span hosts),
//!   `Auto` (checked to resolve to `Hierarchical` across hosts), and the
//!   non-blocking barrier, hundreds of times each, with random skew. The
//!   barrier's promise is checked outside fastmsg: before each barrier a
//!   rank appends one byte to a file all ranks share (the namespaces share
//!   the file system); after it, the file must hold one byte per rank per
//!   barrier so far — nobody left before everyone arrived;
//! - broadcast, reduce, allreduce (every algorithm) and allgather against
//!   the sequential reference: integers with SUM/MIN/MAX/AND/OR/XOR
//!   exactly; f64 SUM of dyadic inputs (every partial sum exact, so any
//!   lost, doubled or misplaced contribution changes the bits) bit for
//!   bit; f64 SUM of inputs spanning 16 orders of magnitude within the
//!   rounding bound, bit-identical on every rank and when repeated with
//!   other arrival orders;
//! - alltoall(v), gather(v), scatter(v) from every root, scan and exscan
//!   against what each member must get (counts that differ per pair, zero
//!   and past one frame included; scans of dyadic f64s bit for bit, of
//!   wide-range f64s the same bits on repetition);
//! - the non-blocking forms, five outstanding at once, waited in reverse
//!   order, with one rank late by up to half a millisecond;
//! - remote words (`fastmsg_handlers::memory`): one-way adds from every
//!   rank to every rank's words, which must add up exactly; gets of every
//!   word of every rank and fetch-adds, answered with what was added.
//!
//! Needs root (to create namespaces); skips with a message otherwise.
//!
//! The same rank program also runs under Open MPI's `mpirun` (fastmsg's
//! feature `pmix`; the root crate's `tests/common/launch.rs`): 2 × 2 ranks
//! split into "hosts" by `FASTMSG_HOST`, the TCP transport forced, nothing
//! exported (no root address, no secret). Skips when `mpirun` is missing.

mod common;
#[path = "../../tests/common/launch.rs"]
mod launch;
#[path = "../../tests/common/netns.rs"]
mod netns;

use common::{count, f64s, i64s, rng, u64s};
use fastmsg::{Endpoint, EndpointBuilder, HandlerId, Rank, WordOp};
use fastmsg_handlers::aggregate::{AggConfig, Aggregator};
use fastmsg_handlers::memory::RemoteWords;
use fastmsg_handlers::{
    reference, AllreduceAlgo, BarrierAlgo, CollConfig, CollError, Collectives, Op,
    SMP_ALLREDUCE_MAX_BYTES,
};
use netns::{Hosts, Job};
use rand::Rng;
use std::cell::RefCell;
use std::fs::File;
use std::io::Write;
use std::rc::Rc;
use std::time::Duration;

/// Barriers of each algorithm per job.
const BARRIERS: u64 = 1000;
/// Iterations of the blocking and of the non-blocking data collectives.
const ITERS: u64 = 60;
const SEED: u64 = 0x5eed_4057;

/// Environment variable naming the shared arrivals file.
const ARRIVALS: &str = "FMTEST_ARRIVALS";

/// `per_host` ranks in each of two namespaces, under wait policy `wait`.
fn job(per_host: u32, wait: &str) {
    job_over(per_host, wait, Vec::new());
}

/// As [`job`], with more environment for the ranks (the transport).
fn job_over(per_host: u32, wait: &str, net: Vec<(String, String)>) {
    let tag = format!("net_collectives_2x{per_host}");
    let Some(hosts) = Hosts::create(&tag) else {
        return;
    };
    let file =
        Removed(std::env::temp_dir().join(format!("fmcoll-{}-{per_host}", std::process::id())));
    let path = &file.0;
    File::create(path).expect("arrivals file");
    hosts.run(&Job {
        fmrun: &common::fmrun(),
        rank_test: "net_coll_rank",
        per_host,
        scenario: "collectives",
        env: [
            (ARRIVALS.into(), path.display().to_string()),
            ("FASTMSG_WAIT".into(), wait.into()),
        ]
        .into_iter()
        .chain(net)
        .collect(),
        limit: Duration::from_secs(120),
    });
    let bytes = std::fs::metadata(path).expect("arrivals").len();
    // Every rank arrived at every barrier the rank program counts.
    assert_eq!(
        bytes,
        barriers_per_job() * u64::from(2 * per_host),
        "arrivals recorded"
    );
}

/// A file removed when dropped (also when the job fails).
struct Removed(std::path::PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn mpirun_two_hosts_two_ranks_each() {
    let _serial = common::serial();
    let file = Removed(std::env::temp_dir().join(format!("fmcoll-mpirun-{}", std::process::id())));
    File::create(&file.0).expect("arrivals file");
    let ran = launch::mpirun(&launch::MpiJob {
        rank_test: "net_coll_rank",
        size: 4,
        per_host: 2,
        scenario: "collectives",
        env: vec![
            (ARRIVALS.into(), file.0.display().to_string()),
            ("FASTMSG_NET".into(), "tcp".into()),
        ],
        limit: Duration::from_secs(180),
    });
    if ran.is_some() {
        let bytes = std::fs::metadata(&file.0).expect("arrivals").len();
        assert_eq!(bytes, barriers_per_job() * 4, "arrivals recorded");
    }
}

#[test]
fn two_hosts_two_ranks_each() {
    let _serial = common::serial();
    job(2, "auto");
}

#[test]
fn two_hosts_three_ranks_each() {
    let _serial = common::serial();
    // Every wait sleeps on the doorbell: the flags the TCP NIC thread
    // stores for the one-sided algorithms must wake the rank.
    job(3, "sleep");
}

/// Every pair over libfabric (`FASTMSG_NET=ofi`, `tcp;ofi_rxm`). The
/// policy spins: a rank asleep does not drive libfabric's progress (it
/// would notice arrivals only at the sleep's time-out).
#[cfg(feature = "ofi")]
#[test]
fn two_hosts_two_ranks_each_over_ofi() {
    let _serial = common::serial();
    let net = vec![
        ("FASTMSG_NET".into(), "ofi".into()),
        ("FI_PROVIDER".into(), "tcp;ofi_rxm".into()),
    ];
    job_over(2, "auto", net);
}

/// The rank program (started by `fmrun` inside a namespace); does nothing
/// when run as an ordinary test.
#[test]
fn net_coll_rank() {
    if !launch::is_rank() {
        return;
    }
    let mut b = EndpointBuilder::from_env().expect("launcher environment");
    let mut traffic = Traffic::register(&mut b);
    let coll = Collectives::register(&mut b, CollConfig::default());
    let agg = Aggregator::new(&mut b, AggConfig::default());
    let words = RemoteWords::new(&agg, &mut b, "net-words", WORDS as usize);
    let got: Rc<RefCell<Vec<Option<u64>>>> = Rc::default();
    let g = Rc::clone(&got);
    words.on_complete(move |_, _, token, r| {
        let mut got = g.borrow_mut();
        let i = token as usize;
        if got.len() <= i {
            got.resize(i + 1, None);
        }
        got[i] = Some(r.expect("a get or fetch-add across hosts"));
    });
    let mut ep = b.start().expect("start");
    let (me, n) = (ep.rank().0, ep.size());
    let per_host = n / 2;
    let host: Vec<u32> = ep.local_ranks().iter().map(|r| r.0).collect();
    let first = me / per_host * per_host;
    assert_eq!(
        host,
        (first..first + per_host).collect::<Vec<_>>(),
        "host map"
    );
    assert_eq!(
        coll.auto_barrier(&mut ep).expect("auto barrier"),
        BarrierAlgo::Hierarchical,
        "Auto across hosts"
    );
    barriers(&mut ep, &coll, &mut traffic);
    reductions(&mut ep, &coll, &mut traffic);
    personalized(&mut ep, &coll, &mut traffic);
    nonblocking(&mut ep, &coll, &mut traffic);
    remote_words(&mut ep, &coll, &agg, &words, &got);
    traffic.finish(&mut ep, &coll);
    ep.close().expect("close");
}

// ---- remote words ----

/// Words of the remote-words window per rank.
const WORDS: u64 = 64;
/// Rounds of adds each rank makes to every rank.
const ADD_ROUNDS: u64 = 300;

/// The word a rank's `k`-th add goes to, and the amount it adds.
fn add_target(k: u64, from: u32) -> (u64, u64) {
    ((k * 7 + u64::from(from)) % WORDS, 1 + u64::from(from))
}

/// What every owner's word `w` holds once every rank of `n` made its adds.
fn added(w: u64, n: u32) -> u64 {
    (0..n)
        .flat_map(|r| (0..ADD_ROUNDS).map(move |k| add_target(k, r)))
        .filter(|&(t, _)| t == w)
        .map(|(_, v)| v)
        .sum()
}

/// Remote words across hosts (owners on the other host reached by
/// aggregated messages over TCP, on this host through the owner too):
/// one-way adds from every rank to every rank's words, which must add up
/// exactly after `quiesce`; then gets of every word of every rank and one
/// fetch-add per owner to its word 0, whose answers must be what was
/// added (word 0 plus some of the fetch-adds), and the owner's word 0 in
/// the end exactly one more per rank.
fn remote_words(
    ep: &mut Endpoint,
    coll: &Collectives,
    agg: &Aggregator,
    words: &RemoteWords,
    got: &Rc<RefCell<Vec<Option<u64>>>>,
) {
    let (me, n) = (ep.rank().0, ep.size());
    let ctx = ep.ctx();
    for k in 0..ADD_ROUNDS {
        for owner in 0..n {
            let (w, v) = add_target(k, me);
            words.add(&ctx, Rank(owner), w, v).expect("add");
        }
    }
    agg.quiesce(ep).expect("quiesce after adds");
    let ctx = ep.ctx();
    for w in 0..WORDS {
        assert_eq!(
            words.local(&ctx, w).expect("local word"),
            added(w, n),
            "rank {me}: word {w} after every rank's adds"
        );
    }
    // Nobody's fetch-add may reach an owner still checking its adds.
    coll.barrier(ep).expect("barrier");
    let ctx = ep.ctx();
    let total = u64::from(n) * WORDS;
    for owner in 0..n {
        for w in 0..WORDS {
            words
                .get(&ctx, Rank(owner), w, u64::from(owner) * WORDS + w)
                .expect("get");
        }
        // Fetch-add 1 to the owner's word 0: its answer lands past the gets.
        words
            .fetch(
                &ctx,
                Rank(owner),
                0,
                WordOp::FetchAdd(1),
                total + u64::from(owner),
            )
            .expect("fetch-add");
    }
    agg.quiesce(ep).expect("quiesce after gets");
    let got = got.borrow();
    for owner in 0..n {
        for w in 0..WORDS {
            let seen = got
                .get((u64::from(owner) * WORDS + w) as usize)
                .copied()
                .flatten();
            // Word 0 may already have some of the ranks' fetch-adds.
            let extra = if w == 0 { u64::from(n) } else { 0 };
            assert!(
                seen.is_some_and(|v| (added(w, n)..=added(w, n) + extra).contains(&v)),
                "rank {me}: get of rank {owner}'s word {w} gave {seen:?}, not {} (+ up to {extra})",
                added(w, n)
            );
        }
        let prev = got
            .get((total + u64::from(owner)) as usize)
            .copied()
            .flatten()
            .expect("fetch-add answered");
        // Each rank's fetch-add saw the adds plus some of the n fetch-adds.
        assert!(
            (added(0, n)..added(0, n) + u64::from(n)).contains(&prev),
            "rank {me}: fetch-add on rank {owner} saw {prev}"
        );
    }
    drop(got);
    agg.quiesce(ep).expect("quiesce after checks");
    let ctx = ep.ctx();
    assert_eq!(
        words.local(&ctx, 0).expect("local word"),
        added(0, n) + u64::from(n),
        "rank {me}: word 0 after every rank's fetch-add"
    );
}

// ---- barriers ----

/// The barrier algorithms that can run across hosts, then `Auto`.
fn cross_host_barriers() -> Vec<BarrierAlgo> {
    BarrierAlgo::ALL
        .into_iter()
        .filter(|&a| a != BarrierAlgo::Smp)
        .chain([BarrierAlgo::Auto])
        .collect()
}

/// Barriers a job makes: each algorithm's, the non-blocking ones, and the
/// one the traffic check ends with.
fn barriers_per_job() -> u64 {
    (cross_host_barriers().len() as u64 + 1) * BARRIERS
}

/// The shared arrivals file: one byte per rank per barrier.
struct Arrivals {
    file: File,
    ranks: u64,
    barriers: u64,
}

impl Arrivals {
    fn open(ranks: u32) -> Arrivals {
        let path = std::env::var(ARRIVALS).expect("arrivals file");
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        Arrivals {
            file,
            ranks: u64::from(ranks),
            barriers: 0,
        }
    }

    fn arrive(&mut self) {
        self.file.write_all(&[1]).expect("arrive");
        self.barriers += 1;
    }

    fn check_left(&self, me: u32, what: &str) {
        let seen = self.file.metadata().expect("arrivals").len();
        let want = self.barriers * self.ranks;
        assert!(
            seen >= want,
            "rank {me} left {what} barrier {} when only {seen} of {want} arrivals happened",
            self.barriers
        );
    }
}

fn barriers(ep: &mut Endpoint, coll: &Collectives, traffic: &mut Traffic) {
    let me = ep.rank().0;
    let e = coll
        .barrier_with(ep, BarrierAlgo::Smp)
        .expect_err("the SMP barrier cannot span hosts");
    assert!(matches!(e, CollError::Unavailable { .. }), "{e}");
    let mut arrivals = Arrivals::open(ep.size());
    let mut g = rng(SEED, 0, me, 10);
    for algo in cross_host_barriers() {
        for i in 0..BARRIERS {
            if g.random_range(0..24) == 0 {
                std::thread::sleep(Duration::from_micros(g.random_range(0..300)));
            }
            if i % 8 == 0 {
                traffic.send_some(ep, i);
            }
            arrivals.arrive();
            coll.barrier_with(ep, algo)
                .unwrap_or_else(|e| panic!("rank {me}: {algo:?} barrier {i}: {e}"));
            arrivals.check_left(me, algo.name());
        }
    }
    for i in 0..BARRIERS {
        arrivals.arrive();
        let r = coll.ibarrier(ep).expect("ibarrier");
        // Keep sending while the barrier is in flight.
        traffic.send_some(ep, i);
        r.wait(ep)
            .unwrap_or_else(|e| panic!("rank {me}: ibarrier {i}: {e}"));
        arrivals.check_left(me, "non-blocking");
    }
}

// ---- blocking data collectives ----

/// Dyadic f64s (k · 2^-10, |k| < 2^20): every partial sum of up to 2^23
/// of them is exact, so any association gives the sequential bits.
fn dyadic(it: u64, rank: u32, n: usize) -> Vec<f64> {
    let mut g = rng(SEED, it, rank, 20);
    (0..n)
        .map(|_| f64::from(g.random_range(-(1 << 20)..(1 << 20))) / 1024.0)
        .collect()
}

fn bits(x: &[f64]) -> Vec<u64> {
    x.iter().map(|v| v.to_bits()).collect()
}

fn reductions(ep: &mut Endpoint, coll: &Collectives, traffic: &mut Traffic) {
    let (me, n) = (ep.rank(), ep.size());
    let mut g = rng(SEED, 1, me.0, 11);
    for it in 0..ITERS {
        let cnt = count(SEED, it);
        let root = Rank((it as u32 * 3 + 1) % n);
        traffic.send_some(ep, it);

        // f64 SUM, dyadic: bit-identical to the sequential reference.
        let ds: Vec<Vec<f64>> = (0..n).map(|r| dyadic(it, r, cnt)).collect();
        let want = bits(&reference(&ds, &Op::Sum));
        for algo in AllreduceAlgo::ALL.into_iter().chain([AllreduceAlgo::Auto]) {
            let mut x = ds[me.index()].clone();
            let got = coll.allreduce_with(ep, &mut x, Op::Sum, algo);
            if algo == AllreduceAlgo::Smp {
                // Flat through rank 0's window: one host only.
                let e = got.expect_err("the SMP allreduce cannot span hosts");
                assert!(matches!(e, CollError::Unavailable { .. }), "{e}");
                continue;
            }
            if matches!(algo, AllreduceAlgo::OneSided | AllreduceAlgo::AllToAll)
                && 8 * cnt > SMP_ALLREDUCE_MAX_BYTES
            {
                assert!(got.is_err(), "{algo:?} allreduce of {cnt} f64s");
                continue;
            }
            got.unwrap_or_else(|e| panic!("rank {me}: allreduce {algo:?}: {e}"));
            assert_eq!(bits(&x), want, "allreduce {algo:?} of dyadic f64s");
        }
        let mut x = ds[me.index()].clone();
        coll.reduce(ep, &mut x, Op::Sum, root).expect("reduce f64");
        if me == root {
            assert_eq!(bits(&x), want, "reduce of dyadic f64s");
        }

        // f64 SUM over 16 orders of magnitude: near the reference, the
        // same bits on every rank and when repeated with other skew.
        let fs: Vec<Vec<f64>> = (0..n).map(|r| f64s(SEED, it, r, cnt)).collect();
        let near = reference(&fs, &Op::Sum);
        let mut x = fs[me.index()].clone();
        coll.allreduce(ep, &mut x, Op::Sum).expect("allreduce f64");
        for (i, (a, b)) in x.iter().zip(&near).enumerate() {
            let mag: f64 = fs.iter().map(|v| v[i].abs()).sum();
            assert!(
                (a - b).abs() <= mag * 1e-15 * f64::from(n),
                "allreduce f64 element {i}: {a} vs reference {b}"
            );
        }
        std::thread::sleep(Duration::from_micros(g.random_range(0..200)));
        let mut again = fs[me.index()].clone();
        coll.allreduce(ep, &mut again, Op::Sum)
            .expect("allreduce f64");
        assert_eq!(bits(&again), bits(&x), "repeated allreduce differs");
        let everyone = coll.allgather(ep, &bits(&x)).expect("allgather bits");
        for r in 0..n as usize {
            assert_eq!(
                &everyone[r * cnt..(r + 1) * cnt],
                &bits(&x)[..],
                "f64 allreduce bits of rank {r} differ from rank {me}'s"
            );
        }

        // Integers, exactly.
        let is: Vec<Vec<i64>> = (0..n).map(|r| i64s(SEED, it, r, cnt)).collect();
        for op in [Op::Sum, Op::Min, Op::Max] {
            let mut x = is[me.index()].clone();
            coll.allreduce(ep, &mut x, op).expect("allreduce i64");
            assert_eq!(x, reference(&is, &op), "allreduce i64 {op:?}");
        }
        let us: Vec<Vec<u64>> = (0..n).map(|r| u64s(SEED, it, r, cnt)).collect();
        for op in [Op::And, Op::Or, Op::Xor, Op::Sum] {
            let mut x = us[me.index()].clone();
            coll.allreduce_with(ep, &mut x, op, AllreduceAlgo::ReduceBcast)
                .expect("allreduce u64");
            assert_eq!(x, reference(&us, &op), "allreduce u64 {op:?}");
        }
        let mut x = is[me.index()].clone();
        coll.reduce(ep, &mut x, Op::Min, root).expect("reduce i64");
        if me == root {
            assert_eq!(x, reference(&is, &Op::Min), "reduce i64 min");
        }

        // Broadcast and allgather.
        let mut x = if me == root {
            us[root.index()].clone()
        } else {
            vec![0; cnt]
        };
        coll.bcast(ep, &mut x, root).expect("bcast");
        assert_eq!(x, us[root.index()], "bcast from {root}");
        assert_eq!(
            coll.allgather(ep, &us[me.index()]).expect("allgather"),
            us.concat(),
            "allgather"
        );
    }
}

// ---- alltoall(v), gather(v), scatter(v), scan, exscan ----

/// What member `from` sends member `to` at element `e` of iteration `it`.
fn val(it: u64, from: u32, to: u32, e: usize) -> u64 {
    (it << 48) ^ (u64::from(from) << 32) ^ (u64::from(to) << 16) ^ e as u64
}

/// The personalized collectives and the scans against what each member
/// must get, every root, counts per pair that differ (zero and past one
/// frame included), blocking and non-blocking.
fn personalized(ep: &mut Endpoint, coll: &Collectives, traffic: &mut Traffic) {
    let (me, n) = (ep.rank().0, ep.size());
    let bits_of = |v: &[f64]| bits(v);
    for it in 0..ITERS / 3 {
        traffic.send_some(ep, it);
        let vc = |from: u32, to: u32| count(SEED, it * 977 + u64::from(from * 31 + to));
        let k = count(SEED, it + 500).min(600);
        let blocks = |from: u32, cnt: &dyn Fn(u32) -> usize| -> Vec<u64> {
            (0..n)
                .flat_map(|to| (0..cnt(to)).map(move |e| val(it, from, to, e)))
                .collect()
        };
        let send = blocks(me, &|_| k);
        let want: Vec<u64> = (0..n)
            .flat_map(|f| (0..k).map(move |e| val(it, f, me, e)))
            .collect();
        assert_eq!(coll.alltoall(ep, &send).expect("alltoall"), want);
        let counts: Vec<usize> = (0..n).map(|to| vc(me, to)).collect();
        let req = coll
            .ialltoallv(ep, &blocks(me, &|to| vc(me, to)), &counts)
            .expect("ialltoallv");
        let got = req.wait(ep).expect("ialltoallv");
        for f in 0..n {
            let want: Vec<u64> = (0..vc(f, me)).map(|e| val(it, f, me, e)).collect();
            assert_eq!(got.block(f as usize), &want[..], "alltoallv from {f}");
        }
        for root in 0..n {
            let r = Rank(root);
            let all = coll
                .gatherv(
                    ep,
                    &blocks(me, &|to| if to == root { vc(me, to) } else { 0 }),
                    r,
                )
                .expect("gatherv");
            if me == root {
                for f in 0..n {
                    let want: Vec<u64> = (0..vc(f, root)).map(|e| val(it, f, root, e)).collect();
                    assert_eq!(all.block(f as usize), &want[..], "gatherv to {root}");
                }
            }
            let mine: Vec<u64> = (0..k).map(|e| val(it, me, root, e)).collect();
            let all = coll.gather(ep, &mine, r).expect("gather");
            if me == root {
                let want: Vec<u64> = (0..n)
                    .flat_map(|f| (0..k).map(move |e| val(it, f, root, e)))
                    .collect();
                assert_eq!(all, want, "gather to {root}");
            }
            let send = if me == root {
                blocks(root, &|_| k)
            } else {
                Vec::new()
            };
            let mut mine = vec![0u64; k];
            coll.scatter(ep, &send, &mut mine, r).expect("scatter");
            assert_eq!(
                mine,
                (0..k).map(|e| val(it, root, me, e)).collect::<Vec<_>>()
            );
            let (send, counts) = if me == root {
                (
                    blocks(root, &|to| vc(root, to)),
                    (0..n).map(|to| vc(root, to)).collect(),
                )
            } else {
                (Vec::new(), Vec::new())
            };
            let mine = coll.scatterv(ep, &send, &counts, r).expect("scatterv");
            let want: Vec<u64> = (0..vc(root, me)).map(|e| val(it, root, me, e)).collect();
            assert_eq!(mine, want, "scatterv from {root}");
        }
        // Scans: integers exactly, dyadic f64s bit for bit, wide-range
        // f64s the same bits on repetition.
        let cnt = count(SEED, it + 900);
        let is: Vec<Vec<i64>> = (0..n).map(|r| i64s(SEED, it, r, cnt)).collect();
        let prefix = |upto: usize, op: Op| reference(&is[..upto], &op);
        for op in [Op::Sum, Op::Min, Op::Max] {
            let mut x = is[me as usize].clone();
            coll.scan(ep, &mut x, op).expect("scan");
            assert_eq!(x, prefix(me as usize + 1, op), "scan {op:?}");
            let ex = coll.exscan(ep, &is[me as usize], op).expect("exscan");
            assert_eq!(
                ex,
                (me > 0).then(|| prefix(me as usize, op)),
                "exscan {op:?}"
            );
        }
        let ds: Vec<Vec<f64>> = (0..n).map(|r| dyadic(it, r, cnt)).collect();
        let got = coll
            .iscan(ep, ds[me as usize].clone(), Op::Sum)
            .expect("iscan")
            .wait(ep)
            .expect("iscan");
        assert_eq!(
            bits_of(&got),
            bits_of(&reference(&ds[..=me as usize], &Op::Sum))
        );
        let fs = f64s(SEED, it, me, cnt);
        let mut a = fs.clone();
        coll.scan(ep, &mut a, Op::Sum).expect("scan f64");
        std::thread::sleep(Duration::from_micros(u64::from(me) * 100));
        let mut b = fs;
        coll.scan(ep, &mut b, Op::Sum).expect("scan f64");
        assert_eq!(bits_of(&a), bits_of(&b), "repeated scan differs");
    }
}

// ---- non-blocking ----

fn nonblocking(ep: &mut Endpoint, coll: &Collectives, traffic: &mut Traffic) {
    let (me, n) = (ep.rank(), ep.size());
    let mut g = rng(SEED, 2, me.0, 12);
    for it in 0..ITERS {
        let it = it + 1000;
        let cnt = count(SEED, it);
        let root = Rank((it as u32 * 5 + 2) % n);
        if it as u32 % n == me.0 {
            // This rank is late: the others' requests must not need it
            // to make progress on their own parts.
            std::thread::sleep(Duration::from_micros(g.random_range(0..500)));
        }
        let ds: Vec<Vec<f64>> = (0..n).map(|r| dyadic(it, r, cnt)).collect();
        let is: Vec<Vec<i64>> = (0..n).map(|r| i64s(SEED, it, r, cnt)).collect();
        let us: Vec<Vec<u64>> = (0..n).map(|r| u64s(SEED, it, r, cnt)).collect();
        let r1 = coll
            .iallreduce(ep, ds[me.index()].clone(), Op::Sum)
            .expect("iallreduce");
        let r2 = coll
            .ireduce(ep, is[me.index()].clone(), Op::Max, root)
            .expect("ireduce");
        traffic.send_some(ep, it);
        let mine = if me == root {
            us[root.index()].clone()
        } else {
            vec![0; cnt]
        };
        let r3 = coll.ibcast(ep, mine, root).expect("ibcast");
        let r4 = coll.iallgather(ep, &us[me.index()]).expect("iallgather");
        let mut r5 = coll.ibarrier(ep).expect("ibarrier");
        while !r5.test(ep).expect("ibarrier test") {}
        assert_eq!(r4.wait(ep).expect("iallgather"), us.concat(), "iallgather");
        assert_eq!(r3.wait(ep).expect("ibcast"), us[root.index()], "ibcast");
        let m = r2.wait(ep).expect("ireduce");
        if me == root {
            assert_eq!(m, reference(&is, &Op::Max), "ireduce i64 max");
        }
        assert_eq!(
            bits(&r1.wait(ep).expect("iallreduce")),
            bits(&reference(&ds, &Op::Sum)),
            "iallreduce of dyadic f64s"
        );
    }
}

// ---- point-to-point traffic ----

/// What the receiving side has seen.
#[derive(Default)]
struct Received {
    /// Next sequence number expected from each source.
    next: Vec<u64>,
    /// The first thing that was wrong.
    bad: Option<String>,
}

/// Checked point-to-point messages: from each source, sequence numbers in
/// order, with bytes the receiver recomputes; sizes from empty to several
/// frames.
struct Traffic {
    handler: HandlerId,
    sent: Vec<u64>,
    got: Rc<RefCell<Received>>,
}

fn payload(src: u32, seq: u64) -> Vec<u8> {
    let len = [0usize, 3, 64, 700, 9000, 20_000][(seq % 6) as usize];
    (0..len)
        .map(|i| (u64::from(src) * 131 + seq * 31 + i as u64 * 7 + (i as u64 >> 8)) as u8)
        .collect()
}

impl Traffic {
    fn register(b: &mut EndpointBuilder) -> Traffic {
        let got: Rc<RefCell<Received>> = Rc::default();
        got.borrow_mut().next = vec![0; b.size() as usize];
        let st = Rc::clone(&got);
        let handler = b.register("net-p2p", move |_ctx, mut m| {
            let st = Rc::clone(&st);
            async move {
                let v = m.receive_vec().await?;
                let src = m.source().0;
                let mut s = st.borrow_mut();
                let want = s.next[src as usize];
                let seq = v
                    .get(..8)
                    .map(|b| u64::from_le_bytes(b.try_into().unwrap()));
                if s.bad.is_none() && (seq != Some(want) || v[8..] != payload(src, want)[..]) {
                    s.bad = Some(format!(
                        "message {want} from rank {src}: got sequence {seq:?}, {} bytes",
                        v.len()
                    ));
                }
                s.next[src as usize] += 1;
                Ok(())
            }
        });
        Traffic {
            handler,
            sent: vec![0; b.size() as usize],
            got,
        }
    }

    /// Send to the same rank on the other host, to a neighbour on this
    /// host, and to one more rank that changes with `round`.
    fn send_some(&mut self, ep: &mut Endpoint, round: u64) {
        let (me, n) = (ep.rank().0, ep.size());
        let per_host = n / 2;
        let host0 = me / per_host * per_host;
        let dests = [
            (me + per_host) % n,
            host0 + (me - host0 + 1) % per_host,
            (me + 1 + round as u32 % (n - 1)) % n,
        ];
        for d in dests {
            if d == me {
                continue;
            }
            let seq = self.sent[d as usize];
            ep.send(
                Rank(d),
                self.handler,
                &[&seq.to_le_bytes(), &payload(me, seq)],
            )
            .expect("send");
            self.sent[d as usize] += 1;
        }
    }

    /// Learn how many messages each rank sent here, wait for all, check.
    fn finish(&self, ep: &mut Endpoint, coll: &Collectives) {
        let (me, n) = (ep.rank().index(), ep.size() as usize);
        let table = coll.allgather(ep, &self.sent).expect("allgather counts");
        let want: Vec<u64> = (0..n).map(|s| table[s * n + me]).collect();
        assert!(want.iter().sum::<u64>() > 0, "no traffic to rank {me}");
        let got = Rc::clone(&self.got);
        ep.wait_until(|| got.borrow().next.iter().zip(&want).all(|(a, b)| a >= b))
            .expect("wait for traffic");
        let g = got.borrow();
        if let Some(bad) = &g.bad {
            panic!("rank {me}: {bad}");
        }
        assert_eq!(g.next, want, "rank {me}: messages received per source");
        drop(g);
        coll.barrier(ep).expect("final barrier");
    }
}
