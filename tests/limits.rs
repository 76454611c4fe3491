//! The open-file limit of jobs over the network: a rank's soft
//! `RLIMIT_NOFILE` is raised to what its connections need (every other
//! rank, plus 64 spare) when the hard limit allows it; when the hard limit
//! is below the connections + 16, start-up fails at once with
//! `ConfigError::TooFewDescriptors` naming the limit (before, rank 0's
//! rendezvous accepted in a loop of EMFILE until the start-up time-out).
//! fmrun raises its own for the ranks' pipes, or refuses at once. Limits
//! are set for the launched job (or each rank) alone, through
//! `sh -c 'ulimit …; exec …'`.
//!
//! The address space: a rank whose network rings do not fit its memory
//! limit gets a start error naming the bytes, the settings that size them
//! and the OS's error (before, a panic in the ring allocation).

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Rank program: start over the network, print the soft limit it runs
/// with, close; or print the start error.
#[test]
fn fd_rank() {
    if std::env::var_os("FASTMSG_RANK").is_none() {
        return;
    }
    let mut b = fastmsg::EndpointBuilder::from_env().expect("env");
    b.register_fn("unused", |_c, _p| Ok(()));
    match b.start() {
        Ok(ep) => {
            let fds = std::fs::read_dir("/proc/self/fd").expect("fd list").count();
            println!(
                "SOFT-LIMIT {} FDS {fds}",
                soft_limit().expect("/proc/self/limits")
            );
            ep.close().expect("close");
            std::process::exit(0);
        }
        Err(e) => {
            eprintln!("START-ERROR: {e}");
            std::process::exit(2);
        }
    }
}

/// This process's soft open-file limit.
fn soft_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

fn hard_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let v = line.split_whitespace().nth(4)?;
    if v == "unlimited" {
        return Some(u64::MAX);
    }
    v.parse().ok()
}

/// `fmrun -n ranks --net tcp` of the rank program, fmrun under the shell
/// limit commands `limits`, each rank under `rank_limits`; killed (and
/// reported hung) past 30 s.
fn run(limits: &str, rank_limits: &str, ranks: u32) -> Output {
    let exe = std::env::current_exe().unwrap();
    let script = format!("{limits} && exec \"$0\" \"$@\"");
    let rank_script = format!("{rank_limits} && exec \"$0\" \"$@\"");
    let child = Command::new("sh")
        .args(["-c", &script, env!("CARGO_BIN_EXE_fmrun")])
        .args(["-n", &ranks.to_string(), "--net", "tcp", "--timeout", "20"])
        .args(["sh", "-c", &rank_script])
        .arg(&exe)
        .args(["fd_rank", "--exact", "--nocapture", "--test-threads", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fmrun");
    let pid = child.id();
    let start = Instant::now();
    let watchdog = std::thread::spawn(move || {
        while start.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(50));
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return false;
            }
        }
        let _ = Command::new("kill").arg(pid.to_string()).status();
        true
    });
    let out = child.wait_with_output().expect("wait for fmrun");
    assert!(
        !watchdog.join().unwrap(),
        "fmrun under `{limits}` still running after 30 s (hung; killed)"
    );
    out
}

#[test]
fn a_hard_limit_below_the_mesh_is_a_typed_error_at_once() {
    // A rank needs 3 connections + 16 = 19 at least.
    let out = run("true", "ulimit -S -n 16 && ulimit -H -n 16", 4);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the job started: {err}");
    assert!(
        err.contains("START-ERROR")
            && err.contains("needs about 19 open files")
            && err.contains("RLIMIT_NOFILE allows 16"),
        "no TooFewDescriptors error naming the limit: {err}"
    );
    assert!(
        !err.contains("accept failed"),
        "the wire-up ran into the limit instead: {err}"
    );
}

#[test]
fn fmrun_refuses_at_once_when_the_pipes_would_not_fit() {
    // fmrun needs 2 × 4 + 32 = 40.
    let out = run("ulimit -S -n 30 && ulimit -H -n 30", "true", 4);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("4 ranks need about 40 open files in fmrun") && err.contains("allows 30"),
        "{err}"
    );
    assert!(!err.contains("START-ERROR"), "a rank was started: {err}");
}

#[test]
fn a_low_soft_limit_is_raised_for_the_connections() {
    if hard_limit().is_none_or(|h| h < 200) {
        eprintln!("skipped: the hard open-file limit here is below 200");
        return;
    }
    let out = run("true", "ulimit -S -n 12", 4);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}\n{err}");
    let reports: Vec<(u64, u64)> = text
        .lines()
        .filter_map(|l| l.split_once("SOFT-LIMIT "))
        .map(|(_, v)| {
            let (soft, fds) = v.split_once(" FDS ").expect("SOFT-LIMIT s FDS n");
            (soft.trim().parse().unwrap(), fds.trim().parse().unwrap())
        })
        .collect();
    assert_eq!(reports.len(), 4, "not every rank reported: {text}");
    // Raised to 3 connections + 64; a started rank holds no more than
    // its connections + 16 (the least the check lets through).
    assert!(
        reports.iter().all(|&(soft, fds)| soft == 67 && fds <= 19),
        "{reports:?}"
    );
}

#[test]
fn rings_larger_than_the_address_space_limit_are_a_typed_start_error() {
    // 1024 slots of 1 MiB: a ring of 1 GiB per peer (within the host's
    // memory, which start-up checks first), past the 800 MB the rank may
    // map, whatever the machine's overcommit policy.
    let out = run(
        "true",
        "ulimit -v 800000 && export FASTMSG_NET_SLOTS=1024 FASTMSG_NET_SLOT_SIZE=1048576",
        2,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the job started: {err}");
    assert!(
        err.contains("START-ERROR")
            && err.contains("bytes for the rings of 1 network peer(s)")
            && err.contains("FASTMSG_NET_SLOTS")
            && err.contains("os error 12"),
        "no start error naming the rings' memory: {err}"
    );
    assert!(!err.contains("panicked"), "a rank panicked: {err}");
}
