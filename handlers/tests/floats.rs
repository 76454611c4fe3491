//! Float reductions give bit-identical results run to run whatever the
//! arrival order: the same inputs are reduced in several runs whose ranks
//! sleep random, run-dependent times before each call (so messages arrive
//! in different orders), and every rank's result bits must agree across
//! runs (and, for allreduce, across ranks).

mod common;

use common::{f64s, rng};
use fastmsg::Rank;
use fastmsg_handlers::{AllreduceAlgo, CollConfig, Op};
use rand::Rng;
use std::time::Duration;

const ITERS: u64 = 25;

/// One run: per iteration, the bits of reduce (at the root), every
/// allreduce algorithm, ireduce and iallreduce, as seen by each rank.
fn run(n: u32, shuffle: u64) -> Vec<Vec<u64>> {
    common::run(n, CollConfig::default(), |b, coll| {
        let mut ep = b.start()?;
        let me = ep.rank();
        let mut g = rng(shuffle, 0, me.0, 5);
        let mut jitter = || {
            if g.random_range(0..3) > 0 {
                std::thread::sleep(Duration::from_micros(g.random_range(0..300)));
            }
        };
        let mut bits = Vec::new();
        for it in 0..ITERS {
            let cnt = 1 + (it as usize * 37) % 120;
            let x = f64s(7, it, me.0, cnt);
            let root = Rank(it as u32 % n);
            jitter();
            let mut y = x.clone();
            coll.reduce(&mut ep, &mut y, Op::Sum, root).unwrap();
            if me == root {
                bits.extend(y.iter().map(|v| v.to_bits()));
            }
            for algo in AllreduceAlgo::ALL {
                jitter();
                let mut y = x.clone();
                coll.allreduce_with(&mut ep, &mut y, Op::Sum, algo).unwrap();
                bits.extend(y.iter().map(|v| v.to_bits()));
            }
            jitter();
            let r1 = coll.ireduce(&ep, x.clone(), Op::Sum, root).unwrap();
            jitter();
            let r2 = coll.iallreduce(&ep, x.clone(), Op::Sum).unwrap();
            jitter();
            let a = r2.wait(&mut ep).unwrap();
            let r = r1.wait(&mut ep).unwrap();
            if me == root {
                bits.extend(r.iter().map(|v| v.to_bits()));
            }
            bits.extend(a.iter().map(|v| v.to_bits()));
        }
        ep.close()?;
        Ok(bits)
    })
}

#[test]
fn float_results_are_bit_identical_across_runs_and_arrival_orders() {
    let _serial = common::serial();
    for n in [3, 5, 8] {
        let first = run(n, 1);
        for shuffle in [2, 3] {
            let again = run(n, shuffle);
            for r in 0..n as usize {
                assert_eq!(
                    first[r], again[r],
                    "rank {r} of {n}: results differ between runs 1 and {shuffle}"
                );
            }
        }
        // Summing the same numbers in another order does change the bits:
        // the check above could fail.
        let xs: Vec<Vec<f64>> = (0..n).map(|r| f64s(7, 1, r, 38)).collect();
        let fwd: Vec<f64> = (0..38).map(|i| xs.iter().map(|x| x[i]).sum()).collect();
        let rev: Vec<f64> = (0..38)
            .map(|i| xs.iter().rev().map(|x| x[i]).sum())
            .collect();
        assert_ne!(
            fwd, rev,
            "the inputs are sensitive to the order of summation"
        );
    }
}
