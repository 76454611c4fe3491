//! Counters (feature `stats`): two ranks as threads with 2 credits per
//! pair, so the sender must wait for credit and a handler's replies park.

#![cfg(feature = "stats")]

use fastmsg::threads;
use fastmsg::Rank;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

const N: u64 = 50;
const BYTES: usize = 1000;
const REPLIES: u64 = 20;

#[test]
fn counters_see_traffic_credit_waits_and_parking() {
    let stats = threads::run(
        2,
        |cfg| cfg.shm.credits = 2,
        |mut b| {
            let me = b.rank().0;
            let got = Rc::new(Cell::new(0u64));
            let replies = Rc::new(Cell::new(0u64));
            let (g, r) = (got.clone(), replies.clone());
            let reply = b.register_fn("reply", move |_ctx, _p| {
                r.set(r.get() + 1);
                Ok(())
            });
            let data = b.register_fn("data", move |ctx, p| {
                if p.is_last() {
                    g.set(g.get() + 1);
                    if g.get() == N {
                        // Never blocks: what lacks credit parks.
                        for _ in 0..REPLIES {
                            ctx.send(Rank(0), reply, &[&[7u8; 100]]).unwrap();
                        }
                    }
                }
                Ok(())
            });
            let mut ep = b.start()?;
            if me == 0 {
                for _ in 0..N {
                    ep.send(Rank(1), data, &[&[1u8; BYTES]])?;
                }
                ep.wait_until(|| replies.get() == REPLIES)?;
            } else {
                // Let the sender run out of credit first.
                std::thread::sleep(Duration::from_millis(100));
                ep.wait_until(|| got.get() == N)?;
            }
            while ep.extract(usize::MAX)?.any() {}
            let s = ep.stats();
            ep.close()?;
            Ok(s)
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (s0, s1) = (&stats[0], &stats[1]);
    let to1 = &s0.peers[1];
    assert!(to1.messages_sent >= N, "{to1:?}");
    assert!(to1.bytes_sent >= N * BYTES as u64, "{to1:?}");
    assert!(
        to1.credit_waits > 0 && !to1.credit_wait_time.is_zero(),
        "{to1:?}"
    );
    assert!(s0.peers[1].messages_received >= REPLIES, "{s0:?}");
    let from0 = &s1.peers[0];
    assert!(from0.messages_received >= N, "{from0:?}");
    assert!(from0.bytes_received >= N * BYTES as u64, "{from0:?}");
    assert!(from0.parked_high_water >= 10, "{from0:?}");
    assert!(from0.parked_bytes_high_water >= 1000, "{from0:?}");
    // Rank 1's data handler ran once per piece of each of the N messages.
    assert!(s1.handler_calls >= N, "{s1:?}");
    assert!(s0.empty_extracts >= 1 && s1.empty_extracts >= 1);
    let table = s1.table(1);
    assert!(
        table.contains("msgs out") && table.lines().count() >= 3,
        "{table}"
    );
}
