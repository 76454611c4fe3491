//! 10,000 consecutive barriers of each algorithm without a mismatch, and
//! barriers interleaved with point-to-point traffic.
//!
//! Ranks are threads; a counter they share checks the barrier's promise
//! after every barrier: nobody leaves barrier `i` before every rank has
//! arrived at it. 8 ranks on this 2-core machine (oversubscribed) and 5
//! (not a power of two, the pre/post steps of pairwise exchange).

mod common;

use fastmsg::Rank;
use fastmsg_handlers::{BarrierAlgo, CollConfig, SmpDomain};
use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

fn many_barriers(n: u32, algo: BarrierAlgo, count: u64, cfg: CollConfig) {
    let arrived = AtomicU64::new(0);
    let t0 = std::time::Instant::now();
    common::run(n, cfg, |b, coll| {
        let mut ep = b.start()?;
        let me = ep.rank();
        for i in 1..=count {
            arrived.fetch_add(1, SeqCst);
            coll.barrier_with(&mut ep, algo)
                .unwrap_or_else(|e| panic!("rank {me}: barrier {i}: {e}"));
            let seen = arrived.load(SeqCst);
            assert!(
                seen >= i * u64::from(n),
                "{algo:?}: rank {me} left barrier {i} when only {seen} of {} arrivals happened",
                i * u64::from(n)
            );
        }
        ep.close()?;
        Ok(())
    });
    eprintln!(
        "{count} {} barriers on {n} ranks (threads): {:.1} us each",
        algo.name(),
        t0.elapsed().as_secs_f64() * 1e6 / count as f64
    );
}

#[test]
fn ten_thousand_of_each_algorithm_8_ranks() {
    let _serial = common::serial();
    for algo in BarrierAlgo::ALL.into_iter().chain([BarrierAlgo::Auto]) {
        many_barriers(8, algo, 10_000, CollConfig::default());
    }
}

#[test]
fn ten_thousand_of_each_algorithm_5_ranks() {
    let _serial = common::serial();
    for algo in BarrierAlgo::ALL {
        many_barriers(5, algo, 10_000, CollConfig::default());
    }
}

#[test]
fn ten_thousand_hierarchical_with_several_masters() {
    let _serial = common::serial();
    // Blocks of 2 and 3 ranks act as hosts: the masters' one-sided
    // pairwise exchange runs with 4 and 3 (not a power of two) masters.
    for (n, k) in [(8, 2), (7, 3)] {
        let cfg = CollConfig {
            smp_domain: SmpDomain::Blocks(k),
            ..CollConfig::default()
        };
        many_barriers(n, BarrierAlgo::Hierarchical, 10_000, cfg);
    }
}

/// Every rank sends bursts of messages to random peers between barriers
/// of every algorithm (blocking and not); every message arrives once.
#[test]
fn barriers_interleaved_with_point_to_point() {
    let _serial = common::serial();
    let n = 6u32;
    let rounds = 300u64;
    let arrived = AtomicU64::new(0);
    let got = common::run(n, CollConfig::default(), |mut b, coll| {
        let count = Rc::new(Cell::new(0u64));
        let sum = Rc::new(Cell::new(0u64));
        let (c, s) = (count.clone(), sum.clone());
        let p2p = b.register_fn("p2p", move |_ctx, p| {
            c.set(c.get() + 1);
            s.set(s.get() + u64::from_le_bytes(p.data().try_into()?));
            Ok(())
        });
        let mut ep = b.start()?;
        let me = ep.rank().0;
        let algos: Vec<BarrierAlgo> = BarrierAlgo::ALL.to_vec();
        let mut sent_to = vec![0u64; n as usize];
        for i in 1..=rounds {
            for k in 0..(i % 5) {
                let dest = (me + 1 + (i as u32 + k as u32) % (n - 1)) % n;
                ep.send(Rank(dest), p2p, &[&(u64::from(me) + 1).to_le_bytes()])?;
                sent_to[dest as usize] += 1;
            }
            arrived.fetch_add(1, SeqCst);
            if i % 7 == 0 {
                let r = coll.ibarrier(&ep).unwrap();
                // Keep sending while the barrier is in flight.
                ep.send(
                    Rank((me + 1) % n),
                    p2p,
                    &[&(u64::from(me) + 1).to_le_bytes()],
                )?;
                sent_to[((me + 1) % n) as usize] += 1;
                r.wait(&mut ep).unwrap();
            } else {
                coll.barrier_with(&mut ep, algos[i as usize % algos.len()])
                    .unwrap();
            }
            assert!(arrived.load(SeqCst) >= i * u64::from(n));
        }
        // Tell everyone how many to expect from us.
        let expect = coll.allgather(&mut ep, &sent_to).unwrap();
        let mine: u64 = (0..n as usize)
            .map(|s| expect[s * n as usize + me as usize])
            .sum();
        let want_sum: u64 = (0..n as usize)
            .map(|s| expect[s * n as usize + me as usize] * (s as u64 + 1))
            .sum();
        ep.wait_until(|| count.get() >= mine)?;
        coll.barrier(&mut ep).unwrap();
        ep.close()?;
        assert_eq!((count.get(), sum.get()), (mine, want_sum), "rank {me}");
        Ok(count.get())
    });
    assert!(got.iter().sum::<u64>() > rounds * u64::from(n));
}
