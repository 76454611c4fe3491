//! A collective that waits long says so: a member that reaches the call
//! late (here: a broadcast's root, 3 s late; a one-sided barrier's
//! member, the same; an `Auto` barrier's member, in the barrier's set-up) makes the others print, after `close_warn` (1 s here),
//! a warning naming the collective, its instance, group and root — what a
//! hang from mismatched calls would otherwise look like: nothing. The
//! ranks run as threads of a child process of this test, whose stderr
//! (where the library's warnings go) the test reads.

use fastmsg::{threads, Rank};
use fastmsg_handlers::{BarrierAlgo, CollConfig, Collectives};
use std::process::{Command, Stdio};
use std::time::Duration;

const CASE: &str = "STALL_CASE";

/// The child: two ranks; rank 1 sleeps 3 s before the collective (the
/// one-sided wait looks at its clock every 64 polls, which may be
/// 10 ms apart when it sleeps: room for the first warning).
#[test]
fn stall_case() {
    let Ok(case) = std::env::var(CASE) else {
        return;
    };
    threads::run(
        2,
        |c| c.close_warn = Duration::from_secs(1),
        move |mut b| {
            let barrier = if case == "auto-barrier" {
                BarrierAlgo::Auto
            } else {
                BarrierAlgo::OneSided
            };
            let cfg = CollConfig {
                barrier,
                ..CollConfig::default()
            };
            let coll = Collectives::register(&mut b, cfg);
            let mut ep = b.start()?;
            if ep.rank() == Rank(1) {
                std::thread::sleep(Duration::from_secs(3));
            }
            match case.as_str() {
                "bcast" => {
                    let mut x = [f64::from(ep.rank().0); 2];
                    coll.bcast(&mut ep, &mut x, Rank(1))
                        .unwrap_or_else(|e| panic!("broadcast: {e}"));
                    assert_eq!(x, [1.0; 2]);
                }
                "one-sided-barrier" | "auto-barrier" => coll
                    .barrier(&mut ep)
                    .unwrap_or_else(|e| panic!("barrier: {e}")),
                c => panic!("unknown case {c}"),
            }
            ep.close()?;
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Run `case` in a child process; its stderr.
fn run(case: &str) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "stall_case",
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CASE, case)
        .env("FASTMSG_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run the case");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{case}: the child failed: {err}");
    err
}

#[test]
fn a_broadcast_whose_root_is_late_says_what_it_waits_for() {
    let err = run("bcast");
    assert!(
        err.contains(
            "rank 0 has waited in broadcast #0 of the world group (2 members, root rank 1) for "
        ),
        "no stall warning: {err}"
    );
}

#[test]
fn a_one_sided_barrier_with_a_late_member_says_whose_flag_it_waits_for() {
    let err = run("one-sided-barrier");
    assert!(
        err.contains("rank 0 has waited in one-sided collective #")
            && err.contains("(the flag it looks for now: rank 1's) for "),
        "no stall warning: {err}"
    );
}

/// An `Auto` barrier's first call agrees by an allreduce how crowded the
/// host is: its warning still names the barrier the member called.
#[test]
fn an_auto_barrier_waiting_in_its_set_up_names_the_barrier() {
    let err = run("auto-barrier");
    assert!(
        err.contains("rank 0 has waited in barrier #0 of the world group (2 members) for ")
            && !err.contains("allreduce"),
        "no stall warning naming the barrier: {err}"
    );
}
