//! One-sided windows: every rank puts flags and data into the others'
//! windows; words are atomic and a flag put after data publishes the data.

use fastmsg::error::{PutError, StartError};
use fastmsg::threads;

// (StartError::HandlerMismatch also names windows of equal total size.)
use fastmsg::{Error, Rank, WaitPolicy, WordOp};

#[test]
fn flags_from_every_rank_arrive() {
    threads::run(
        4,
        |_| {},
        |mut b| {
            let n = b.size() as usize;
            let flags = b.window("flags", 8 * n);
            let mut ep = b.start()?;
            let me = ep.rank().0 as usize;
            for round in 1..=200u64 {
                for r in 0..n {
                    ep.put_u64(flags, Rank(r as u32), 8 * me, round)?;
                }
                let ctx = ep.ctx();
                ep.wait_until(|| (0..n).all(|r| ctx.read_u64(flags, 8 * r).unwrap() >= round))?;
            }
            ep.close()?;
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_flag_put_after_data_publishes_the_data() {
    threads::run(
        2,
        |c| c.wait = WaitPolicy::Sleep, // the flag put must wake a sleeper
        |mut b| {
            let data = b.window("data", 4096);
            let flag = b.window("flag", 8);
            let mut ep = b.start()?;
            let ctx = ep.ctx();
            for round in 1..=300u64 {
                if ep.rank() == Rank(0) {
                    let bytes = vec![(round % 251) as u8; 4096];
                    ep.put(data, Rank(1), 0, &bytes)?;
                    ep.put_u64(flag, Rank(1), 0, round)?;
                    ep.wait_until(|| ctx.read_u64(flag, 0).unwrap() == round)?;
                } else {
                    ep.wait_until(|| ctx.read_u64(flag, 0).unwrap() == round)?;
                    let mut got = vec![0u8; 4096];
                    ep.read_window(data, 0, &mut got)?;
                    assert!(
                        got.iter().all(|&x| x == (round % 251) as u8),
                        "round {round}"
                    );
                    ep.put_u64(flag, Rank(0), 0, round)?;
                }
            }
            ep.close()?;
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn bad_puts_are_typed_errors() {
    threads::run(
        2,
        |_| {},
        |mut b| {
            let w = b.window("w", 100);
            let ep = b.start()?;
            assert!(matches!(
                ep.put(w, Rank(1), 90, &[0; 11]),
                Err(PutError::OutOfBounds {
                    offset: 90,
                    len: 11,
                    size: 100,
                    ..
                })
            ));
            assert!(matches!(
                ep.put_u64(w, Rank(1), 4, 1),
                Err(PutError::Misaligned { offset: 4 })
            ));
            assert!(matches!(
                ep.put(w, Rank(7), 0, &[1]),
                Err(PutError::BadDestination { .. })
            ));
            assert!(matches!(
                ep.put_u64(w, Rank(0), 96, 1),
                Err(PutError::OutOfBounds { .. })
            ));
            let e = ep.put(w, Rank(1), usize::MAX, &[1]).unwrap_err();
            assert!(e.to_string().contains("run past window \"w\""), "{e}");
            ep.close()?;
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn different_windows_are_a_start_error() {
    let r = threads::run(
        2,
        |_| {},
        |mut b| {
            let size = if b.rank() == Rank(0) { 64 } else { 128 };
            b.window("w", size);
            b.start().map(|_| ()).map_err(Error::from)
        },
    );
    let e = r.expect_err("different window sizes must fail");
    // The host's segment is laid out for rank 0's windows, so a rank with
    // other windows is refused when it opens it, naming what differs.
    assert!(
        matches!(e.error, Error::Start(StartError::Segment(_))),
        "{e}"
    );
    assert!(
        e.to_string().contains("bytes of one-sided windows = 64"),
        "{e}"
    );
}

#[test]
fn windows_too_large_for_a_segment_are_a_start_error() {
    for sizes in [
        vec![usize::MAX],
        vec![usize::MAX / 2, usize::MAX / 2, 64],
        vec![1 << 37],
    ] {
        let r = threads::run(
            1,
            |_| {},
            |mut b| {
                for (k, &bytes) in sizes.iter().enumerate() {
                    b.window(&format!("w{k}"), bytes);
                }
                b.start().map(|_| ()).map_err(Error::from)
            },
        );
        let e = r.expect_err("windows past the segment's limit must fail");
        assert!(
            matches!(e.error, Error::Start(StartError::Segment(_))),
            "{sizes:?}: {e}"
        );
        assert!(e.to_string().contains("bytes of windows"), "{sizes:?}: {e}");
    }
}

/// Another rank's direct write to an owner-only window — `put`,
/// `put_u64`, `update_u64` — is refused as `PutError::OwnerOnly` and
/// changes nothing; the owner writes its own, and every rank reads it.
#[test]
fn an_owner_only_window_is_written_by_its_owner_alone() {
    let out = threads::run(
        2,
        |_| {},
        |mut b| {
            let own = b.window_owner_only("own", 64);
            let done = b.window("done", 8);
            let mut ep = b.start()?;
            let me = ep.rank();
            let peer = Rank(1 - me.0);
            ep.put_u64(own, me, 0, 5)?;
            let refused = |r: Result<(), PutError>| {
                r == Err(PutError::OwnerOnly {
                    window: "own".into(),
                    owner: peer,
                })
            };
            let put = refused(ep.put(own, peer, 8, &[1; 8]));
            let put_u64 = refused(ep.put_u64(own, peer, 0, 9));
            let ctx = ep.ctx();
            let update = refused(ctx.update_u64(own, peer, 0, WordOp::FetchAdd(1)).map(drop));
            let own_update = ctx.update_u64(own, me, 0, WordOp::FetchAdd(1))?;
            // The flag (Release after this rank's writes) tells the peer
            // they are done: each reads the other's words after that.
            ep.put_u64(done, peer, 0, 1)?;
            ep.wait_until(|| ctx.read_u64(done, 0).is_ok_and(|v| v >= 1))?;
            let peer_word = ctx.get_u64(own, peer, 0)?;
            let mut peer_bytes = [7u8; 8];
            ctx.get(own, peer, 8, &mut peer_bytes)?;
            // Neither leaves (its window unreachable) before both have read.
            ep.put_u64(done, peer, 0, 2)?;
            ep.wait_until(|| ctx.read_u64(done, 0).is_ok_and(|v| v >= 2))?;
            ep.close()?;
            Ok((put, put_u64, update, own_update, peer_word, peer_bytes))
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for (rank, (put, put_u64, update, own_update, peer_word, peer_bytes)) in
        out.into_iter().enumerate()
    {
        assert!(put, "rank {rank}: put to the peer's owner-only window");
        assert!(
            put_u64,
            "rank {rank}: put_u64 to the peer's owner-only window"
        );
        assert!(
            update,
            "rank {rank}: update_u64 of the peer's owner-only window"
        );
        assert_eq!(own_update, 5, "rank {rank}: the owner updates its own");
        assert_eq!(
            peer_word, 6,
            "rank {rank}: the peer's refused writes changed nothing"
        );
        assert_eq!(
            peer_bytes, [0; 8],
            "rank {rank}: the refused put wrote nothing"
        );
    }
}

/// Updates as the only writer are refused on an ordinary window (another
/// rank may update it directly) and made on an owner-only one.
#[test]
fn unshared_updates_need_an_owner_only_window() {
    let out = threads::run(
        1,
        |_| {},
        |mut b| {
            let shared = b.window("shared", 64);
            let own = b.window_owner_only("own", 64);
            let ep = b.start()?;
            let ctx = ep.ctx();
            let add = |_k: usize| (1, WordOp::FetchAdd(2));
            let refused = ctx.update_own_words_unshared(shared, 3, add);
            ctx.update_own_words_unshared(own, 3, add)?;
            let words = (ctx.read_u64(shared, 8)?, ctx.read_u64(own, 8)?);
            ep.close()?;
            Ok((refused, words))
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (refused, words) = &out[0];
    assert_eq!(
        *refused,
        Err(PutError::NotOwnerOnly {
            window: "shared".into()
        })
    );
    assert_eq!(*words, (0, 6), "nothing applied to the ordinary window");
}

/// A window registered owner-only on one rank and ordinary on another,
/// same name and size, fails the start check, which names the difference.
#[test]
fn an_owner_only_window_on_one_rank_only_is_a_start_error() {
    let r = threads::run(
        2,
        |c| c.timeout = std::time::Duration::from_secs(60),
        |mut b| {
            if b.rank() == Rank(0) {
                b.window_owner_only("w", 64);
            } else {
                b.window("w", 64);
            }
            Ok(b.start()?.close()?)
        },
    );
    let e = r.expect_err("the start check refuses the mismatch");
    assert!(
        matches!(e.error, Error::Start(StartError::HandlerMismatch { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("written by its owner only"), "{e}");
}
