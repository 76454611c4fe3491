//! An owner that dies while calls to it are outstanding: every call —
//! call-channel callbacks and futures, remote-word fetches (callback and
//! future) sent through the owner — completes, each with its answer or
//! with `RpcError::PeerGone` naming the dead rank; nothing is left
//! waiting, and `quiesce` and `close` report the failure. Two processes
//! started by hand (fmrun would stop the survivor itself); rank 1 exits
//! abruptly from inside its handler after a few requests, with thousands
//! more on the way. The parent kills the ranks and fails if they outlive
//! a generous limit, so nothing hangs.

mod common;

use fastmsg::{EndpointBuilder, Rank, WordOp};
use fastmsg_handlers::aggregate::{AggConfig, Aggregator};
use fastmsg_handlers::memory::{RemoteWords, WordFuture};
use fastmsg_handlers::rpc::{RpcError, RpcFuture};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// Requests the owner handles before it dies.
const DIE_AFTER: u64 = 50;
/// Items the survivor tries to issue of each kind.
const ITEMS: u64 = 20_000;
/// A future every this many items.
const FUTURE_EVERY: u64 = 8;

/// The owner's answer to `x`.
fn answer(x: u64) -> u64 {
    x.wrapping_mul(3) + 1
}

/// Whether `r` is the answer to `x` or the typed error naming rank 1.
fn acceptable(r: &Result<u64, RpcError>, x: Option<u64>) -> bool {
    match r {
        Ok(v) => x.is_none_or(|x| *v == answer(x)),
        Err(RpcError::PeerGone { rank, .. }) => *rank == Rank(1),
        Err(_) => false,
    }
}

/// The rank program (runs only as a child of the test below).
#[test]
fn rpc_death_rank() {
    if std::env::var_os("RPC_DEATH").is_none() {
        return;
    }
    let mut b = EndpointBuilder::from_env().expect("env");
    let agg = Aggregator::new(&mut b, AggConfig::default());
    let handled = Cell::new(0u64);
    let rpc = agg.rpc(&mut b, "f", move |_ctx, _src, x: u64| {
        handled.set(handled.get() + 1);
        if handled.get() == DIE_AFTER {
            std::process::exit(0); // no close: the owner just disappears
        }
        Ok::<u64, String>(answer(x))
    });
    let words = RemoteWords::new(&agg, &mut b, "w", 64).through_owner();
    // Completions: (completed, bad) per kind.
    let rpc_done = Rc::new((Cell::new(0u64), Cell::new(0u64)));
    let r = Rc::clone(&rpc_done);
    rpc.on_complete(move |_ctx, owner, token, res| {
        r.0.set(r.0.get() + 1);
        if owner != Rank(1) || !acceptable(&res, Some(token)) {
            eprintln!("call {token} completed with {res:?}");
            r.1.set(r.1.get() + 1);
        }
    });
    let word_done = Rc::new((Cell::new(0u64), Cell::new(0u64)));
    let w = Rc::clone(&word_done);
    words.on_complete(move |_ctx, owner, token, res| {
        w.0.set(w.0.get() + 1);
        if owner != Rank(1) || !acceptable(&res, None) {
            eprintln!("word fetch {token} completed with {res:?}");
            w.1.set(w.1.get() + 1);
        }
    });
    let mut ep = b.start().expect("start");
    let ctx = ep.ctx();
    if ep.rank() == Rank(1) {
        // Serve until the handler exits the process.
        let r = ep.wait_until(|| false);
        panic!("rank 1 should have died in its handler, wait ended: {r:?}");
    }
    let owner = Rank(1);
    let (mut rpc_sent, mut word_sent) = (0u64, 0u64);
    let mut rpc_futs: Vec<(u64, RpcFuture<u64>)> = Vec::new();
    let mut word_futs: Vec<WordFuture> = Vec::new();
    let mut refused = None;
    for i in 0..ITEMS {
        let r = if i % FUTURE_EVERY == 0 {
            rpc.call(&ctx, owner, i).map(|f| rpc_futs.push((i, f)))
        } else {
            rpc.send(&ctx, owner, i, i).map(|()| rpc_sent += 1)
        };
        if let Err(e) = r {
            refused = Some(format!("{e}"));
            assert!(
                matches!(e, RpcError::PeerGone { rank, .. } if rank == owner),
                "{e}"
            );
            break;
        }
        let idx = i % 64;
        let r = if i % FUTURE_EVERY == 0 {
            words
                .call(&ctx, owner, idx, Some(WordOp::FetchAdd(1)))
                .map(|f| word_futs.push(f))
        } else if i % 2 == 0 {
            words.add(&ctx, owner, idx, 1)
        } else {
            words
                .fetch(&ctx, owner, idx, WordOp::FetchAdd(1), i)
                .map(|()| word_sent += 1)
        };
        if let Err(e) = r {
            refused = Some(format!("{e}"));
            assert!(format!("{e}").contains("rank 1"), "{e}");
            break;
        }
    }
    println!(
        "rank 0 issued {rpc_sent} callback calls, {} future calls, {word_sent} word fetches, {} word futures; refused: {refused:?}",
        rpc_futs.len(),
        word_futs.len()
    );
    let q = agg.quiesce(&mut ep);
    let e = q.expect_err("quiesce with a dead owner must fail");
    assert!(
        format!("{e}").contains("rank 1"),
        "quiesce error does not name rank 1: {e}"
    );
    println!("quiesce: {e}");
    // Every call completed.
    assert_eq!(rpc.outstanding(), 0, "call-channel calls left waiting");
    assert_eq!(words.outstanding(), 0, "word fetches left waiting");
    assert_eq!(rpc_done.0.get(), rpc_sent, "callbacks run");
    assert_eq!(rpc_done.1.get(), 0, "callbacks with a wrong result");
    assert_eq!(word_done.0.get(), word_sent, "word completions run");
    assert_eq!(word_done.1.get(), 0, "word completions with a wrong result");
    let mut gone = 0;
    for (x, f) in &rpc_futs {
        assert!(f.is_ready(), "future of call {x} not resolved");
        let r = f.take().expect("resolved");
        assert!(acceptable(&r, Some(*x)), "future of call {x}: {r:?}");
        gone += usize::from(r.is_err());
    }
    for (k, f) in word_futs.iter_mut().enumerate() {
        assert!(f.is_ready(), "word future {k} not resolved");
        let r = f.take().expect("resolved");
        assert!(acceptable(&r, None), "word future {k}: {r:?}");
        gone += usize::from(r.is_err());
    }
    assert!(gone > 0, "no future saw the owner's death");
    // A new call to the dead owner is refused at once, naming it.
    match rpc.call(&ctx, owner, 7) {
        Err(RpcError::PeerGone { rank, .. }) => assert_eq!(rank, owner),
        r => panic!("call to a dead owner: {r:?}"),
    }
    let c = ep.close();
    println!("close: {c:?}");
    assert!(c.is_err(), "close after a peer died must report it");
}

#[test]
fn every_outstanding_call_completes_when_its_owner_dies() {
    let env = [
        ("RPC_DEATH", "1"),
        ("FASTMSG_CREDITS", "4"),
        ("FASTMSG_TIMEOUT", "30"),
    ];
    let mut ranks = common::spawn_ranks("rpc_death_rank", "rpcdeath", 2, &env);
    // Bounded: a rank still running after this is a hang.
    let status = common::wait_bounded(&mut ranks, Duration::from_secs(90));
    let s1 = status[1].expect("rank 1 hung instead of dying");
    let s0 = status[0].expect("rank 0 hung: a call to the dead owner never completed");
    assert!(s1.success(), "rank 1 should exit 0 from its handler");
    assert!(s0.success(), "rank 0 did not see every call complete");
}
