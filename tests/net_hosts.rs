//! Multi-host runs: two network namespaces that this test creates itself
//! act as two hosts (`common::netns`: a veth pair between them, addresses
//! assigned inside them, nothing else addressed). On each, `fmrun` starts
//! that host's two ranks of a four-rank job (`--size 4 --rank-offset K
//! --root …`); ranks on one host talk over shared memory, across hosts
//! over the TCP transport. Scenarios: the all-to-all storm (checksums,
//! order), ping-pong across hosts, and a barrier and allreduce written
//! here with bare handlers and one-sided puts (the engine's own check; the
//! collectives crate runs across the same namespaces in
//! `handlers/tests/net_collectives.rs`).
//!
//! Needs root (to create namespaces); skips with a message otherwise.
//!
//! The same rank programs also run under Open MPI's `mpirun` (feature
//! `pmix`; `common::launch`): four ranks split into two "hosts" by
//! `FASTMSG_HOST`, the TCP transport forced, nothing exported — rank,
//! size, addresses and the secret come from PMIx.
//!
//! With the `ofi` feature the namespace scenarios also run with every pair
//! over libfabric (`FASTMSG_NET=ofi`, `tcp;ofi_rxm`).

mod common;

use common::netns::{Hosts, Job};
use common::storm::storm_rank;
use fastmsg::bootstrap::Launcher;
use fastmsg::error::{PmixError, StartError};
use fastmsg::{EndpointBuilder, Rank};
use std::cell::{Cell, RefCell};
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

fn run(hosts: &Hosts, scenario: &str) {
    run_with(hosts, scenario, Vec::new());
}

fn run_with(hosts: &Hosts, scenario: &str, env: Vec<(String, String)>) {
    hosts.run(&Job {
        fmrun: Path::new(env!("CARGO_BIN_EXE_fmrun")),
        rank_test: "net_rank_program",
        per_host: 2,
        scenario,
        env,
        limit: Duration::from_secs(240),
    });
}

/// Every pair over libfabric (`FASTMSG_NET=ofi`, provider `tcp;ofi_rxm`
/// between the namespaces' addresses, shared memory unused).
#[cfg(feature = "ofi")]
fn run_ofi(hosts: &Hosts, scenario: &str) {
    let env = vec![
        ("FASTMSG_NET".into(), "ofi".into()),
        ("FI_PROVIDER".into(), "tcp;ofi_rxm".into()),
    ];
    run_with(hosts, scenario, env);
}

#[cfg(feature = "ofi")]
#[test]
fn two_hosts_storm_over_ofi() {
    if let Some(h) = Hosts::create("two_hosts_storm_ofi") {
        run_ofi(&h, "storm");
    }
}

#[cfg(feature = "ofi")]
#[test]
fn two_hosts_pingpong_over_ofi() {
    if let Some(h) = Hosts::create("two_hosts_pingpong_ofi") {
        run_ofi(&h, "pingpong");
    }
}

#[cfg(feature = "ofi")]
#[test]
fn two_hosts_barrier_and_allreduce_over_ofi() {
    if let Some(h) = Hosts::create("two_hosts_collective_ofi") {
        run_ofi(&h, "collective");
    }
}

#[test]
fn two_hosts_storm() {
    if let Some(h) = Hosts::create("two_hosts_storm") {
        run(&h, "storm");
    }
}

#[test]
fn two_hosts_pingpong() {
    if let Some(h) = Hosts::create("two_hosts_pingpong") {
        run(&h, "pingpong");
    }
}

#[test]
fn two_hosts_barrier_and_allreduce() {
    if let Some(h) = Hosts::create("two_hosts_barrier_and_allreduce") {
        run(&h, "collective");
    }
}

/// Under `mpirun`; `net`: `FASTMSG_NET` (`tcp` forces the network between
/// all ranks; `auto` uses it only across the two "hosts").
fn under_mpirun(scenario: &str, net: &str) {
    common::launch::mpirun(&common::launch::MpiJob {
        rank_test: "net_rank_program",
        size: 4,
        per_host: 2,
        scenario,
        env: vec![("FASTMSG_NET".into(), net.into())],
        limit: Duration::from_secs(240),
    });
}

#[test]
fn mpirun_two_hosts_storm() {
    under_mpirun("storm", "tcp");
}

#[test]
fn mpirun_two_hosts_storm_shm_within_hosts() {
    under_mpirun("storm", "auto");
}

#[test]
fn mpirun_two_hosts_pingpong() {
    under_mpirun("pingpong", "tcp");
}

/// Rank 3 never starts (it sleeps past the others' 1-second start-up
/// timeout): the others' PMIx fence must end in a typed timeout error,
/// not a hang (`late`).
#[test]
fn mpirun_a_rank_that_never_arrives_times_out_the_others_wire_up() {
    common::launch::mpirun(&common::launch::MpiJob {
        rank_test: "net_rank_program",
        size: 4,
        per_host: 2,
        scenario: "late",
        env: vec![
            ("FASTMSG_NET".into(), "tcp".into()),
            ("FASTMSG_TIMEOUT".into(), "1".into()),
        ],
        limit: Duration::from_secs(60),
    });
}

#[test]
fn mpirun_two_hosts_barrier_and_allreduce() {
    under_mpirun("collective", "tcp");
}

/// The rank program (started by `fmrun` inside a namespace, or by
/// `mpirun`); does nothing when run as an ordinary test.
#[test]
fn net_rank_program() {
    if !common::launch::is_rank() {
        return;
    }
    let b = EndpointBuilder::from_env().expect("launcher environment");
    match std::env::var(common::launch::LAUNCHED).as_deref() {
        // Slurm's environment, the wire-up over its PMI-2 socket (there is
        // no FASTMSG_ROOT or secret to fall back on).
        Ok("srun-pmi2") => assert_eq!(b.config().job.launcher, Launcher::Slurm, "launcher"),
        // Not the Open MPI or Slurm environment variables: PMIx itself.
        Ok(_) => assert_eq!(b.config().job.launcher, Launcher::Pmix, "launcher"),
        Err(_) => {}
    }
    let scenario = std::env::var("FASTMSG_TEST_SCENARIO").unwrap_or_default();
    match scenario.as_str() {
        "storm" => {
            storm_rank(b, 400, 256 << 10, 0x40575).expect("storm rank");
        }
        "pingpong" => pingpong(b),
        "collective" => collective(b),
        "late" => late(b),
        s => panic!("unknown scenario {s:?}"),
    }
}

/// Rank 3 stays away for 6 s; the others' start must fail on their
/// 1-second timeout with PMIx's timeout status, named (a hang would run
/// into the job's limit).
fn late(b: EndpointBuilder) {
    if b.rank().0 == 3 {
        std::thread::sleep(Duration::from_secs(6));
        return;
    }
    match b.start() {
        Err(StartError::Pmix(PmixError::Call { call, status, .. })) => {
            assert!(call.starts_with("PMIx_Fence"), "{call}");
            assert_eq!(status, -24, "PMIX_ERR_TIMEOUT");
        }
        Err(e) => panic!("expected the fence to time out, got {e}"),
        Ok(_) => panic!("started without rank 3"),
    }
}

/// Ranks 0↔2 and 1↔3 (different hosts) bounce messages of several sizes,
/// checking every byte; every rank checks which ranks share its host.
fn pingpong(mut b: EndpointBuilder) {
    let got: Rc<RefCell<Vec<u8>>> = Rc::default();
    let n = Rc::new(Cell::new(0u32));
    let (g, c) = (got.clone(), n.clone());
    let echo_back = b.register("pong", move |_ctx, mut m| {
        let (g, c) = (g.clone(), c.clone());
        async move {
            *g.borrow_mut() = m.receive_vec().await?;
            c.set(c.get() + 1);
            Ok(())
        }
    });
    let ping = b.register("ping", move |ctx, mut m| async move {
        let v = m.receive_vec().await?;
        ctx.send(m.source(), echo_back, &[&v])?;
        Ok(())
    });
    let mut ep = b.start().expect("start");
    let me = ep.rank().0;
    let mates: Vec<u32> = ep.local_ranks().iter().map(|r| r.0).collect();
    assert_eq!(
        mates,
        if me < 2 { vec![0, 1] } else { vec![2, 3] },
        "host map"
    );
    if me < 2 {
        let peer = Rank(me + 2);
        for (i, size) in [0usize, 1, 100, 4096, 70_000, 300_000]
            .into_iter()
            .enumerate()
        {
            for k in 0..20u32 {
                let msg: Vec<u8> = (0..size).map(|j| (j as u32 ^ k ^ i as u32) as u8).collect();
                let want = n.get() + 1;
                ep.send(peer, ping, &[&msg]).expect("send");
                ep.wait_until(|| n.get() == want).expect("wait");
                assert_eq!(*got.borrow(), msg, "echo of {size} bytes");
            }
        }
    }
    ep.close().expect("close");
}

/// A barrier and an allreduce across hosts, written with handlers (sum to
/// rank 0, broadcast back) and with one-sided puts (each rank stores its
/// epoch in rank 0's window; rank 0 releases everybody with a put).
fn collective(mut b: EndpointBuilder) {
    let size = b.size();
    let win = b.window("barrier", 8 * 8);
    let sums: Rc<RefCell<Vec<(u64, i64)>>> = Rc::default();
    let result: Rc<Cell<Option<(u64, i64)>>> = Rc::default();
    let (s, r) = (sums.clone(), result.clone());
    let result_h = b.register_fn("result", move |_ctx, p| {
        let epoch = u64::from_le_bytes(p.data()[..8].try_into()?);
        let v = i64::from_le_bytes(p.data()[8..16].try_into()?);
        r.set(Some((epoch, v)));
        Ok(())
    });
    let contrib = b.register_fn("contrib", move |ctx, p| {
        let epoch = u64::from_le_bytes(p.data()[..8].try_into()?);
        let v = i64::from_le_bytes(p.data()[8..16].try_into()?);
        let mut s = s.borrow_mut();
        s.push((epoch, v));
        let now: Vec<_> = s.iter().filter(|e| e.0 == epoch).copied().collect();
        if now.len() as u32 == ctx.size() {
            let total: i64 = now.iter().map(|e| e.1).sum();
            s.retain(|e| e.0 != epoch);
            for d in 0..ctx.size() {
                ctx.send(
                    Rank(d),
                    result_h,
                    &[&epoch.to_le_bytes(), &total.to_le_bytes()],
                )?;
            }
        }
        Ok(())
    });
    let mut ep = b.start().expect("start");
    let me = ep.rank().0;
    for epoch in 1..=40u64 {
        // Allreduce (sum) of a value that differs per rank and epoch.
        let v = (i64::from(me) + 1) * epoch as i64 - 7;
        ep.send(Rank(0), contrib, &[&epoch.to_le_bytes(), &v.to_le_bytes()])
            .expect("contribute");
        ep.wait_until(|| result.get().is_some_and(|r| r.0 == epoch))
            .expect("allreduce");
        let want: i64 = (0..size)
            .map(|r| (i64::from(r) + 1) * epoch as i64 - 7)
            .sum();
        assert_eq!(result.get().unwrap().1, want, "allreduce of epoch {epoch}");
        // Flag barrier with one-sided puts: arrive at rank 0, wait for
        // rank 0's release (checked with >=, so epochs never confuse).
        ep.put_u64(win, Rank(0), 8 * me as usize, epoch)
            .expect("arrive");
        if me == 0 {
            let t0 = Instant::now();
            loop {
                let all = (0..size).all(|r| ep.read_u64(win, 8 * r as usize).unwrap() >= epoch);
                if all {
                    break;
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(60),
                    "barrier {epoch} stuck"
                );
                ep.extract(usize::MAX).expect("extract");
                std::thread::yield_now();
            }
            for r in 1..size {
                ep.put_u64(win, Rank(r), 8 * 7, epoch).expect("release");
            }
        } else {
            let t0 = Instant::now();
            while ep.read_u64(win, 8 * 7).unwrap() < epoch {
                assert!(
                    t0.elapsed() < Duration::from_secs(60),
                    "barrier {epoch} stuck"
                );
                ep.extract(usize::MAX).expect("extract");
                std::thread::yield_now();
            }
        }
    }
    ep.close().expect("close");
}
