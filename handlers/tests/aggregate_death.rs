//! A peer that dies while items are being aggregated to it: the survivor
//! gets a typed error naming it (from a send or from `quiesce`) within a
//! few seconds — never a hang. Two processes started by hand (fmrun would
//! stop the survivor itself); rank 1 exits abruptly after a few items.

use fastmsg::error::{ExtractError, SendError};
use fastmsg::{EndpointBuilder, Rank};
use fastmsg_handlers::aggregate::{AggConfig, AggError, Aggregator};
use std::process::Command;
use std::time::{Duration, Instant};

/// The rank program (runs only as a child of the test below).
#[test]
fn agg_death_rank() {
    if std::env::var_os("AGG_DEATH").is_none() {
        return;
    }
    let mut b = EndpointBuilder::from_env().expect("env");
    let agg = Aggregator::new(&mut b, AggConfig::default());
    let ch = agg.channel::<u64, _>(&mut b, "items", |_, _, _| Ok(()));
    let mut ep = b.start().expect("start");
    let ctx = ep.ctx();
    if ep.rank() == Rank(1) {
        for i in 0..100 {
            ch.send(&ctx, Rank(0), i).expect("send");
        }
        std::process::exit(0); // no close: the peer just disappears
    }
    let t = Instant::now();
    let mut err = None;
    for i in 0..1_000_000u64 {
        if let Err(e) = ch.send(&ctx, Rank(1), i) {
            err = Some(e);
            break;
        }
    }
    let err = match err {
        Some(e) => e,
        None => agg
            .quiesce(&mut ep)
            .expect_err("quiesce with a dead peer must fail"),
    };
    let named = match &err {
        AggError::Send(SendError::PeerGone { rank }) => *rank,
        AggError::Extract(ExtractError::PeerDied { rank, .. }) => *rank,
        e => panic!("unexpected error: {e}"),
    };
    assert_eq!(named, Rank(1), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    println!("rank 0 saw: {err}");
}

#[test]
fn a_peer_dying_during_aggregation_is_a_typed_error() {
    let exe = std::env::current_exe().unwrap();
    let job = format!("aggdeath-{}", std::process::id());
    let spawn = |rank: u32| {
        Command::new(&exe)
            .args([
                "agg_death_rank",
                "--exact",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env("AGG_DEATH", "1")
            .env("FASTMSG_RANK", rank.to_string())
            .env("FASTMSG_SIZE", "2")
            .env("FASTMSG_JOB", &job)
            .env("FASTMSG_CREDITS", "4")
            .env("FASTMSG_TIMEOUT", "30")
            .spawn()
            .expect("spawn rank")
    };
    let (mut r0, mut r1) = (spawn(0), spawn(1));
    let s1 = r1.wait().unwrap();
    let s0 = r0.wait().unwrap();
    assert!(s1.success(), "rank 1 should exit 0");
    assert!(s0.success(), "rank 0 did not report the death as expected");
}
