//! Sends that cannot arrive fail at once with a typed error: through a
//! `Ctx` kept past the rank's own `close` (`SendError::Closed`), and to a
//! peer that died (`SendError::PeerGone` as soon as the watchdog has seen
//! the death, not after megabytes of sends were parked for it).

mod common;

use common::procs::{self, Spawner};
use fastmsg::error::SendError;
use fastmsg::threads;
use fastmsg::Rank;
use std::time::Duration;

/// Each rank keeps a `Ctx` past its `close`; a small and a 100 kB send
/// through it then fail with `Closed`, naming this rank.
#[test]
fn a_send_after_close_fails_at_once() {
    threads::run(
        2,
        |_| {},
        |mut b| {
            let h = b.register_fn("sink", |_c, _p| Ok(()));
            let ep = b.start()?;
            let ctx = ep.ctx();
            let me = ep.rank();
            let other = Rank(1 - me.0);
            ep.close()?;
            for len in [8usize, 100_000] {
                let r = ctx.send(other, h, &[&vec![1u8; len]]);
                assert!(
                    matches!(r, Err(SendError::Closed { rank }) if rank == me),
                    "send of {len} bytes after close: {r:?}"
                );
                let r = ctx.post(other, h, &[&vec![1u8; len]]);
                assert!(
                    matches!(r, Err(SendError::Closed { .. })),
                    "post of {len} bytes after close: {r:?}"
                );
            }
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Sends paced one a millisecond to this rank's peer, after which it gives
/// up: a bound on how long the death takes to reach the sending path.
const PACED_SENDS: u32 = 20_000;

/// Rank program: rank 0 starts and dies at once (exits without closing or
/// dropping its endpoint); rank 1 sends it 1 KiB messages through a `Ctx`
/// (which parks without credit), one a millisecond, and prints how many
/// returned `Ok` before the first `PeerGone`.
#[test]
fn dead_peer_rank() {
    let Ok(rank) = std::env::var("FASTMSG_RANK") else {
        return;
    };
    let mut b = fastmsg::EndpointBuilder::from_env().expect("env");
    let h = b.register_fn("sink", |_c, _p| Ok(()));
    let ep = b.start().expect("start");
    if rank == "0" {
        std::process::exit(0);
    }
    let ctx = ep.ctx();
    let data = [7u8; 1024];
    for i in 0..PACED_SENDS {
        match ctx.send(Rank(0), h, &[&data]) {
            Ok(()) => std::thread::sleep(Duration::from_millis(1)),
            Err(SendError::PeerGone { rank: Rank(0) }) => {
                println!("OKS {i}");
                std::process::exit(0);
            }
            Err(e) => panic!("unexpected {e}"),
        }
    }
    println!("OKS {PACED_SENDS} (never refused)");
    std::process::exit(4);
}

/// A peer's death reaches the sending path at once: of the paced sends to
/// a rank that died right after start, fewer than 1,000 (a second's worth)
/// return `Ok` — before, about 4,100 did (until 4 MiB were parked).
#[test]
fn sends_to_a_dead_peer_are_refused_within_a_second_of_paced_sends() {
    paced_sends_to_a_dead_peer("dead-peer", Vec::new());
}

/// The same with every peer over TCP (`FASTMSG_NET=tcp`): the dead
/// peer's connection ends, and the sending path learns of it as soon.
#[test]
fn sends_to_a_dead_peer_over_tcp_are_refused_within_a_second_of_paced_sends() {
    paced_sends_to_a_dead_peer(
        "dead-peer-tcp",
        vec![
            ("FASTMSG_NET".into(), "tcp".into()),
            ("FASTMSG_SECRET".into(), "dead-peer-test-secret".into()),
        ],
    );
}

/// Rank 0 of a 2-rank job (`dead_peer_rank`, environment `env` added,
/// job and directory named for `tag`) dies at once; rank 1's paced sends
/// to it must be refused with fewer than 1,000 returning `Ok`.
fn paced_sends_to_a_dead_peer(tag: &str, mut env: Vec<(String, String)>) {
    env.push((
        "FASTMSG_SHM_DIR".into(),
        procs::private_shm_dir(tag).display().to_string(),
    ));
    let sp = Spawner {
        rank_test: "dead_peer_rank",
        size: 2,
        job: format!("{tag}-{}", std::process::id()),
        env,
    };
    let mut c0 = sp.spawn(0, &[], &[]);
    let c1 = {
        let exe = std::env::current_exe().unwrap();
        let mut c = std::process::Command::new(exe);
        c.args([
            "dead_peer_rank",
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("FASTMSG_RANK", "1")
        .env("FASTMSG_SIZE", "2")
        .env("FASTMSG_JOB", &sp.job)
        .env("FASTMSG_TIMEOUT", "20")
        .envs(sp.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(std::process::Stdio::piped());
        c.spawn().unwrap()
    };
    let st0 = procs::wait_all(
        std::slice::from_mut(&mut c0),
        Duration::from_secs(60),
        "rank 0",
    );
    assert!(st0[0].success(), "rank 0: {:?}", st0[0]);
    let out = c1.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let oks: u32 = text
        .lines()
        .find_map(|l| l.split_once("OKS ").map(|(_, n)| n))
        .and_then(|n| n.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("rank 1 said: {text}"));
    assert!(out.status.success(), "rank 1: {:?}: {text}", out.status);
    eprintln!("{tag}: {oks} paced sends returned Ok before PeerGone");
    assert!(
        oks < 1000,
        "{oks} paced sends to a dead peer returned Ok before PeerGone"
    );
}
