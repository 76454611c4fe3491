//! A peer that takes no messages — its connection alive, but it does not
//! poll, so it returns no credit — is not silent: the sender waits for it
//! however long. But it says so: a warning naming the peer and how long
//! it has waited, after `Config::close_warn` (`FASTMSG_CLOSE_WARN`) and
//! again at each doubling of the wait — whether the sender waits inside
//! `send` (`send`) or its sends are parked (`Ctx::send` from the main
//! thread) while it waits in `wait_until` or at the parked-send bound
//! (`parked`).
//!
//! Two ranks as threads, over TCP and over shared memory: rank 1 sleeps
//! 2.5 s without polling while rank 0 sends it 4 KiB messages, far more
//! than its credit; with the warning at 1 s, rank 0's stderr must carry
//! it — once or twice (1 s, 2 s), at most three times — and every message
//! must still arrive. The job runs in a child process (this test binary,
//! one named test) whose stderr the test reads.

use fastmsg::{threads, Config, NetMode, Rank};
use std::cell::Cell;
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::time::Duration;

/// Messages of `send`: 8 MiB, past the credit and past the parked bound.
const MESSAGES: u64 = 2000;
/// Messages of `parked`: 2 MiB, under the 4 MiB parked bound, so that
/// rank 0 waits in `wait_until` with them parked.
const PARKED: u64 = 500;

/// The job, when `CREDIT_WARN` names the network mode (`tcp` or `shm`)
/// and how rank 0 sends (`send` or `parked`), e.g. `tcp:parked`.
#[test]
fn credit_warn_job() {
    let Ok(spec) = std::env::var("CREDIT_WARN") else {
        return;
    };
    let (mode, how) = spec.split_once(':').expect("mode:how");
    let configure = |c: &mut Config| {
        c.close_warn = Duration::from_secs(1);
        c.timeout = Duration::from_secs(60);
        if mode == "tcp" {
            c.net.mode = NetMode::named("tcp").expect("a provider of every build");
            c.net.secret = Some("credit-warn-test-secret".into());
        }
    };
    let total = if how == "parked" { PARKED } else { MESSAGES };
    threads::run(2, configure, |mut b| {
        let acked = Rc::new(Cell::new(false));
        let a = acked.clone();
        let ack = b.register_fn("ack", move |_ctx, _p| {
            a.set(true);
            Ok(())
        });
        let got = Rc::new(Cell::new(0u64));
        let g = got.clone();
        let h = b.register_fn("count", move |ctx, p| {
            if p.is_last() {
                g.set(g.get() + 1);
                if g.get() == total {
                    ctx.send(Rank(0), ack, &[])?;
                }
            }
            Ok(())
        });
        let mut ep = b.start()?;
        if ep.rank() == Rank(0) {
            let chunk = [0x3cu8; 4096];
            if how == "parked" {
                let ctx = ep.ctx();
                for _ in 0..total {
                    ctx.send(Rank(1), h, &[&chunk])?;
                }
            } else {
                for _ in 0..total {
                    ep.send(Rank(1), h, &[&chunk])?;
                }
            }
            ep.wait_until(|| acked.get())?;
        } else {
            // Takes nothing for a while: no poll, no credit returned.
            std::thread::sleep(Duration::from_millis(2500));
            ep.wait_until(|| got.get() == total)?;
        }
        ep.close()?;
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

fn warned(spec: &str) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "credit_warn_job",
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("CREDIT_WARN", spec)
        .stdin(Stdio::null())
        .output()
        .expect("run the job");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{spec}: the job failed: {err}");
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("for credit towards rank 1"))
        .collect();
    println!("{spec}: {warnings:?}");
    assert!(
        (1..=3).contains(&warnings.len()),
        "{spec}: not one to three warnings while rank 1 took nothing for 2.5 s: {err}"
    );
    for w in &warnings {
        assert!(
            w.contains("rank 0 has waited") && w.contains("WARN"),
            "{spec}: {w}"
        );
        if spec.ends_with(":parked") {
            assert!(w.contains("parked message(s)"), "{spec}: {w}");
        }
    }
}

#[test]
fn a_peer_that_takes_nothing_is_warned_about_over_tcp() {
    warned("tcp:send");
}

#[test]
fn a_peer_that_takes_nothing_is_warned_about_over_shm() {
    warned("shm:send");
}

#[test]
fn sends_parked_for_a_peer_that_takes_nothing_are_warned_about_over_tcp() {
    warned("tcp:parked");
}

#[test]
fn sends_parked_for_a_peer_that_takes_nothing_are_warned_about_over_shm() {
    warned("shm:parked");
}
