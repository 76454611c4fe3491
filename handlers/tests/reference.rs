//! Every collective against a sequential reference, for N = 1 … 9 ranks
//! (threads), random data and counts (some past one 8 KiB frame, so
//! messages span several pieces), random roots, every algorithm, blocking
//! and non-blocking (several outstanding, waited for in shuffled order),
//! on the world and on sub-groups.

mod common;

use common::{count, f64s, i64s, rng, u64s};
use fastmsg::{Endpoint, Rank};
use fastmsg_handlers::{
    custom, reference, AllreduceAlgo, BarrierAlgo, CollConfig, Collectives, Op, Reduce,
    SMP_ALLREDUCE_MAX_BYTES,
};
use rand::seq::SliceRandom;
use rand::Rng;

const SEED: u64 = 0x00c0_11ec;

/// Panic (aborting the job) on a collective error, naming the rank.
macro_rules! ok {
    ($me:expr, $e:expr) => {
        $e.unwrap_or_else(|e| panic!("rank {}: {} failed: {e}", $me, stringify!($e)))
    };
}

fn inputs<T>(n: u32, f: impl Fn(u32) -> Vec<T>) -> Vec<Vec<T>> {
    (0..n).map(f).collect()
}

/// Floats: close to the sequential sum (the association differs).
fn assert_close(got: &[f64], want: &[f64], xs: &[Vec<f64>], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let mag: f64 = xs.iter().map(|x| x[i].abs()).sum();
        assert!(
            (g - w).abs() <= 1e-12 * mag.max(1e-300),
            "{what}[{i}]: {g} vs reference {w}"
        );
    }
}

/// One iteration of every rooted and unrooted reduction on `coll` (whose
/// members are `members`), checked against the reference. Returns the
/// bits of the f64 allreduce results (to compare across ranks).
fn reductions(
    ep: &mut Endpoint,
    coll: &Collectives,
    members: &[Rank],
    it: u64,
    world: bool,
) -> Vec<u64> {
    let me = ep.rank();
    let n = members.len() as u32;
    let idx = members.iter().position(|&r| r == me).unwrap() as u32;
    let cnt = count(SEED, it);
    let root_i = (it as u32 * 7 + 3) % n;
    let root = members[root_i as usize];
    let u = |i: u32| u64s(SEED, it, members[i as usize].0, cnt);
    let s = |i: u32| i64s(SEED, it, members[i as usize].0, cnt);
    let f = |i: u32| f64s(SEED, it, members[i as usize].0, cnt);
    let (us, ss, fs) = (inputs(n, u), inputs(n, s), inputs(n, f));

    // Broadcast.
    let mut d = if me == root { u(root_i) } else { vec![0; cnt] };
    ok!(me, coll.bcast(ep, &mut d, root));
    assert_eq!(d, u(root_i), "bcast it={it}");

    // Reduce to a root: integer operators exactly, floats closely, and
    // order-revealing non-commutative operators exactly.
    for op in [Op::Sum, Op::Min, Op::Max, Op::And, Op::Or, Op::Xor] {
        let mut x = u(idx);
        ok!(me, coll.reduce(ep, &mut x, op, root));
        let want = if me == root {
            reference(&us, &op)
        } else {
            u(idx)
        };
        assert_eq!(x, want, "reduce u64 {op:?} it={it}");
    }
    for op in [Op::Sum, Op::Min, Op::Max] {
        let mut x = s(idx);
        ok!(me, coll.reduce(ep, &mut x, op, root));
        if me == root {
            assert_eq!(x, reference(&ss, &op), "reduce i64 {op:?} it={it}");
        }
    }
    let mut x = f(idx);
    ok!(me, coll.reduce(ep, &mut x, Op::Sum, root));
    if me == root {
        assert_close(&x, &reference(&fs, &Op::Sum), &fs, "reduce f64 sum");
    }
    let first: fn(u64, u64) -> u64 = |a, _| a;
    let last: fn(u64, u64) -> u64 = |_, b| b;
    for (name, op) in [("first", custom(first)), ("last", custom(last))] {
        let mut x = u(idx);
        ok!(me, coll.reduce(ep, &mut x, op, root));
        if me == root {
            assert_eq!(x, reference(&us, &op), "reduce custom {name} it={it}");
        }
    }
    // A commutative custom operator may use the rotated tree: still exact
    // for integers.
    let mut x = u(idx);
    let wsum = custom(|a: u64, b: u64| a.wrapping_add(b)).commutative();
    ok!(me, coll.reduce(ep, &mut x, wsum, root));
    if me == root {
        assert_eq!(x, reference(&us, &wsum), "reduce commutative custom");
    }

    // Allreduce, every algorithm that runs on this group and size.
    let mut bits = Vec::new();
    for algo in AllreduceAlgo::ALL.into_iter().chain([AllreduceAlgo::Auto]) {
        let fits = world && 8 * cnt <= SMP_ALLREDUCE_MAX_BYTES;
        if algo.is_one_sided() && !fits {
            continue;
        }
        for op in [Op::Sum, Op::Xor] {
            let mut x = u(idx);
            ok!(me, coll.allreduce_with(ep, &mut x, op, algo));
            assert_eq!(x, reference(&us, &op), "allreduce {algo:?} {op:?} it={it}");
        }
        let mut x = s(idx);
        ok!(me, coll.allreduce_with(ep, &mut x, Op::Min, algo));
        assert_eq!(x, reference(&ss, &Op::Min), "allreduce {algo:?} i64 min");
        let mut x = u(idx);
        ok!(me, coll.allreduce_with(ep, &mut x, custom(first), algo));
        assert_eq!(x, u(0), "allreduce {algo:?} keeps rank order");
        let mut x = f(idx);
        ok!(me, coll.allreduce_with(ep, &mut x, Op::Sum, algo));
        assert_close(&x, &reference(&fs, &Op::Sum), &fs, "allreduce f64");
        bits.extend(x.iter().map(|v| v.to_bits()));
    }

    // Allgather.
    let got = ok!(me, coll.allgather(ep, &u(idx)));
    assert_eq!(got, us.concat(), "allgather it={it}");
    bits
}

/// Several non-blocking collectives outstanding at once, started in the
/// same order everywhere, waited for in a per-rank shuffled order.
fn nonblocking(ep: &mut Endpoint, coll: &Collectives, members: &[Rank], it: u64) {
    let me = ep.rank();
    let n = members.len() as u32;
    let idx = members.iter().position(|&r| r == me).unwrap() as u32;
    let cnt = count(SEED ^ 1, it);
    let root_i = (it as u32 * 5 + 1) % n;
    let root = members[root_i as usize];
    let u = |i: u32, salt: u64| u64s(SEED ^ salt, it, members[i as usize].0, cnt);
    let ar1: Vec<Vec<u64>> = (0..n).map(|i| u(i, 11)).collect();
    let ar2: Vec<Vec<u64>> = (0..n).map(|i| u(i, 12)).collect();
    let red: Vec<Vec<u64>> = (0..n).map(|i| u(i, 13)).collect();

    let r_bar = ok!(me, coll.ibarrier(ep));
    let r_ar1 = ok!(me, coll.iallreduce(ep, u(idx, 11), Op::Sum));
    let r_bc = ok!(
        me,
        coll.ibcast(
            ep,
            if me == root {
                u(root_i, 14)
            } else {
                vec![0; cnt]
            },
            root
        )
    );
    let r_red = ok!(me, coll.ireduce(ep, u(idx, 13), Op::Max, root));
    let r_ag = ok!(me, coll.iallgather(ep, &u(idx, 15)));
    let r_ar2 = ok!(me, coll.iallreduce(ep, u(idx, 12), Op::Or));
    let r_bar2 = ok!(me, coll.ibarrier(ep));

    let mut order: Vec<usize> = (0..7).collect();
    order.shuffle(&mut rng(SEED, it, me.0, 99));
    let (mut a, mut b, mut c, mut d, mut e, mut f, mut g) = (
        Some(r_bar),
        Some(r_ar1),
        Some(r_bc),
        Some(r_red),
        Some(r_ag),
        Some(r_ar2),
        Some(r_bar2),
    );
    for k in order {
        match k {
            0 => ok!(me, a.take().unwrap().wait(ep)),
            1 => assert_eq!(
                ok!(me, b.take().unwrap().wait(ep)),
                reference(&ar1, &Op::Sum)
            ),
            2 => assert_eq!(ok!(me, c.take().unwrap().wait(ep)), u(root_i, 14)),
            3 => {
                let got = ok!(me, d.take().unwrap().wait(ep));
                let want = if me == root {
                    reference(&red, &Op::Max)
                } else {
                    red[idx as usize].clone()
                };
                assert_eq!(got, want, "ireduce it={it}");
            }
            4 => {
                let got = ok!(me, e.take().unwrap().wait(ep));
                let want: Vec<u64> = (0..n).flat_map(|i| u(i, 15)).collect();
                assert_eq!(got, want, "iallgather it={it}");
            }
            5 => assert_eq!(
                ok!(me, f.take().unwrap().wait(ep)),
                reference(&ar2, &Op::Or)
            ),
            _ => ok!(me, g.take().unwrap().wait(ep)),
        }
    }
}

/// Every barrier algorithm, checked through a counter shared by the
/// threads: nobody leaves barrier `i` before all arrived at it.
fn barriers(
    ep: &mut Endpoint,
    coll: &Collectives,
    arrived: &std::sync::atomic::AtomicU64,
    round: &mut u64,
) {
    use std::sync::atomic::Ordering::SeqCst;
    let n = u64::from(ep.size());
    let me = ep.rank();
    for algo in BarrierAlgo::ALL.into_iter().chain([BarrierAlgo::Auto]) {
        arrived.fetch_add(1, SeqCst);
        *round += 1;
        ok!(me, coll.barrier_with(ep, algo));
        assert!(
            arrived.load(SeqCst) >= *round * n,
            "{algo:?} let rank {me} out early"
        );
    }
    arrived.fetch_add(1, SeqCst);
    *round += 1;
    ok!(me, ok!(me, coll.ibarrier(ep)).wait(ep));
    assert!(
        arrived.load(SeqCst) >= *round * n,
        "ibarrier let rank {me} out early"
    );
}

fn world_and_subgroups(n: u32, cfg: CollConfig, iters: u64) {
    let arrived = std::sync::atomic::AtomicU64::new(0);
    let out = common::run(n, cfg, |b, coll| {
        let mut ep = b.start()?;
        let me = ep.rank();
        let world: Vec<Rank> = (0..n).map(Rank).collect();
        let mut round = 0;
        let mut bits = Vec::new();
        for it in 0..iters {
            barriers(&mut ep, &coll, &arrived, &mut round);
            bits.extend(reductions(&mut ep, &coll, &world, it, true));
            nonblocking(&mut ep, &coll, &world, it);
            // A sub-group: a shuffled subset, chosen alike on every rank.
            let mut g = rng(SEED, it, u32::MAX, 7);
            let mut sub = world.clone();
            sub.shuffle(&mut g);
            sub.truncate(g.random_range(1..=n as usize));
            if sub.contains(&me) {
                let sc = ok!(me, coll.subgroup(&sub));
                assert_eq!(sc.members(), &sub[..]);
                reductions(&mut ep, &sc, &sub, it + 1000, false);
                nonblocking(&mut ep, &sc, &sub, it + 1000);
                ok!(me, sc.barrier(&mut ep));
            } else {
                assert!(coll.subgroup(&sub).is_err());
            }
        }
        ep.close()?;
        Ok(bits)
    });
    for (r, b) in out.iter().enumerate() {
        assert_eq!(
            b, &out[0],
            "f64 allreduce bits differ between ranks 0 and {r}"
        );
    }
}

#[test]
fn one_to_three_ranks() {
    let _serial = common::serial();
    for n in 1..=3 {
        world_and_subgroups(n, CollConfig::default(), 30);
    }
}

#[test]
fn four_to_six_ranks() {
    let _serial = common::serial();
    for n in 4..=6 {
        world_and_subgroups(n, CollConfig::default(), 20);
    }
}

#[test]
fn seven_to_nine_ranks() {
    let _serial = common::serial();
    for n in 7..=9 {
        world_and_subgroups(n, CollConfig::default(), 15);
    }
}

#[test]
fn pairwise_ibarrier_and_reduce_bcast_defaults() {
    let _serial = common::serial();
    let cfg = CollConfig {
        ibarrier: BarrierAlgo::PairwiseExchange,
        allreduce: AllreduceAlgo::ReduceBcast,
        barrier: BarrierAlgo::Hierarchical,
        ..CollConfig::default()
    };
    for n in [3, 6] {
        world_and_subgroups(n, cfg.clone(), 4);
    }
}

#[test]
fn bitwise_operators_are_refused_on_floats() {
    let _serial = common::serial();
    common::run(2, CollConfig::default(), |b, coll| {
        let mut ep = b.start()?;
        let mut x = [1.0f64];
        let e = coll.allreduce(&mut ep, &mut x, Op::And).unwrap_err();
        assert!(e.to_string().contains("AND is not defined on f64"), "{e}");
        assert!(Reduce::<f64>::check(&Op::Sum).is_ok());
        ep.close()?;
        Ok(())
    });
}
