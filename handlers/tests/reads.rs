//! Reads of owners on this host (`RemoteWords::get`), queued so that their
//! cache misses overlap: a read's completion runs inside a later read
//! that finds `READS_IN_FLIGHT` queued, or when the queue is drained (a
//! flush, a quiesce, an idle moment, the rank's next update through the
//! same words), in the order the reads were made, with the value the word held; a read made
//! before an update through the same words does not see it; reads made
//! from a completion work; an owner that dies with reads queued
//! completes each of them with `RpcError::PeerGone` (two processes
//! started by hand, bounded by the parent).

mod common;

use fastmsg::error::PutError;
use fastmsg::{EndpointBuilder, Rank, WordOp};
use fastmsg_handlers::aggregate::{AggConfig, Aggregator};
use fastmsg_handlers::memory::{MemError, RemoteWords, READS_IN_FLIGHT};
use fastmsg_handlers::rpc::RpcError;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

/// Reads queued at most.
const DEPTH: u64 = READS_IN_FLIGHT as u64;

/// Word `i` of rank `r`.
fn word(r: u32, i: u64) -> u64 {
    u64::from(r) * 1_000_000 + i
}

/// Completions seen: owner, token, result.
type Seen = Rc<RefCell<Vec<(Rank, u64, Result<u64, RpcError>)>>>;

#[test]
fn reads_on_this_host_complete_later_in_order_and_before_updates() {
    let results = common::run_bounded(3, None, |mut b| {
        let agg = Aggregator::new(&mut b, AggConfig::default());
        let words = RemoteWords::new(&agg, &mut b, "t", 64);
        let seen: Seen = Rc::default();
        let (s, again, w) = (Rc::clone(&seen), Rc::new(Cell::new(true)), words.clone());
        words.on_complete(move |ctx, owner, token, r| {
            s.borrow_mut().push((owner, token, r));
            // A read made from a completion (once).
            if token == 300 && again.replace(false) {
                w.get(ctx, owner, 31, 301).expect("read from a completion");
            }
        });
        let mut ep = b.start()?;
        let ctx = ep.ctx();
        let (me, n) = (ep.rank().0, ep.size());
        for i in 0..64 {
            words.set_local(&ctx, i, word(me, i))?;
        }
        agg.quiesce(&mut ep)?;
        let other = Rank((me + 1) % n);
        let bad = RefCell::new(Vec::<String>::new());
        let expect = |what: &str, ok: bool| {
            if !ok {
                bad.borrow_mut().push(what.to_owned());
            }
        };
        let ok = |r: &Result<u64, RpcError>, v: u64| r.as_ref().ok() == Some(&v);

        // Three reads: queued, none complete inside its call.
        for (t, i) in [(0, 5), (1, 6), (2, 7)] {
            words.get(&ctx, other, i, t)?;
        }
        expect(
            "reads completed inside their calls",
            seen.borrow().is_empty(),
        );
        expect("three reads outstanding", words.outstanding() == 3);
        agg.flush(&ctx)?;
        {
            let s = seen.borrow();
            expect("a flush completes the reads", s.len() == 3);
            for (k, (o, t, r)) in s.iter().enumerate() {
                let k = k as u64;
                expect(
                    "flushed reads in order, right values",
                    *o == other && *t == k && ok(r, word(other.0, 5 + k)),
                );
            }
        }
        expect("none outstanding after the flush", words.outstanding() == 0);
        seen.borrow_mut().clear();

        // More reads than the queue holds: the oldest complete inside the
        // later calls, the queue never holds more than its depth.
        let many = DEPTH + 6;
        for k in 0..many {
            words.get(&ctx, other, k % 32 + 20, 100 + k)?;
            expect(
                "the queue holds at most its depth",
                words.outstanding() as u64 <= DEPTH,
            );
        }
        let early = seen.borrow().len() as u64;
        expect(
            "reads past the depth complete inside later calls",
            early >= many - DEPTH && early < many,
        );
        words.complete_reads(&ctx);
        {
            let s = seen.borrow();
            expect("every read completed", s.len() as u64 == many);
            for (k, (_, t, r)) in s.iter().enumerate() {
                let k = k as u64;
                expect(
                    "reads in order, right values",
                    *t == 100 + k && ok(r, word(other.0, k % 32 + 20)),
                );
            }
        }
        seen.borrow_mut().clear();

        // A read then an update through the same words: the read sees
        // the word before it.
        words.get(&ctx, ep.rank(), 9, 200)?;
        words.set_local(&ctx, 9, 77)?;
        words.get(&ctx, other, 10, 201)?;
        words.fetch(&ctx, other, 10, WordOp::FetchAdd(5), 202)?;
        words.get(&ctx, other, 10, 203)?;
        // A read whose completion reads again.
        words.get(&ctx, other, 30, 300)?;
        agg.quiesce(&mut ep)?;
        {
            let s = seen.borrow();
            let got: Vec<(u64, Option<u64>)> =
                s.iter().map(|(_, t, r)| (*t, r.clone().ok())).collect();
            let want = vec![
                (200, Some(word(me, 9))),
                (201, Some(word(other.0, 10))),
                (202, Some(word(other.0, 10))),
                (203, Some(word(other.0, 10) + 5)),
                (300, Some(word(other.0, 30))),
                (301, Some(word(other.0, 31))),
            ];
            if got != want {
                bad.borrow_mut()
                    .push(format!("updates and chained reads: {got:?}, want {want:?}"));
            }
        }
        expect("none outstanding after quiesce", words.outstanding() == 0);
        // The core's handle the reads use: the owner's words, bounded.
        let ww = ctx.window_words(words.window(), other)?;
        expect(
            "window_words reads the owner's words",
            ww.load(5) == Some(word(other.0, 5))
                && ww.load(64).is_none()
                && ww.words() == 64
                && ww.rank() == other,
        );
        expect(
            "window_words refuses a rank past the job",
            matches!(
                ctx.window_words(words.window(), Rank(n)),
                Err(PutError::BadDestination { .. })
            ),
        );
        // A read past the window is refused at once.
        let e = words.get(&ctx, other, 64, 0);
        expect(
            "an index past the window is refused",
            matches!(e, Err(MemError::OutOfRange { index: 64, .. })),
        );
        agg.quiesce(&mut ep)?;
        ep.close()?;
        Ok(bad.into_inner())
    });
    for (r, bad) in results.into_iter().enumerate() {
        assert!(bad.is_empty(), "rank {r}: {bad:?}");
    }
}

/// Reads queued for the owner each round while it lives.
const QUEUED: u64 = 8;
/// Rounds of reads rank 0 may make before it must have seen the owner die
/// (each followed by a 50 ms pause: 30 s in all).
const ROUNDS: u64 = 600;

/// The rank program of the test below (runs only as its child).
#[test]
fn reads_death_rank() {
    if std::env::var_os("READS_DEATH").is_none() {
        return;
    }
    let mut b = EndpointBuilder::from_env().expect("env");
    let agg = Aggregator::new(&mut b, AggConfig::default());
    let die = b.register_fn("die", |_, _| std::process::exit(0));
    let noop = b.register_fn("noop", |_, _| Ok(()));
    let words = RemoteWords::new(&agg, &mut b, "w", 64);
    let seen: Seen = Rc::default();
    let s = Rc::clone(&seen);
    words.on_complete(move |_, owner, token, r| s.borrow_mut().push((owner, token, r)));
    let mut ep = b.start().expect("start");
    let ctx = ep.ctx();
    let me = ep.rank().0;
    for i in 0..64 {
        words.set_local(&ctx, i, word(me, i)).expect("set");
    }
    agg.quiesce(&mut ep).expect("quiesce");
    if me == 1 {
        // Serve until told to die (the handler exits the process).
        let r = ep.wait_until(|| false);
        panic!("rank 1 should have died in its handler, wait ended: {r:?}");
    }
    let owner = Rank(1);
    ep.send(owner, die, &[]).expect("send die");
    // Each round: queue reads, pause, then one poll. A poll that finds
    // nothing runs the idle hook, which makes the queued reads (the owner
    // still alive: values); so that the poll that learns of the death
    // returns before any hook runs, it always finds a message (a no-op
    // sent to this rank). The death ends the loop with reads queued.
    let mut queued = 0;
    let mut death = None;
    for round in 0..ROUNDS {
        for k in 0..QUEUED {
            words
                .get(&ctx, owner, k, round * QUEUED + k)
                .expect("the owner is not known gone yet: the read is queued");
        }
        queued = words.outstanding();
        std::thread::sleep(Duration::from_millis(50));
        ep.send(Rank(0), noop, &[]).expect("send to self");
        if let Err(e) = ep.extract(usize::MAX) {
            death = Some(e);
            break;
        }
    }
    let death = death.expect("rank 0 never learned that rank 1 died");
    println!("death: {death}; reads queued: {queued}");
    assert!(ctx.is_gone(owner), "the poll's error is the owner's death");
    assert!(queued > 0, "no read was queued when the death was learned");
    let before = seen.borrow().len();
    let made = before as u64 + queued as u64;
    agg.flush(&ctx).expect("flush: the queued reads complete");
    let s = seen.borrow();
    assert_eq!(s.len() as u64, made, "every read completed");
    assert_eq!(words.outstanding(), 0, "reads left queued");
    for (k, (o, t, r)) in s.iter().enumerate() {
        assert_eq!(*o, owner);
        assert_eq!(*t, k as u64, "completions in the order of the reads");
        if k < before {
            assert_eq!(r, &Ok(word(1, *t % QUEUED)), "read {t} made while alive");
        } else {
            assert!(
                matches!(r, Err(RpcError::PeerGone { rank, .. }) if *rank == owner),
                "read {t} queued at the death: {r:?}"
            );
        }
    }
    drop(s);
    // A new read of the dead owner is refused at once, naming it.
    let e = words
        .get(&ctx, owner, 0, 0)
        .expect_err("read of a dead owner");
    assert!(format!("{e}").contains("rank 1"), "{e}");
    let c = ep.close();
    println!("close: {c:?}");
    assert!(c.is_err(), "close after a peer died must report it");
}

#[test]
fn queued_reads_complete_with_peer_gone_when_their_owner_dies() {
    let env = [("READS_DEATH", "1"), ("FASTMSG_TIMEOUT", "60")];
    let mut ranks = common::spawn_ranks("reads_death_rank", "readsdeath", 2, &env);
    // Bounded: a rank still running after this is a hang.
    let status = common::wait_bounded(&mut ranks, Duration::from_secs(90));
    let s1 = status[1].expect("rank 1 hung instead of dying");
    let s0 = status[0].expect("rank 0 hung: a queued read never completed");
    assert!(s1.success(), "rank 1 should exit 0 from its handler");
    assert!(
        s0.success(),
        "rank 0 did not see every queued read complete"
    );
}
