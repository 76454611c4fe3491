//! A peer that takes no messages — its connection alive, but it does not
//! poll, so it returns no credit — is not silent: the sender waits for it
//! however long. But it says so, once per wait: a warning naming the peer
//! and how long it has waited, after `Config::close_warn`
//! (`FASTMSG_CLOSE_WARN`).
//!
//! Two ranks as threads, over TCP and over shared memory: rank 1 sleeps
//! 2.5 s without polling while rank 0 sends it 2000 messages of 4 KiB,
//! far more than its credit; with the warning at 1 s, rank 0's stderr
//! must carry it, and every message must still arrive. The job runs in a
//! child process (this test binary, one named test) whose stderr the test
//! reads.

use fastmsg::{threads, Config, NetMode, Rank};
use std::cell::Cell;
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::time::Duration;

const MESSAGES: u64 = 2000;

/// The job, when `CREDIT_WARN` names the network mode (`tcp` or `shm`).
#[test]
fn credit_warn_job() {
    let Ok(mode) = std::env::var("CREDIT_WARN") else {
        return;
    };
    let configure = |c: &mut Config| {
        c.close_warn = Duration::from_secs(1);
        c.timeout = Duration::from_secs(60);
        if mode == "tcp" {
            c.net.mode = NetMode::named("tcp").expect("a provider of every build");
            c.net.secret = Some("credit-warn-test-secret".into());
        }
    };
    threads::run(2, configure, |mut b| {
        let got = Rc::new(Cell::new(0u64));
        let g = got.clone();
        let h = b.register_fn("count", move |_ctx, p| {
            if p.is_last() {
                g.set(g.get() + 1);
            }
            Ok(())
        });
        let mut ep = b.start()?;
        if ep.rank() == Rank(0) {
            let chunk = [0x3cu8; 4096];
            for _ in 0..MESSAGES {
                ep.send(Rank(1), h, &[&chunk])?;
            }
        } else {
            // Takes nothing for a while: no poll, no credit returned.
            std::thread::sleep(Duration::from_millis(2500));
            ep.wait_until(|| got.get() == MESSAGES)?;
        }
        ep.close()?;
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

fn warned_once(mode: &str) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "credit_warn_job",
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("CREDIT_WARN", mode)
        .stdin(Stdio::null())
        .output()
        .expect("run the job");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{mode}: the job failed: {err}");
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("for credit towards rank 1"))
        .collect();
    println!("{mode}: {warnings:?}");
    assert_eq!(
        warnings.len(),
        1,
        "{mode}: not one warning while rank 1 took nothing for 2.5 s: {err}"
    );
    assert!(
        warnings[0].contains("rank 0 has waited") && warnings[0].contains("WARN"),
        "{mode}: {}",
        warnings[0]
    );
}

#[test]
fn a_peer_that_takes_nothing_is_warned_about_over_tcp() {
    warned_once("tcp");
}

#[test]
fn a_peer_that_takes_nothing_is_warned_about_over_shm() {
    warned_once("shm");
}
