//! One-sided windows: every rank puts flags and data into the others'
//! windows; words are atomic and a flag put after data publishes the data.

use fastmsg::error::{PutError, StartError};
use fastmsg::threads;

// (StartError::HandlerMismatch also names windows of equal total size.)
use fastmsg::{Error, Rank, WaitPolicy};

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
