//! The collectives with ranks as processes, started by `fmrun`.
//!
//! `fmrun` is found by `common::fmrun` (see there).

mod common;

use common::u64s;
use fastmsg::{EndpointBuilder, Rank};
use fastmsg_handlers::{reference, AllreduceAlgo, BarrierAlgo, CollConfig, Collectives, Op};

/// The rank program: does nothing unless started by `fmrun`.
#[test]
fn coll_process_rank() {
    let _serial = common::serial();
    if std::env::var("FASTMSG_RANK").is_err() {
        return;
    }
    let mut b = EndpointBuilder::from_env().expect("fmrun environment");
    let coll = Collectives::register(&mut b, CollConfig::default());
    let mut ep = b.start().expect("start");
    let (me, n) = (ep.rank(), ep.size());
    for algo in BarrierAlgo::ALL.into_iter().chain([BarrierAlgo::Auto]) {
        for _ in 0..2000 {
            coll.barrier_with(&mut ep, algo).expect("barrier");
        }
    }
    for it in 0..50u64 {
        let cnt = common::count(5, it);
        let xs: Vec<Vec<u64>> = (0..n).map(|r| u64s(5, it, r, cnt)).collect();
        let mine = xs[me.index()].clone();
        for algo in AllreduceAlgo::ALL.into_iter().chain([AllreduceAlgo::Auto]) {
            if algo.is_one_sided() && 8 * cnt > fastmsg_handlers::SMP_ALLREDUCE_MAX_BYTES {
                continue;
            }
            let mut x = mine.clone();
            coll.allreduce_with(&mut ep, &mut x, Op::Sum, algo)
                .expect("allreduce");
            assert_eq!(x, reference(&xs, &Op::Sum), "allreduce {algo:?}");
        }
        let root = Rank(it as u32 % n);
        let mut x = mine.clone();
        coll.reduce(&mut ep, &mut x, Op::Max, root).expect("reduce");
        if me == root {
            assert_eq!(x, reference(&xs, &Op::Max));
        }
        let mut x = if me == root {
            mine.clone()
        } else {
            vec![0; cnt]
        };
        coll.bcast(&mut ep, &mut x, root).expect("bcast");
        assert_eq!(x, xs[root.index()]);
        assert_eq!(
            coll.allgather(&mut ep, &mine).expect("allgather"),
            xs.concat()
        );
        let r1 = coll
            .iallreduce(&ep, mine.clone(), Op::Xor)
            .expect("iallreduce");
        let r2 = coll
            .ireduce(&ep, mine.clone(), Op::Min, root)
            .expect("ireduce");
        let r3 = coll.ibarrier(&ep).expect("ibarrier");
        r3.wait(&mut ep).expect("ibarrier wait");
        let m = r2.wait(&mut ep).expect("ireduce wait");
        if me == root {
            assert_eq!(m, reference(&xs, &Op::Min));
        }
        assert_eq!(
            r1.wait(&mut ep).expect("iallreduce wait"),
            reference(&xs, &Op::Xor)
        );
    }
    ep.close().expect("close");
}

fn through_fmrun(ranks: &str, extra: &[&str]) {
    let exe = std::env::current_exe().unwrap();
    let status = std::process::Command::new(common::fmrun())
        .args(["-n", ranks, "--timeout", "120"])
        .args(extra)
        .arg(&exe)
        .args([
            "coll_process_rank",
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .status()
        .expect("run fmrun");
    assert!(
        status.success(),
        "fmrun -n {ranks} {extra:?} collectives failed: {status}"
    );
}

#[test]
fn four_processes_through_fmrun() {
    let _serial = common::serial();
    through_fmrun("4", &[]);
}

#[test]
fn three_processes_sleeping_through_fmrun() {
    let _serial = common::serial();
    // The sleep policy: one-sided flags must wake a sleeping rank.
    through_fmrun("3", &["--wait", "sleep"]);
}
