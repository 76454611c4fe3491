//! A peer that dies while items are being aggregated to it: the survivor
//! gets a typed error naming it (from a send or from `quiesce`) within a
//! few seconds — never a hang. Two processes started by hand (fmrun would
//! stop the survivor itself); rank 1 exits abruptly after a few items.

mod common;

use fastmsg::error::{ExtractError, SendError};
use fastmsg::{EndpointBuilder, Rank};
use fastmsg_handlers::aggregate::{AggConfig, AggError, Aggregator};
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
    let env = [
        ("AGG_DEATH", "1"),
        ("FASTMSG_CREDITS", "4"),
        ("FASTMSG_TIMEOUT", "30"),
    ];
    let mut ranks = common::spawn_ranks("agg_death_rank", "aggdeath", 2, &env);
    // Bounded: a rank still running after this is a hang.
    let status = common::wait_bounded(&mut ranks, Duration::from_secs(90));
    let s1 = status[1].expect("rank 1 hung instead of dying");
    let s0 = status[0].expect("rank 0 hung instead of reporting the death");
    assert!(s1.success(), "rank 1 should exit 0");
    assert!(s0.success(), "rank 0 did not report the death as expected");
}
