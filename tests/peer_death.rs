//! A rank that dies is reported to the survivors — an error, never a hang.
//! Two processes are started by hand (not through fmrun, which would stop
//! the survivor itself); one exits abruptly after start.

use fastmsg::error::{ExtractError, SendError};
use fastmsg::{EndpointBuilder, Error, Rank};
use std::process::Command;
use std::time::{Duration, Instant};

/// The rank program: rank 1 dies at once; rank 0 either waits for a message
/// (`DEATH_MODE=wait`) or floods rank 1 until credit runs out
/// (`DEATH_MODE=send`), and must see the death within a few seconds.
#[test]
fn death_rank() {
    let Ok(mode) = std::env::var("DEATH_MODE") else {
        return;
    };
    let mut b = EndpointBuilder::from_env().expect("env");
    let h = b.register_fn("never", |_c, _p| Ok(()));
    let mut ep = b.start().expect("start");
    if ep.rank() == Rank(1) {
        std::process::exit(0); // no close: the peer just disappears
    }
    let t = Instant::now();
    let err: Error = if mode == "wait" {
        ep.wait_until(|| false)
            .expect_err("waiting on a dead peer must fail")
            .into()
    } else {
        loop {
            if let Err(e) = ep.send(Rank(1), h, &[&[7u8; 1000]]) {
                break e.into();
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "sends never noticed the death"
            );
        }
    };
    let ok = match (&err, mode.as_str()) {
        (Error::Extract(ExtractError::PeerDied { rank, .. }), "wait") => *rank == Rank(1),
        (Error::Send(SendError::PeerGone { rank }), "send") => *rank == Rank(1),
        _ => false,
    };
    assert!(ok, "unexpected error in {mode} mode: {err}");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    println!("rank 0 saw: {err}");
}

fn run_pair(mode: &str) {
    let exe = std::env::current_exe().unwrap();
    let job = format!("death-{}-{mode}", std::process::id());
    let spawn = |rank: u32| {
        Command::new(&exe)
            .args([
                "death_rank",
                "--exact",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env("DEATH_MODE", mode)
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
    assert!(
        s0.success(),
        "rank 0 did not report the death as expected ({mode})"
    );
}

#[test]
fn waiting_on_a_dead_peer_is_an_error() {
    run_pair("wait");
}

#[test]
fn sending_to_a_dead_peer_is_an_error() {
    run_pair("send");
}
