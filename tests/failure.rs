//! A peer's failure is reported — to a program that only polls too — within
//! a second, and stays reported: every later blocking call fails with it,
//! every send to the failed rank fails, nothing spins for ever. Liveness
//! does not depend on comparable process ids: ranks in their own PID
//! namespaces (`unshare --pid --fork`, root only) are neither declared dead
//! while alive nor missed when dead. A rank that never calls `close` is
//! named by the ranks waiting for it.
//!
//! Ranks are processes started by hand (not through `fmrun`, which would
//! stop the survivor itself), except where `fmrun` is the point.

mod common;

use common::procs::{self, Spawner};
use fastmsg::error::{ExtractError, NetError, PutError, SendError};
use fastmsg::{EndpointBuilder, Rank};
use std::time::{Duration, Instant};

/// How a survivor recognises the failure it expects.
fn expected(scenario: &str, e: &ExtractError) -> bool {
    match scenario {
        "exit" | "ns-dead" => matches!(e, ExtractError::PeerDied { rank: Rank(1), .. }),
        "drop" => matches!(e, ExtractError::PeerLeft { rank: Rank(1) }),
        "tcp-exit" => matches!(
            e,
            ExtractError::Network(NetError::Disconnected { rank: Rank(1), .. })
        ),
        _ => false,
    }
}

/// Rank 1 goes (per scenario) a little after start; rank 0 only polls with
/// `extract`, must be told within a second, and then finds the failure in
/// every call that involves rank 1.
fn survivor(scenario: &str) {
    let mut b = EndpointBuilder::from_env().expect("env");
    let h = b.register_fn("sink", |_c, _p| Ok(()));
    let win = b.window("w", 64);
    let mut ep = b.start().expect("start");
    let stamp = std::env::var("FAIL_STAMP").expect("FAIL_STAMP");
    if ep.rank() == Rank(1) {
        std::thread::sleep(Duration::from_millis(300));
        std::fs::write(&stamp, procs::now_ns().to_string()).unwrap();
        match scenario {
            // Gone without close or drop, as a crash or `exit` would.
            "exit" | "ns-dead" | "tcp-exit" => std::process::exit(0),
            // The endpoint dropped without close; the process lives on.
            "drop" => {
                drop(ep);
                std::thread::sleep(Duration::from_secs(3));
                std::process::exit(0);
            }
            s => panic!("unknown scenario {s}"),
        }
    }
    // Rank 0: a program that only polls.
    let t0 = Instant::now();
    let err = loop {
        match ep.extract(usize::MAX) {
            Ok(_) => {}
            Err(e) => break e,
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{scenario}: extract never reported rank 1's failure"
        );
    };
    let seen = procs::now_ns();
    assert!(expected(scenario, &err), "{scenario}: unexpected {err:?}");
    let gone: u128 = loop {
        if let Ok(s) = std::fs::read_to_string(&stamp) {
            if let Ok(t) = s.trim().parse() {
                break t;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let latency = Duration::from_nanos(seen.saturating_sub(gone) as u64);
    println!("{scenario}: extract reported {err} after {latency:?}");
    assert!(
        latency < Duration::from_secs(1),
        "{scenario}: reported {latency:?} after the failure"
    );
    assert_eq!(ep.failed_peers(), vec![Rank(1)]);
    // Reported once: extract goes on serving (nothing left to serve).
    for _ in 0..1000 {
        ep.extract(usize::MAX)
            .expect("after its report, a failure does not fail every extract");
    }
    // Every blocking call fails with it, at once, every time.
    for _ in 0..3 {
        let t = Instant::now();
        let e = ep
            .wait_until(|| false)
            .expect_err("waiting with a failed peer must fail");
        assert!(expected(scenario, &e), "{scenario}: wait_until gave {e:?}");
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "took {:?}",
            t.elapsed()
        );
    }
    // Every send to it fails at once; nothing is parked.
    let t = Instant::now();
    for i in 0..200_000 {
        match ep.send(Rank(1), h, &[&[7u8; 1000]]) {
            Err(SendError::PeerGone { rank: Rank(1) }) => {}
            other => panic!("{scenario}: send {i} to the failed rank gave {other:?}"),
        }
    }
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "sends took {:?}",
        t.elapsed()
    );
    assert!(matches!(
        ep.begin_message(Rank(1), 10, h),
        Err(SendError::PeerGone { rank: Rank(1) })
    ));
    assert!(matches!(
        ep.put_u64(win, Rank(1), 0, 1),
        Err(PutError::PeerGone { rank: Rank(1) })
    ));
    // Sending to itself still works: the endpoint is usable.
    ep.send(Rank(0), h, &[b"still here"]).expect("self-send");
    ep.extract(usize::MAX).expect("self-delivery");
    let e = ep
        .close()
        .expect_err("closing with a failed peer must fail");
    assert!(expected(scenario, &e), "{scenario}: close gave {e:?}");
}

/// The rank program of every test here (does nothing unless started as a
/// rank).
#[test]
fn failure_rank() {
    let Ok(scenario) = std::env::var("FAIL_SCENARIO") else {
        return;
    };
    match scenario.as_str() {
        "ns-alive" => ping_pong_for(Duration::from_millis(2500)),
        "straggler" => straggler(),
        "shared-held" => shared_queue_receiver_dies(),
        s => survivor(s),
    }
}

fn stamp_file(tag: &str) -> String {
    std::env::temp_dir()
        .join(format!("fastmsg-fail-{tag}-{}", std::process::id()))
        .to_string_lossy()
        .into_owned()
}

/// Start `size` ranks of `scenario` (rank `wrapped`, if any, through
/// `wrapper`; `env` added to every rank's) and wait for all of them,
/// killing what still runs after `limit` (a failure).
fn run_job(
    scenario: &str,
    size: u32,
    env: &[(&str, &str)],
    wrapped: Option<u32>,
    wrapper: &[&str],
    limit: Duration,
) -> Vec<std::process::ExitStatus> {
    let stamp = stamp_file(scenario);
    let _ = std::fs::remove_file(&stamp);
    let mut vars = vec![
        ("FAIL_SCENARIO".into(), scenario.into()),
        ("FAIL_STAMP".into(), stamp.clone()),
    ];
    vars.extend(env.iter().map(|&(k, v)| (k.to_owned(), v.to_owned())));
    let sp = Spawner {
        rank_test: "failure_rank",
        size,
        job: format!("fail-{scenario}-{}", std::process::id()),
        env: vars,
    };
    let mut ranks: Vec<_> = (0..size)
        .map(|r| {
            let w: &[&str] = if wrapped == Some(r) { wrapper } else { &[] };
            sp.spawn(r, w, &[])
        })
        .collect();
    let st = procs::wait_all(&mut ranks, limit, scenario);
    let _ = std::fs::remove_file(&stamp);
    st
}

/// Run `scenario` with rank `wrapped` (if any) started through `wrapper`.
fn run_pair(scenario: &str, wrapped: Option<u32>, wrapper: &[&str]) {
    let st = run_job(scenario, 2, &[], wrapped, wrapper, Duration::from_secs(40));
    assert!(st[1].success(), "{scenario}: rank 1 failed: {}", st[1]);
    assert!(
        st[0].success(),
        "{scenario}: rank 0 (the survivor) failed: {}",
        st[0]
    );
}

#[test]
fn a_polling_rank_sees_an_exit_without_close_and_it_stays_seen() {
    run_pair("exit", None, &[]);
}

#[test]
fn a_dropped_endpoint_is_a_peer_that_left() {
    run_pair("drop", None, &[]);
}

/// Under `fmrun`: a rank that exits with status 0 without `close` does not
/// stop the job, so the survivor must see it itself.
fn run_fmrun(scenario: &str) {
    let stamp = stamp_file(scenario);
    let _ = std::fs::remove_file(&stamp);
    let exe = std::env::current_exe().unwrap();
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_fmrun"));
    c.args(["-n", "2", "--timeout", "20"])
        .arg(exe)
        .args([
            "failure_rank",
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("FAIL_SCENARIO", scenario)
        .env("FAIL_STAMP", &stamp);
    let mut child = c.spawn().expect("fmrun");
    let st = procs::wait_until(&mut child, Instant::now() + Duration::from_secs(40));
    let _ = std::fs::remove_file(&stamp);
    let st = st.unwrap_or_else(|| panic!("{scenario}: fmrun job hung (killed)"));
    assert!(st.success(), "{scenario} under fmrun: {st}");
}

#[test]
fn an_exit_without_close_is_seen_under_fmrun() {
    run_fmrun("exit");
}

/// Over the network: rank 0 and rank 1 on two "hosts" (network namespaces
/// this test creates), so only the TCP connection can tell.
#[test]
fn an_exit_without_close_is_seen_across_hosts() {
    let Some(hosts) = common::netns::Hosts::create("failure_across_hosts") else {
        return;
    };
    let stamp = stamp_file("tcp-exit");
    let _ = std::fs::remove_file(&stamp);
    hosts.run(&common::netns::Job {
        fmrun: std::path::Path::new(env!("CARGO_BIN_EXE_fmrun")),
        rank_test: "failure_rank",
        per_host: 1,
        scenario: "tcp-exit",
        env: vec![
            ("FAIL_SCENARIO".into(), "tcp-exit".into()),
            ("FAIL_STAMP".into(), stamp.clone()),
        ],
        limit: Duration::from_secs(60),
    });
    let _ = std::fs::remove_file(&stamp);
}

/// Both ranks exchange messages for a while, slowly: each of rank 0's
/// waits lasts longer than the 100 ms after which an idle wait looks at
/// its peers (and the watchdog looks all along); no wait may report the
/// live peer dead.
fn ping_pong_for(d: Duration) {
    use std::cell::Cell;
    use std::rc::Rc;
    let mut b = EndpointBuilder::from_env().expect("env");
    let (got, stop) = (Rc::new(Cell::new(0u64)), Rc::new(Cell::new(false)));
    let (g, st) = (got.clone(), stop.clone());
    let h = b.register_fn("ball", move |_c, p| {
        g.set(g.get() + 1);
        st.set(p.data().is_empty());
        Ok(())
    });
    let mut ep = b.start().expect("start");
    let peer = Rank(1 - ep.rank().0);
    let t = Instant::now();
    let mut rounds = 0u64;
    if ep.rank() == Rank(0) {
        loop {
            let last = t.elapsed() > d;
            ep.send(peer, h, &[if last { &[] } else { &[1u8] }])
                .expect("send to the live peer");
            if last {
                break;
            }
            ep.wait_until(|| got.get() > rounds)
                .expect("the live peer must not be declared dead");
            rounds += 1;
        }
    } else {
        loop {
            ep.wait_until(|| got.get() > rounds)
                .expect("the live peer must not be declared dead");
            rounds += 1;
            if stop.get() {
                break;
            }
            std::thread::sleep(Duration::from_millis(150));
            ep.send(peer, h, &[&[1u8]]).expect("send back");
        }
    }
    assert!(rounds > 5, "only {rounds} rounds");
    ep.close().expect("close");
}

#[test]
fn a_live_rank_in_another_pid_namespace_is_not_declared_dead() {
    if !procs::can_unshare_pid() {
        eprintln!("SKIP: unshare --pid --fork is not available (needs root)");
        return;
    }
    // Rank 0 in its own PID namespace: the pid rank 1 recorded names no
    // process there.
    run_pair("ns-alive", Some(0), &["unshare", "--pid", "--fork"]);
}

#[test]
fn a_dead_rank_that_was_pid_1_of_its_namespace_is_noticed() {
    if !procs::can_unshare_pid() {
        eprintln!("SKIP: unshare --pid --fork is not available (needs root)");
        return;
    }
    // Rank 1 is pid 1 of its namespace: `kill(1, 0)` from outside finds
    // the host's init, alive for ever.
    run_pair("ns-dead", Some(1), &["unshare", "--pid", "--fork"]);
}

/// Rank 1 calls `close` 2.5 s after the others: with FASTMSG_CLOSE_WARN=1
/// every waiting rank names it.
fn straggler() {
    let mut b = EndpointBuilder::from_env().expect("env");
    b.register_fn("unused", |_c, _p| Ok(()));
    let ep = b.start().expect("start");
    if ep.rank() == Rank(1) {
        std::thread::sleep(Duration::from_millis(2500));
    }
    ep.close().expect("close");
}

#[test]
fn close_names_the_rank_that_has_not_called_it() {
    let exe = std::env::current_exe().unwrap();
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_fmrun"));
    c.args(["-n", "3", "--timeout", "20"])
        .arg(exe)
        .args([
            "failure_rank",
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("FAIL_SCENARIO", "straggler")
        .env("FASTMSG_CLOSE_WARN", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let child = c.spawn().expect("fmrun");
    let out = child.wait_with_output().expect("fmrun output");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "job failed: {}\n{err}", out.status);
    assert!(
        err.contains("rank 0 has waited")
            && err.contains("for rank(s) 1 that have not called close"),
        "rank 0 did not name rank 1:\n{err}"
    );
    assert!(
        err.contains(
            "rank 2 is waiting in close: rank 0 reports that rank(s) 1 have not called close"
        ),
        "rank 2 did not relay rank 0's list:\n{err}"
    );
}

/// One shared receive queue per rank (`FASTMSG_QUEUES=1`, three ranks):
/// rank 2's message to rank 1 goes to an async handler that never lets
/// it go, so its slot is never recycled; rank 0 streams to rank 1 until
/// its next position is that slot's, and waits there (it has credit:
/// rank 1 handles its messages). Then rank 1 dies. Rank 0's wait must
/// end within a second of the death, the send failing with `PeerGone`,
/// and `extract` must report the death.
fn shared_queue_receiver_dies() {
    let mut b = EndpointBuilder::from_env().expect("env");
    let sink = b.register_fn("sink", |_c, _p| Ok(()));
    let hold = b.register("hold", |_c, m| async move {
        std::future::pending::<()>().await;
        drop(m);
        Ok(())
    });
    let mut ep = b.start().expect("start");
    let stamp = std::env::var("FAIL_STAMP").expect("FAIL_STAMP");
    match ep.rank().0 {
        2 => {
            ep.send(Rank(1), hold, &[]).expect("the held message");
            // Stay alive (and quiet) until rank 0 is done; no close.
            std::thread::sleep(Duration::from_secs(4));
            std::process::exit(0);
        }
        1 => {
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(800) {
                ep.extract(usize::MAX).expect("rank 1 serves");
            }
            std::fs::write(&stamp, procs::now_ns().to_string()).unwrap();
            std::process::exit(0);
        }
        _ => {}
    }
    // Rank 0: after rank 2's message is in, stream to rank 1.
    std::thread::sleep(Duration::from_millis(200));
    let mut sent = 0u64;
    let err = loop {
        match ep.send(Rank(1), sink, &[]) {
            Ok(()) => sent += 1,
            Err(e) => break e,
        }
        assert!(sent < 10_000_000, "rank 0 was never held up");
    };
    let failed_at = procs::now_ns();
    assert!(
        matches!(err, SendError::PeerGone { rank: Rank(1) }),
        "the held-up send gave {err:?}"
    );
    let died: u128 = std::fs::read_to_string(&stamp)
        .expect("rank 1 wrote its stamp before it died")
        .trim()
        .parse()
        .unwrap();
    let latency = Duration::from_nanos(failed_at.saturating_sub(died) as u64);
    println!("shared-held: the send held up on rank 1's queue gave up {latency:?} after its death ({sent} sends before)");
    assert!(
        latency < Duration::from_secs(1),
        "gave up {latency:?} after the death"
    );
    let t = Instant::now();
    let e = loop {
        if let Err(e) = ep.extract(usize::MAX) {
            break e;
        }
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "the death was not reported"
        );
    };
    assert!(
        matches!(e, ExtractError::PeerDied { rank: Rank(1), .. }),
        "extract gave {e:?}"
    );
    std::process::exit(0);
}

#[test]
fn a_sender_held_up_on_a_shared_queue_is_released_by_the_receivers_death() {
    let st = run_job(
        "shared-held",
        3,
        &[("FASTMSG_QUEUES", "1")],
        None,
        &[],
        Duration::from_secs(30),
    );
    assert!(st[0].success(), "shared-held: rank 0 failed: {}", st[0]);
}
