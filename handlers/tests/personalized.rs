//! Alltoall(v), gather(v), scatter(v), scan and exscan against a
//! sequential computation of what every member must get: on 1, 2, 3, 5
//! and 8 ranks (powers of two and not, more ranks than this machine's
//! cores), every root, counts that differ per member (zero included) for
//! the v-forms, blocking and non-blocking, several requests outstanding;
//! floats bit-identical run to run and on repetition.

mod common;

use common::{f64s, i64s, rng, u64s};
use fastmsg::{Endpoint, Rank};
use fastmsg_handlers::{custom, CollConfig, Collectives, Op, Reduce};
use rand::Rng;
use std::time::Duration;

const SEED: u64 = 0x5ca7_7e12;
const RANKS: [u32; 5] = [1, 2, 3, 5, 8];

/// The value member `from` sends member `to` at element `e` (iteration `it`).
fn val(it: u64, from: u32, to: u32, e: usize) -> u64 {
    (it << 48) ^ (u64::from(from) << 32) ^ (u64::from(to) << 16) ^ e as u64
}

/// How many elements member `from` sends member `to` in a v-collective.
fn vcount(it: u64, from: u32, to: u32) -> usize {
    let mut g = rng(SEED, it, from, u64::from(to) + 100);
    match g.random_range(0..6) {
        0 => 0,
        1 => g.random_range(1100..2100), // past one 8 KiB frame
        _ => g.random_range(1..9),
    }
}

/// Sequential inclusive prefixes, left to right.
fn prefixes<T: fastmsg_handlers::Element, R: Reduce<T>>(xs: &[Vec<T>], op: &R) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = Vec::new();
    for x in xs {
        let next = match out.last() {
            None => x.clone(),
            Some(p) => p.iter().zip(x).map(|(a, b)| op.combine(*a, *b)).collect(),
        };
        out.push(next);
    }
    out
}

fn exchanges(ep: &mut Endpoint, coll: &Collectives, it: u64) {
    let (me, n) = (ep.rank().0, ep.size());
    // Alltoall: k elements per block.
    let k = (it as usize % 4) * 3;
    let send: Vec<u64> = (0..n)
        .flat_map(|to| (0..k).map(move |e| val(it, me, to, e)))
        .collect();
    let want: Vec<u64> = (0..n)
        .flat_map(|from| (0..k).map(move |e| val(it, from, me, e)))
        .collect();
    assert_eq!(coll.alltoall(ep, &send).expect("alltoall"), want);
    // Alltoallv.
    let counts: Vec<usize> = (0..n).map(|to| vcount(it, me, to)).collect();
    let send: Vec<u64> = (0..n)
        .flat_map(|to| (0..counts[to as usize]).map(move |e| val(it, me, to, e)))
        .collect();
    let got = coll.alltoallv(ep, &send, &counts).expect("alltoallv");
    assert_eq!(got.len(), n as usize);
    for from in 0..n {
        let want: Vec<u64> = (0..vcount(it, from, me))
            .map(|e| val(it, from, me, e))
            .collect();
        assert_eq!(got.block(from as usize), &want[..], "alltoallv from {from}");
    }
    for root in 0..n {
        let r = Rank(root);
        // Gather.
        let mine: Vec<u64> = (0..k).map(|e| val(it, me, root, e)).collect();
        let all = coll.gather(ep, &mine, r).expect("gather");
        if me == root {
            let want: Vec<u64> = (0..n)
                .flat_map(|from| (0..k).map(move |e| val(it, from, root, e)))
                .collect();
            assert_eq!(all, want, "gather to {root}");
        } else {
            assert!(all.is_empty());
        }
        // Gatherv.
        let mine: Vec<u64> = (0..vcount(it, me, root))
            .map(|e| val(it, me, root, e))
            .collect();
        let all = coll.gatherv(ep, &mine, r).expect("gatherv");
        if me == root {
            for from in 0..n {
                let want: Vec<u64> = (0..vcount(it, from, root))
                    .map(|e| val(it, from, root, e))
                    .collect();
                assert_eq!(all.block(from as usize), &want[..], "gatherv to {root}");
            }
        } else {
            assert!(all.is_empty());
        }
        // Scatter.
        let send: Vec<u64> = if me == root {
            (0..n)
                .flat_map(|to| (0..k).map(move |e| val(it, root, to, e)))
                .collect()
        } else {
            Vec::new()
        };
        let mut mine = vec![0u64; k];
        coll.scatter(ep, &send, &mut mine, r).expect("scatter");
        let want: Vec<u64> = (0..k).map(|e| val(it, root, me, e)).collect();
        assert_eq!(mine, want, "scatter from {root}");
        // Scatterv.
        let counts: Vec<usize> = (0..n).map(|to| vcount(it, root, to)).collect();
        let send: Vec<u64> = (0..n)
            .flat_map(|to| (0..counts[to as usize]).map(move |e| val(it, root, to, e)))
            .collect();
        let (send, counts) = if me == root {
            (send, counts)
        } else {
            (Vec::new(), Vec::new())
        };
        let mine = coll.scatterv(ep, &send, &counts, r).expect("scatterv");
        let want: Vec<u64> = (0..vcount(it, root, me))
            .map(|e| val(it, root, me, e))
            .collect();
        assert_eq!(mine, want, "scatterv from {root}");
    }
}

fn scans(ep: &mut Endpoint, coll: &Collectives, it: u64) {
    let (me, n) = (ep.rank().0, ep.size());
    let cnt = [1, 7, 0, 1500][it as usize % 4];
    let mi = me as usize;
    let is: Vec<Vec<i64>> = (0..n).map(|r| i64s(SEED, it, r, cnt)).collect();
    for op in [Op::Sum, Op::Min, Op::Max] {
        let want = prefixes(&is, &op);
        let mut x = is[mi].clone();
        coll.scan(ep, &mut x, op).expect("scan");
        assert_eq!(x, want[mi], "scan i64 {op:?}");
        let ex = coll.exscan(ep, &is[mi], op).expect("exscan");
        assert_eq!(ex, (me > 0).then(|| want[mi - 1].clone()), "exscan {op:?}");
    }
    let us: Vec<Vec<u64>> = (0..n).map(|r| u64s(SEED, it, r, cnt)).collect();
    for op in [Op::And, Op::Or, Op::Xor] {
        let mut x = us[mi].clone();
        coll.scan(ep, &mut x, op).expect("scan u64");
        assert_eq!(x, prefixes(&us, &op)[mi], "scan u64 {op:?}");
    }
    // Not commutative: the left operand always comes from lower members.
    let first = custom(|a: u64, _b: u64| a);
    let mut x = us[mi].clone();
    coll.scan(ep, &mut x, first).expect("scan first");
    assert_eq!(x, us[0], "scan of 'first' gives member 0's data");
    let ex = coll.exscan(ep, &us[mi], first).expect("exscan first");
    assert_eq!(ex, (me > 0).then(|| us[0].clone()));
    // Floats: dyadic inputs sum exactly in any association.
    let ds: Vec<Vec<f64>> = (0..n)
        .map(|r| {
            u64s(SEED, it, r, cnt)
                .iter()
                .map(|v| (*v >> 44) as f64 / 1024.0)
                .collect()
        })
        .collect();
    let mut x = ds[mi].clone();
    coll.scan(ep, &mut x, Op::Sum).expect("scan f64");
    assert_eq!(x, prefixes(&ds, &Op::Sum)[mi], "scan of dyadic f64s");
    // Floats over 16 orders of magnitude: near the sequential prefix, and
    // the same bits when repeated with other arrival orders.
    let fs: Vec<Vec<f64>> = (0..n).map(|r| f64s(SEED, it, r, cnt)).collect();
    let near = prefixes(&fs, &Op::Sum);
    let mut a = fs[mi].clone();
    coll.scan(ep, &mut a, Op::Sum).expect("scan f64");
    for (i, (x, y)) in a.iter().zip(&near[mi]).enumerate() {
        let mag: f64 = fs[..=mi].iter().map(|v| v[i].abs()).sum();
        assert!((x - y).abs() <= mag * 1e-15 * f64::from(n), "scan f64 {i}");
    }
    if me % 2 == 1 {
        std::thread::sleep(Duration::from_micros(300));
    }
    let mut b = fs[mi].clone();
    coll.scan(ep, &mut b, Op::Sum).expect("scan f64");
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a), bits(&b), "repeated scan differs");
    let e1 = coll.exscan(ep, &fs[mi], Op::Sum).expect("exscan f64");
    let e2 = coll
        .iexscan(ep, fs[mi].clone(), Op::Sum)
        .expect("iexscan")
        .wait(ep)
        .expect("iexscan");
    assert_eq!(e1.map(|v| bits(&v)), e2.map(|v| bits(&v)));
}

fn nonblocking(ep: &mut Endpoint, coll: &Collectives, it: u64) {
    let (me, n) = (ep.rank().0, ep.size());
    let root = Rank((it as u32 * 3 + 1) % n);
    if it as u32 % n == me {
        std::thread::sleep(Duration::from_micros(500));
    }
    let k = 3;
    let send: Vec<u64> = (0..n)
        .flat_map(|to| (0..k).map(move |e| val(it, me, to, e)))
        .collect();
    let counts: Vec<usize> = (0..n).map(|to| vcount(it, me, to)).collect();
    let sendv: Vec<u64> = (0..n)
        .flat_map(|to| (0..counts[to as usize]).map(move |e| val(it, me, to, e)))
        .collect();
    let r1 = coll.ialltoall(ep, &send).expect("ialltoall");
    let r2 = coll.ialltoallv(ep, &sendv, &counts).expect("ialltoallv");
    let r3 = coll.igather(ep, &[u64::from(me)], root).expect("igather");
    let mine: Vec<u64> = vec![u64::from(me); me as usize];
    let r4 = coll.igatherv(ep, &mine, root).expect("igatherv");
    let all: Vec<u64> = (0..n).map(|r| u64::from(r) * 10).collect();
    let r5 = coll.iscatter(ep, &all, 1, root).expect("iscatter");
    let sv: Vec<u64> = (0..n)
        .flat_map(|r| vec![u64::from(r); r as usize])
        .collect();
    let cs: Vec<usize> = (0..n as usize).collect();
    let r6 = coll.iscatterv(ep, &sv, &cs, root).expect("iscatterv");
    let r7 = coll
        .iscan(ep, vec![u64::from(me) + 1], Op::Sum)
        .expect("iscan");
    let r8 = coll
        .iexscan(ep, vec![u64::from(me) + 1], Op::Sum)
        .expect("iexscan");
    // Waited in reverse order.
    let tri = |m: u32| u64::from(m) * u64::from(m + 1) / 2;
    assert_eq!(
        r8.wait(ep).expect("iexscan"),
        (me > 0).then(|| vec![tri(me)])
    );
    assert_eq!(r7.wait(ep).expect("iscan"), vec![tri(me + 1)]);
    assert_eq!(
        r6.wait(ep).expect("iscatterv"),
        vec![u64::from(me); me as usize]
    );
    assert_eq!(r5.wait(ep).expect("iscatter"), vec![u64::from(me) * 10]);
    let g = r4.wait(ep).expect("igatherv");
    if Rank(me) == root {
        assert_eq!(g.data(), &sv[..]);
        assert_eq!(g.counts().collect::<Vec<_>>(), cs);
    }
    let g = r3.wait(ep).expect("igather");
    if Rank(me) == root {
        assert_eq!(g, (0..u64::from(n)).collect::<Vec<_>>());
    }
    let got = r2.wait(ep).expect("ialltoallv");
    for from in 0..n {
        let want: Vec<u64> = (0..vcount(it, from, me))
            .map(|e| val(it, from, me, e))
            .collect();
        assert_eq!(got.block(from as usize), &want[..]);
    }
    let want: Vec<u64> = (0..n)
        .flat_map(|from| (0..k).map(move |e| val(it, from, me, e)))
        .collect();
    assert_eq!(r1.wait(ep).expect("ialltoall"), want);
}

#[test]
fn every_new_collective_matches_the_sequential_result() {
    let _serial = common::serial();
    for n in RANKS {
        common::run(n, CollConfig::default(), |b, coll| {
            let mut ep = b.start()?;
            for it in 0..4 {
                exchanges(&mut ep, &coll, it);
                scans(&mut ep, &coll, it);
                nonblocking(&mut ep, &coll, it);
            }
            // On a sub-group too (the odd members, in reverse order).
            let size = ep.size();
            let odd: Vec<Rank> = (0..size).rev().filter(|r| r % 2 == 1).map(Rank).collect();
            if ep.rank().0 % 2 == 1 {
                let sub = coll.subgroup(&odd)?;
                let me = sub.members().iter().position(|&r| r == ep.rank()).unwrap();
                let got = sub.alltoall(&mut ep, &vec![me as u32; odd.len()])?;
                assert_eq!(got, (0..odd.len() as u32).collect::<Vec<_>>());
                let mut x = [me as u64 + 1];
                sub.scan(&mut ep, &mut x, Op::Sum)?;
                assert_eq!(x[0], (me as u64 + 1) * (me as u64 + 2) / 2);
            }
            coll.barrier(&mut ep)?;
            ep.close()?;
            Ok(())
        });
    }
}

/// Wrong arguments at one member fail the call on every member, typed.
#[test]
fn bad_arguments_fail_every_member() {
    let _serial = common::serial();
    let out = common::run(3, CollConfig::default(), |b, coll| {
        let mut ep = b.start()?;
        let me = ep.rank().0;
        // Member 1's send is not 3 blocks.
        let send = vec![1u32; if me == 1 { 4 } else { 3 }];
        let e1 = coll.alltoall(&mut ep, &send).unwrap_err().to_string();
        // The root's counts do not add up.
        let e2 = coll
            .scatterv(&mut ep, &[1u32, 2], &[1, 1, 1], Rank(2))
            .unwrap_err()
            .to_string();
        ep.close()?;
        Ok((e1, e2))
    });
    for (r, (e1, e2)) in out.iter().enumerate() {
        assert!(e1.contains("alltoall: 4 elements"), "rank {r}: {e1}");
        assert!(
            e2.contains("scatterv: the root passed 3 counts"),
            "rank {r}: {e2}"
        );
    }
}
