//! Multi-host runs: two network namespaces that this test creates itself
//! act as two hosts (`common::netns`: a veth pair between them, addresses
//! assigned inside them, nothing else addressed). On each, `fmrun` starts
//! that host's two ranks of a four-rank job (`--size 4 --rank-offset K
//! --root …`); ranks on one host talk over shared memory, across hosts
//! over the TCP transport. Scenarios: the all-to-all storm (checksums,
//! order), ping-pong across hosts, and a barrier and allreduce written
//! here with bare handlers and one-sided puts (the engine's own check; the
//! collectives crate runs across the same namespaces in
//! `handlers/tests/net_collectives.rs`).
//!
//! Needs root (to create namespaces); skips with a message otherwise.
//!
//! The same rank programs also run under Open MPI's `mpirun`
//! (`common::launch`): four ranks split into two "hosts" by
//! `FASTMSG_HOST`, the TCP transport forced, nothing exported — rank,
//! size, addresses and the secret come from PMIx.
//!
//! With the `ofi` feature the namespace scenarios also run with every pair
//! over libfabric (`FASTMSG_NET=ofi`, `tcp;ofi_rxm`).
//!
//! A lost host: one rank per namespace; once both run, the test cuts the
//! second namespace off (its veth end down: no FIN, RST or ICMP error
//! reaches the survivor, as when a host crashes, loses power or is
//! partitioned) and the survivor — waiting, or in the middle of a stream
//! of sends or puts — must get a typed failure naming the lost rank within
//! [`LOST_HOST_BOUND`] (keepalive probes and the silence watch,
//! `FASTMSG_NET_DEAD_AFTER_MS`, 3 s by default).
//!
//! A stopped peer: rank 1's process is stopped (`kill -STOP`) for four
//! times the silence setting while rank 0 puts far more to it than the
//! sockets hold; rank 0 must wait, not report rank 1's host silent.

mod common;

use common::netns::{stop, Hosts, Job};
use common::storm::storm_rank;
use fastmsg::bootstrap::Launcher;
use fastmsg::error::{PmixError, PutError, SendError, StartError};
use fastmsg::{Endpoint, EndpointBuilder, HandlerId, Rank};
use std::cell::{Cell, RefCell};
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

fn run(hosts: &Hosts, scenario: &str) {
    run_with(hosts, scenario, Vec::new());
}

fn run_with(hosts: &Hosts, scenario: &str, env: Vec<(String, String)>) {
    hosts.run(&Job {
        fmrun: Path::new(env!("CARGO_BIN_EXE_fmrun")),
        rank_test: "net_rank_program",
        per_host: 2,
        scenario,
        env,
        limit: Duration::from_secs(240),
    });
}

/// Every pair over libfabric (`FASTMSG_NET=ofi`, provider `tcp;ofi_rxm`
/// between the namespaces' addresses, shared memory unused).
#[cfg(feature = "ofi")]
fn run_ofi(hosts: &Hosts, scenario: &str) {
    run_with(hosts, scenario, ofi_env());
}

/// The ranks' environment for every pair over libfabric, provider
/// `tcp;ofi_rxm`.
#[cfg(feature = "ofi")]
fn ofi_env() -> Vec<(String, String)> {
    vec![
        ("FASTMSG_NET".into(), "ofi".into()),
        ("FI_PROVIDER".into(), "tcp;ofi_rxm".into()),
    ]
}

#[cfg(feature = "ofi")]
#[test]
fn two_hosts_storm_over_ofi() {
    if let Some(h) = Hosts::create("two_hosts_storm_ofi") {
        run_ofi(&h, "storm");
    }
}

#[cfg(feature = "ofi")]
#[test]
fn two_hosts_pingpong_over_ofi() {
    if let Some(h) = Hosts::create("two_hosts_pingpong_ofi") {
        run_ofi(&h, "pingpong");
    }
}

#[cfg(feature = "ofi")]
#[test]
fn two_hosts_barrier_and_allreduce_over_ofi() {
    if let Some(h) = Hosts::create("two_hosts_collective_ofi") {
        run_ofi(&h, "collective");
    }
}

#[test]
fn two_hosts_storm() {
    if let Some(h) = Hosts::create("two_hosts_storm") {
        run(&h, "storm");
    }
}

#[test]
fn two_hosts_pingpong() {
    if let Some(h) = Hosts::create("two_hosts_pingpong") {
        run(&h, "pingpong");
    }
}

#[test]
fn two_hosts_barrier_and_allreduce() {
    if let Some(h) = Hosts::create("two_hosts_barrier_and_allreduce") {
        run(&h, "collective");
    }
}

/// How long after the cut the survivor of a lost host must have its
/// typed error: the liveness watch's 3 s, the watchdog's 100 ms, and room
/// for a loaded 2-core machine.
const LOST_HOST_BOUND: Duration = Duration::from_secs(10);

/// Run `scenario` (`lost-host-wait`, `lost-host-send` or
/// `lost-host-extract`) with rank 0 in
/// the first namespace and rank 1 in the second; once both say they run
/// (a file each in a directory of the test's), cut the second namespace
/// off and time how long rank 0 takes to write down its error. Returns
/// that time and the error's text.
fn lost_host(hosts: &Hosts, scenario: &str) -> (Duration, String) {
    lost_host_with(hosts, scenario, Vec::new())
}

/// A fresh directory for the files of one test's ranks, per pair of
/// namespaces (tests run side by side).
fn pair_dir(hosts: &Hosts, name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("fm-{name}-{}", hosts.ns[0]));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `scenario` with one rank per namespace, `env` and `FASTMSG_TEST_DIR`
/// (`dir`) for the ranks, bounded by 60 s.
fn one_rank_per_host<'a>(dir: &Path, scenario: &'a str, mut env: Vec<(String, String)>) -> Job<'a> {
    env.push(("FASTMSG_TEST_DIR".into(), dir.display().to_string()));
    Job {
        fmrun: Path::new(env!("CARGO_BIN_EXE_fmrun")),
        rank_test: "net_rank_program",
        per_host: 1,
        scenario,
        env,
        limit: Duration::from_secs(60),
    }
}

/// [`lost_host`] with more environment for the ranks.
fn lost_host_with(hosts: &Hosts, scenario: &str, env: Vec<(String, String)>) -> (Duration, String) {
    let dir = pair_dir(hosts, scenario);
    let job = one_rank_per_host(&dir, scenario, env);
    let mut children = hosts.spawn(&job);
    let outcome = (|| {
        // Both ranks started and talked (bounded: start-up and a hello).
        let t = Instant::now();
        while !(dir.join("ready-0").exists() && dir.join("ready-1").exists()) {
            if t.elapsed() > Duration::from_secs(60) {
                return Err("the ranks did not get ready in 60 s".to_string());
            }
            if let Some((h, s)) = children
                .iter_mut()
                .enumerate()
                .find_map(|(h, c)| c.try_wait().unwrap().map(|s| (h, s)))
            {
                return Err(format!("host {h}'s ranks ended before the cut: {s}"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // Let the senders' stream run a little (data in flight at the cut).
        std::thread::sleep(Duration::from_millis(200));
        // Timed from before the cut: `ip` may take a while on a loaded
        // machine, and the link may go down anywhere inside it.
        let cut = Instant::now();
        hosts.cut(1);
        let took = cut.elapsed();
        if took > Duration::from_millis(100) {
            eprintln!("{scenario}: cutting the link took {took:?}");
        }
        let result = dir.join("result-0");
        loop {
            if let Ok(text) = std::fs::read_to_string(&result) {
                // Written whole by a rename: complete when it exists.
                return Ok((cut.elapsed(), text));
            }
            if cut.elapsed() > LOST_HOST_BOUND {
                return Err(format!(
                    "rank 0 was not told of rank 1's lost host within {LOST_HOST_BOUND:?} of the cut"
                ));
            }
            if let Some(s) = children[0].try_wait().unwrap() {
                return Err(format!("rank 0 ended without writing its result: {s}"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    })();
    stop(&mut children);
    let _ = std::fs::remove_dir_all(&dir);
    let (after, text) = outcome.unwrap_or_else(|e| panic!("{scenario}: {e}"));
    eprintln!("{scenario}: rank 0 was told {after:?} after the cut: {text}");
    assert!(
        text.starts_with("peer failure, rank 1:"),
        "{scenario}: rank 0 got {text:?}, not rank 1's failure"
    );
    (after, text)
}

/// A host lost while the survivor waits (an idle connection: keepalive
/// probes go unanswered).
#[test]
fn a_lost_host_is_reported_to_a_waiting_rank() {
    lost_host_said_silent(
        "a_lost_host_is_reported_to_a_waiting_rank",
        "lost-host-wait",
        "the error",
    );
}

/// [`lost_host`] in namespaces of their own (named for `test`; skipped
/// without them): rank 0's error (`what`, for the message) must say that
/// rank 1's host fell silent.
fn lost_host_said_silent(test: &str, scenario: &str, what: &str) {
    if let Some(h) = Hosts::create(test) {
        let (_, text) = lost_host(&h, scenario);
        assert!(
            text.contains("stopped answering"),
            "{what} does not say the host fell silent: {text}"
        );
    }
}

/// `FASTMSG_NET_DEAD_AFTER_MS` reaches the sockets: raised to 5 s, the
/// waiting survivor is told no sooner than that (3 s by default).
#[test]
fn a_lost_host_is_reported_after_the_configured_silence() {
    if let Some(h) = Hosts::create("a_lost_host_is_reported_after_the_configured_silence") {
        let env = vec![("FASTMSG_NET_DEAD_AFTER_MS".into(), "5000".into())];
        let (after, _) = lost_host_with(&h, "lost-host-wait", env);
        assert!(
            after >= Duration::from_millis(4500),
            "told {after:?} after the cut, before the configured 5 s"
        );
    }
}

/// Over libfabric: the provider's own connections are not the library's
/// to arm, but the set-up connection that carries a peer's news is, so a
/// waiting survivor is told all the same.
#[cfg(feature = "ofi")]
#[test]
fn a_lost_host_is_reported_to_a_waiting_rank_over_ofi() {
    if let Some(h) = Hosts::create("a_lost_host_is_reported_over_ofi") {
        lost_host_with(&h, "lost-host-wait", ofi_env());
    }
}

/// A host lost while the survivor only polls with `extract` (no blocking
/// wait ever runs the transports' checks): the silence is found all the
/// same, and named.
#[test]
fn a_lost_host_is_reported_to_a_rank_that_only_extracts() {
    lost_host_said_silent(
        "a_lost_host_is_reported_to_a_rank_that_only_extracts",
        "lost-host-extract",
        "the error",
    );
}

/// A host lost while the survivor streams to it (data unacknowledged, the
/// sender blocked in the socket or on credit: the NIC's silence watch).
#[test]
fn a_lost_host_is_reported_to_a_sending_rank() {
    lost_host_said_silent(
        "a_lost_host_is_reported_to_a_sending_rank",
        "lost-host-send",
        "the error",
    );
}

/// A host lost while the survivor puts to it: the put that finds the peer
/// gone — whether the put's own write found the silence or an `extract`
/// between puts did first — says the host fell silent (the health record
/// keeps the cause), not merely that the rank has failed.
#[test]
fn a_lost_host_is_named_silent_by_a_put() {
    lost_host_said_silent(
        "a_lost_host_is_named_silent_by_a_put",
        "lost-host-put",
        "the put's error",
    );
}

/// Send signal `sig` (`STOP`, `CONT`) to process `pid`, with kill(1).
fn signal(pid: i32, sig: &str) {
    let s = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(s.success(), "kill -{sig} {pid}: {s}");
}

/// Puts by rank 0 while rank 1 is stopped: 32 MiB.
const STOPPED_PUTS: usize = 32;

/// A peer whose process is stopped (a debugger, `SIGSTOP`, swapped out)
/// while a sender has more for it than the sockets hold is not a lost
/// host: its kernel still answers (the zero window's probes), and the
/// sender must wait for it however long, not report it silent. Rank 1 is
/// stopped for four times `FASTMSG_NET_DEAD_AFTER_MS` (1 s here) while
/// rank 0 puts 32 MiB to it; once it runs again, everything arrives.
#[test]
fn a_stopped_peer_is_waited_for_not_reported_silent() {
    if let Some(h) = Hosts::create("a_stopped_peer_is_waited_for") {
        stopped_peer(&h, Vec::new());
    }
}

/// Over libfabric: the provider's connections are its own; the news link,
/// which the library arms with the kernel's user time-out, carries a few
/// bytes and never fills.
#[cfg(feature = "ofi")]
#[test]
fn a_stopped_peer_is_waited_for_over_ofi() {
    if let Some(h) = Hosts::create("a_stopped_peer_over_ofi") {
        stopped_peer(&h, ofi_env());
    }
}

/// Run the `stopped-peer` scenario (one rank per namespace, `env` added):
/// stop rank 1 once both are ready, let rank 0 put to it for four
/// seconds, resume it, and check that rank 0 finishes with `ok`.
fn stopped_peer(hosts: &Hosts, mut env: Vec<(String, String)>) {
    let dir = pair_dir(hosts, "stopped");
    env.push(("FASTMSG_NET_DEAD_AFTER_MS".into(), "1000".into()));
    let job = one_rank_per_host(&dir, "stopped-peer", env);
    let mut children = hosts.spawn(&job);
    let mut stopped: Option<i32> = None;
    let outcome = (|| {
        let t = Instant::now();
        let pid = loop {
            if let (true, Ok(pid)) = (
                dir.join("ready-0").exists(),
                std::fs::read_to_string(dir.join("ready-1")),
            ) {
                if let Ok(pid) = pid.trim().parse::<i32>() {
                    break pid;
                }
            }
            if t.elapsed() > Duration::from_secs(60) {
                return Err("the ranks did not get ready in 60 s".to_string());
            }
            if let Some(s) = children.iter_mut().find_map(|c| c.try_wait().unwrap()) {
                return Err(format!("a rank ended before it was stopped: {s}"));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        signal(pid, "STOP");
        stopped = Some(pid);
        std::fs::write(dir.join("go"), b"").unwrap();
        std::thread::sleep(Duration::from_secs(4));
        signal(pid, "CONT");
        stopped = None;
        let t = Instant::now();
        loop {
            if let Ok(text) = std::fs::read_to_string(dir.join("result-0")) {
                return Ok(text);
            }
            if t.elapsed() > Duration::from_secs(30) {
                return Err("rank 0 did not finish within 30 s of rank 1's resumption".into());
            }
            if let Some(s) = children[0].try_wait().unwrap() {
                return Err(format!("rank 0 ended without writing its result: {s}"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    })();
    if let Some(pid) = stopped {
        // A stopped rank would outlive the test.
        signal(pid, "CONT");
    }
    stop(&mut children);
    let _ = std::fs::remove_dir_all(&dir);
    let text = outcome.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text, "ok", "rank 0 failed while rank 1 was stopped");
}

/// Under `mpirun`; `net`: `FASTMSG_NET` (`tcp` forces the network between
/// all ranks; `auto` uses it only across the two "hosts").
fn under_mpirun(scenario: &str, net: &str) {
    common::launch::mpirun(&common::launch::MpiJob {
        rank_test: "net_rank_program",
        size: 4,
        per_host: 2,
        scenario,
        env: vec![("FASTMSG_NET".into(), net.into())],
        limit: Duration::from_secs(240),
    });
}

#[test]
fn mpirun_two_hosts_storm() {
    under_mpirun("storm", "tcp");
}

#[test]
fn mpirun_two_hosts_storm_shm_within_hosts() {
    under_mpirun("storm", "auto");
}

#[test]
fn mpirun_two_hosts_pingpong() {
    under_mpirun("pingpong", "tcp");
}

/// Rank 3 never starts (it sleeps past the others' 1-second start-up
/// timeout): the others' PMIx fence must end in a typed timeout error,
/// not a hang (`late`).
#[test]
fn mpirun_a_rank_that_never_arrives_times_out_the_others_wire_up() {
    common::launch::mpirun(&common::launch::MpiJob {
        rank_test: "net_rank_program",
        size: 4,
        per_host: 2,
        scenario: "late",
        env: vec![
            ("FASTMSG_NET".into(), "tcp".into()),
            ("FASTMSG_TIMEOUT".into(), "1".into()),
        ],
        limit: Duration::from_secs(60),
    });
}

#[test]
fn mpirun_two_hosts_barrier_and_allreduce() {
    under_mpirun("collective", "tcp");
}

/// The rank program (started by `fmrun` inside a namespace, or by
/// `mpirun`); does nothing when run as an ordinary test.
#[test]
fn net_rank_program() {
    if !common::launch::is_rank() {
        return;
    }
    let b = EndpointBuilder::from_env().expect("launcher environment");
    match std::env::var(common::launch::LAUNCHED).as_deref() {
        // Slurm's environment, the wire-up over its PMI-2 socket (there is
        // no FASTMSG_ROOT or secret to fall back on).
        Ok("srun-pmi2") => assert_eq!(b.config().job.launcher, Launcher::Slurm, "launcher"),
        // MPICH's mpiexec: PMI_RANK / PMI_SIZE, the wire-up over PMI-1.
        Ok("mpiexec-pmi1") => assert_eq!(b.config().job.launcher, Launcher::Pmi, "launcher"),
        // Not the Open MPI or Slurm environment variables: PMIx itself.
        Ok(_) => assert_eq!(b.config().job.launcher, Launcher::Pmix, "launcher"),
        Err(_) => {}
    }
    let scenario = std::env::var("FASTMSG_TEST_SCENARIO").unwrap_or_default();
    match scenario.as_str() {
        "storm" => {
            storm_rank(b, 400, 256 << 10, 0x40575).expect("storm rank");
        }
        "pingpong" => pingpong(b),
        "collective" => collective(b),
        "late" => late(b),
        "lost-host-wait" => lost_host_rank(b, Survivor::Waits),
        "lost-host-send" => lost_host_rank(b, Survivor::Sends),
        "lost-host-extract" => lost_host_rank(b, Survivor::Extracts),
        "lost-host-put" => lost_host_put_rank(b),
        "stopped-peer" => stopped_peer_rank(b),
        s => panic!("unknown scenario {s:?}"),
    }
}

/// The test's directory, where ranks and test leave their files
/// (`FASTMSG_TEST_DIR`).
fn test_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(std::env::var("FASTMSG_TEST_DIR").expect("test dir"))
}

/// A handler `sink` that counts the whole messages it gets, and the count.
fn counting_sink(b: &mut EndpointBuilder) -> (HandlerId, Rc<Cell<u64>>) {
    let got = Rc::new(Cell::new(0u64));
    let g = got.clone();
    let sink = b.register_fn("sink", move |_ctx, p| {
        if p.is_last() {
            g.set(g.get() + 1);
        }
        Ok(())
    });
    (sink, got)
}

/// One message each way between ranks 0 and 1 (the pair is connected):
/// returns once this rank's `got` counts one.
fn hello(ep: &mut Endpoint, sink: HandlerId, got: &Cell<u64>) {
    let other = Rank(1 - ep.rank().0);
    ep.send(other, sink, &[b"hello"]).expect("hello");
    ep.wait_until(|| got.get() >= 1).expect("hello back");
}

/// Write rank 0's `result-0` whole (a rename): the test polls for it.
fn write_result(dir: &std::path::Path, text: &str) {
    std::fs::write(dir.join("result-0.tmp"), text).unwrap();
    std::fs::rename(dir.join("result-0.tmp"), dir.join("result-0")).unwrap();
}

/// The start of a lost-host rank (`sink` and `got` from
/// [`counting_sink`]): a hello round trip (the pair is connected); rank 1
/// then writes `ready-1` and takes what comes until its own connection
/// fails (it is the one cut off; its own view of rank 0 fails too, not
/// checked here): `None`. Rank 0 gets its endpoint.
fn lost_host_start(b: EndpointBuilder, sink: HandlerId, got: &Cell<u64>) -> Option<Endpoint> {
    let mut ep = b.start().expect("start");
    hello(&mut ep, sink, got);
    if ep.rank() == Rank(1) {
        ready(&test_dir(), 1);
        let _ = ep.wait_until(|| false);
        return None;
    }
    Some(ep)
}

/// Say that rank `me` is ready: an empty `ready-<me>` in `dir`.
fn ready(dir: &Path, me: u32) {
    std::fs::write(dir.join(format!("ready-{me}")), b"").unwrap();
}

/// What the survivor of a lost host (rank 0) does until it is told.
#[derive(Clone, Copy, PartialEq)]
enum Survivor {
    /// Waits for nothing that will come (`wait_until`).
    Waits,
    /// Streams 64 KiB messages to rank 1, extracting between sends.
    Sends,
    /// Only polls with `extract`, never a blocking wait.
    Extracts,
}

/// A rank of `lost_host`. Both: a hello round trip (the pair is
/// connected), then `ready-<rank>` in `FASTMSG_TEST_DIR`. Rank 1 then
/// takes what comes until its own connection fails (it is the one cut
/// off). Rank 0 does what `way` says until its failure is reported,
/// checks that the failure names rank 1, and writes `result-0`: `peer
/// failure, rank 1: <error>` (anything else: `unexpected: …`).
fn lost_host_rank(mut b: EndpointBuilder, way: Survivor) {
    let (sink, got) = counting_sink(&mut b);
    let Some(mut ep) = lost_host_start(b, sink, &got) else {
        return;
    };
    let (dir, other) = (test_dir(), Rank(1));
    let err = if way == Survivor::Extracts {
        ready(&dir, 0);
        // Bounded by the test, which stops this rank past its bound.
        loop {
            if let Err(e) = ep.extract(usize::MAX) {
                break Some(e);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    } else if way == Survivor::Sends {
        let chunk = vec![0x5au8; 64 << 10];
        let mut sent = 0u64;
        loop {
            if let Err(e) = ep.send(other, sink, &[&chunk]) {
                eprintln!("rank 0: send {sent} failed: {e}");
                // The send found the silence itself: its error must say so.
                let text = match &e {
                    SendError::PeerSilent { rank, .. } if *rank == other => {
                        format!("peer failure, rank 1: send: {e}")
                    }
                    _ => format!("unexpected: send: {e:?}"),
                };
                write_result(&dir, &text);
                return;
            }
            sent += 1;
            if sent == 64 {
                ready(&dir, 0);
            }
            if let Err(e) = ep.extract(usize::MAX) {
                break Some(e);
            }
        }
        .or_else(|| ep.wait_until(|| false).err())
    } else {
        ready(&dir, 0);
        ep.wait_until(|| false).err()
    };
    let text = match err {
        Some(e @ fastmsg::error::ExtractError::Network(_)) if e.failed_peer() == Some(other) => {
            format!("peer failure, rank 1: {e}")
        }
        e => format!("unexpected: {e:?}"),
    };
    // Whole or absent for the test that polls for it.
    write_result(&dir, &text);
}

/// A rank of `a_lost_host_is_named_silent_by_a_put`: rank 1 waits; rank
/// 0 puts 64 KiB chunks into rank 1's window, with an `extract` between
/// puts, until a put fails, and writes that put's error (an error of the
/// `extract` is remembered: the next put must name the same cause).
fn lost_host_put_rank(mut b: EndpointBuilder) {
    let (sink, got) = counting_sink(&mut b);
    let win = b.window("w", 64 << 10);
    let Some(mut ep) = lost_host_start(b, sink, &got) else {
        return;
    };
    let (dir, other) = (test_dir(), Rank(1));
    let chunk = vec![0xa5u8; 64 << 10];
    let mut puts = 0u64;
    let mut extract_error = None;
    let e = loop {
        if let Err(e) = ep.put(win, other, 0, &chunk) {
            break e;
        }
        puts += 1;
        if puts == 64 {
            ready(&dir, 0);
        }
        if extract_error.is_none() {
            extract_error = ep.extract(usize::MAX).err();
        }
    };
    eprintln!("rank 0: put {puts} failed: {e} (extract said: {extract_error:?})");
    let text = match &e {
        PutError::PeerSilent { rank, .. } if *rank == other => {
            format!("peer failure, rank 1: put: {e}")
        }
        _ => format!("unexpected: put: {e:?}"),
    };
    write_result(&dir, &text);
}

/// A rank of `a_stopped_peer_is_waited_for`. Both: a hello round trip.
/// Rank 1 writes its process id to `ready-1` and waits for rank 0's
/// `done`, then checks its window (the last put's pattern) and answers.
/// Rank 0 writes `ready-0`, waits for the test's `go` (rank 1 is stopped
/// by then), puts [`STOPPED_PUTS`] × 1 MiB into rank 1's window (far more
/// than the sockets hold: rank 0 blocks on a zero window until rank 1
/// runs again), sends `done`, waits for the answer and writes `result-0`:
/// `ok`, or what went wrong.
fn stopped_peer_rank(mut b: EndpointBuilder) {
    const MIB: usize = 1 << 20;
    let dir = test_dir();
    let (sink, got) = counting_sink(&mut b);
    let win = b.window("w", MIB);
    let mut ep = b.start().expect("start");
    let me = ep.rank().0;
    let other = Rank(1 - me);
    hello(&mut ep, sink, &got);
    if me == 1 {
        std::fs::write(dir.join("ready-1"), std::process::id().to_string()).unwrap();
        ep.wait_until(|| got.get() >= 2).expect("done");
        let mut w = vec![0u8; MIB];
        ep.read_window(win, 0, &mut w).expect("read window");
        let last = (STOPPED_PUTS - 1) as u8;
        assert!(
            w.iter().all(|&x| x == last),
            "rank 1: the last put is not in the window"
        );
        ep.send(other, sink, &[b"checked"]).expect("answer");
        ep.close().expect("close");
        return;
    }
    ready(&dir, 0);
    let t = Instant::now();
    while !dir.join("go").exists() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "rank 0: no go in 60 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let outcome = (|| -> Result<(), String> {
        for i in 0..STOPPED_PUTS {
            let chunk = vec![i as u8; MIB];
            ep.put(win, other, 0, &chunk)
                .map_err(|e| format!("put {i}: {e}"))?;
        }
        ep.send(other, sink, &[b"done"])
            .map_err(|e| format!("done: {e}"))?;
        ep.wait_until(|| got.get() >= 2)
            .map_err(|e| format!("answer: {e}"))?;
        ep.close().map_err(|e| format!("close: {e}"))
    })();
    let text = match outcome {
        Ok(()) => "ok".to_string(),
        Err(e) => e,
    };
    write_result(&dir, &text);
}

/// Rank 3 stays away for 6 s; the others' start must fail on their
/// 1-second timeout with PMIx's timeout status, named (a hang would run
/// into the job's limit).
fn late(b: EndpointBuilder) {
    if b.rank().0 == 3 {
        std::thread::sleep(Duration::from_secs(6));
        return;
    }
    match b.start() {
        Err(StartError::Pmix(PmixError::Call { call, status, .. })) => {
            assert!(call.starts_with("PMIx_Fence"), "{call}");
            assert_eq!(status, -24, "PMIX_ERR_TIMEOUT");
        }
        Err(e) => panic!("expected the fence to time out, got {e}"),
        Ok(_) => panic!("started without rank 3"),
    }
}

/// Ranks 0↔2 and 1↔3 (different hosts) bounce messages of several sizes,
/// checking every byte; every rank checks which ranks share its host.
fn pingpong(mut b: EndpointBuilder) {
    let got: Rc<RefCell<Vec<u8>>> = Rc::default();
    let n = Rc::new(Cell::new(0u32));
    let (g, c) = (got.clone(), n.clone());
    let echo_back = b.register("pong", move |_ctx, mut m| {
        let (g, c) = (g.clone(), c.clone());
        async move {
            *g.borrow_mut() = m.receive_vec().await?;
            c.set(c.get() + 1);
            Ok(())
        }
    });
    let ping = b.register("ping", move |ctx, mut m| async move {
        let v = m.receive_vec().await?;
        ctx.send(m.source(), echo_back, &[&v])?;
        Ok(())
    });
    let mut ep = b.start().expect("start");
    let me = ep.rank().0;
    let mates: Vec<u32> = ep.local_ranks().iter().map(|r| r.0).collect();
    assert_eq!(
        mates,
        if me < 2 { vec![0, 1] } else { vec![2, 3] },
        "host map"
    );
    if me < 2 {
        let peer = Rank(me + 2);
        for (i, size) in [0usize, 1, 100, 4096, 70_000, 300_000]
            .into_iter()
            .enumerate()
        {
            for k in 0..20u32 {
                let msg: Vec<u8> = (0..size).map(|j| (j as u32 ^ k ^ i as u32) as u8).collect();
                let want = n.get() + 1;
                ep.send(peer, ping, &[&msg]).expect("send");
                ep.wait_until(|| n.get() == want).expect("wait");
                assert_eq!(*got.borrow(), msg, "echo of {size} bytes");
            }
        }
    }
    ep.close().expect("close");
}

/// A barrier and an allreduce across hosts, written with handlers (sum to
/// rank 0, broadcast back) and with one-sided puts (each rank stores its
/// epoch in rank 0's window; rank 0 releases everybody with a put).
fn collective(mut b: EndpointBuilder) {
    let size = b.size();
    let win = b.window("barrier", 8 * 8);
    let sums: Rc<RefCell<Vec<(u64, i64)>>> = Rc::default();
    let result: Rc<Cell<Option<(u64, i64)>>> = Rc::default();
    let (s, r) = (sums.clone(), result.clone());
    let result_h = b.register_fn("result", move |_ctx, p| {
        let epoch = u64::from_le_bytes(p.data()[..8].try_into()?);
        let v = i64::from_le_bytes(p.data()[8..16].try_into()?);
        r.set(Some((epoch, v)));
        Ok(())
    });
    let contrib = b.register_fn("contrib", move |ctx, p| {
        let epoch = u64::from_le_bytes(p.data()[..8].try_into()?);
        let v = i64::from_le_bytes(p.data()[8..16].try_into()?);
        let mut s = s.borrow_mut();
        s.push((epoch, v));
        let now: Vec<_> = s.iter().filter(|e| e.0 == epoch).copied().collect();
        if now.len() as u32 == ctx.size() {
            let total: i64 = now.iter().map(|e| e.1).sum();
            s.retain(|e| e.0 != epoch);
            for d in 0..ctx.size() {
                ctx.send(
                    Rank(d),
                    result_h,
                    &[&epoch.to_le_bytes(), &total.to_le_bytes()],
                )?;
            }
        }
        Ok(())
    });
    let mut ep = b.start().expect("start");
    let me = ep.rank().0;
    for epoch in 1..=40u64 {
        // Allreduce (sum) of a value that differs per rank and epoch.
        let v = (i64::from(me) + 1) * epoch as i64 - 7;
        ep.send(Rank(0), contrib, &[&epoch.to_le_bytes(), &v.to_le_bytes()])
            .expect("contribute");
        ep.wait_until(|| result.get().is_some_and(|r| r.0 == epoch))
            .expect("allreduce");
        let want: i64 = (0..size)
            .map(|r| (i64::from(r) + 1) * epoch as i64 - 7)
            .sum();
        assert_eq!(result.get().unwrap().1, want, "allreduce of epoch {epoch}");
        // Flag barrier with one-sided puts: arrive at rank 0, wait for
        // rank 0's release (checked with >=, so epochs never confuse).
        ep.put_u64(win, Rank(0), 8 * me as usize, epoch)
            .expect("arrive");
        if me == 0 {
            let t0 = Instant::now();
            loop {
                let all = (0..size).all(|r| ep.read_u64(win, 8 * r as usize).unwrap() >= epoch);
                if all {
                    break;
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(60),
                    "barrier {epoch} stuck"
                );
                ep.extract(usize::MAX).expect("extract");
                std::thread::yield_now();
            }
            for r in 1..size {
                ep.put_u64(win, Rank(r), 8 * 7, epoch).expect("release");
            }
        } else {
            let t0 = Instant::now();
            while ep.read_u64(win, 8 * 7).unwrap() < epoch {
                assert!(
                    t0.elapsed() < Duration::from_secs(60),
                    "barrier {epoch} stuck"
                );
                ep.extract(usize::MAX).expect("extract");
                std::thread::yield_now();
            }
        }
    }
    ep.close().expect("close");
}
