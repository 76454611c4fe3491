//! Order per destination across the main thread and handlers: every
//! message a rank sends to one peer arrives in the order its send was
//! issued, also when handlers run (and send to that peer) while a
//! main-thread send waits for its turn behind parked sends or for credit.
//! Rank 1 numbers every send from one counter at the moment it is issued
//! — main-loop `Endpoint::send`, `begin_message` writers, a `Ctx::post`
//! made while a writer is open, and handlers answering rank 0's pings —
//! and rank 0 checks that the numbers arrive in order.

use crate::id::Rank;
use crate::threads;
use std::cell::Cell;
use std::rc::Rc;

/// Main-loop sends of rank 1, and pings of rank 0 (each answered by a
/// handler send of rank 1).
const MAIN: u64 = 3000;
const PINGS: u64 = 3000;
/// Bytes after the number: past the inline size, within one frame.
const PAD: usize = 200;

#[test]
fn sends_from_the_main_loop_and_from_handlers_arrive_in_issue_order() {
    let results = threads::run(
        2,
        // Few credits: the main loop's sends wait, and handlers park.
        |c| c.shm.credits = 2,
        |mut b| {
            let next = Rc::new(Cell::new(0u64));
            let (want, bad, got) = (
                Rc::new(Cell::new(0u64)),
                Rc::new(Cell::new(0u64)),
                Rc::new(Cell::new(0u64)),
            );
            let (w, bd, g) = (want.clone(), bad.clone(), got.clone());
            let data = b.register_fn("numbered", move |_c, p| {
                if p.is_first() {
                    let n = u64::from_le_bytes(p.data()[..8].try_into().expect("8 bytes"));
                    if n != w.get() {
                        bd.set(bd.get() + 1);
                    }
                    w.set(n + 1);
                    g.set(g.get() + 1);
                }
                Ok(())
            });
            let (nx, answered, parked_seen) = (
                next.clone(),
                Rc::new(Cell::new(0u64)),
                Rc::new(Cell::new(false)),
            );
            let (an, ps) = (answered.clone(), parked_seen.clone());
            let ping = b.register_fn("ping", move |c, _p| {
                let n = nx.get();
                nx.set(n + 1);
                c.send(Rank(0), data, &[&n.to_le_bytes(), &[1; PAD]])?;
                if c.parked_bytes() > 0 {
                    ps.set(true);
                }
                an.set(an.get() + 1);
                Ok(())
            });
            let mut ep = b.start()?;
            if ep.rank() == Rank(1) {
                let ctx = ep.ctx();
                let issue = || {
                    let n = next.get();
                    next.set(n + 1);
                    n.to_le_bytes()
                };
                for i in 0..MAIN {
                    match i % 3 {
                        0 => ep.send(Rank(0), data, &[&issue(), &[2; PAD]])?,
                        // A message is issued when `begin_message` is
                        // called: it may wait there (running handlers).
                        1 => {
                            let n = issue();
                            let mut w = ep.begin_message(Rank(0), 8 + PAD, data)?;
                            w.send_piece(&n)?;
                            w.send_piece(&[3; PAD])?;
                            w.end()?;
                        }
                        _ => {
                            // A post while a writer is open goes after it.
                            let n = issue();
                            let mut w = ep.begin_message(Rank(0), 8 + PAD, data)?;
                            w.send_piece(&n)?;
                            ctx.post(Rank(0), data, &[&issue(), &[4; PAD]])?;
                            w.send_piece(&[5; PAD])?;
                            w.end()?;
                        }
                    }
                }
                ep.wait_until(|| answered.get() == PINGS)?;
                ep.close()?;
                // Whether a handler's answer ever had to park (the case
                // this test is about).
                return Ok(parked_seen.get());
            }
            let ctx = ep.ctx();
            for i in 0..PINGS {
                ctx.send(Rank(1), ping, &[])?;
                ep.extract(usize::MAX)?;
                if i % 256 == 0 {
                    // Let rank 1 run out of credit now and then.
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            let total = MAIN + MAIN / 3 + PINGS;
            ep.wait_until(|| got.get() >= total)?;
            assert_eq!(bad.get(), 0, "messages arrived out of issue order");
            assert_eq!(got.get(), total, "messages lost or duplicated");
            ep.close()?;
            Ok(true)
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        results[1],
        "no handler send ever parked: the test tested nothing"
    );
}
