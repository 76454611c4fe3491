//! The launcher's promises: the first failing rank's status is returned and
//! the other ranks are stopped; Ctrl-C (SIGINT) stops every rank; a missing
//! program is reported; the job's shared segment is removed in every case.

mod common;

use common::fmrun::wait_timeout;
use fastmsg::{EndpointBuilder, Rank};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Rank program: every rank starts, then rank `FAIL_RANK` (if set) exits
/// with status 3 while the others wait for ever for a message.
#[test]
fn launcher_rank() {
    if std::env::var("FASTMSG_RANK").is_err() {
        return;
    }
    let mut b = EndpointBuilder::from_env().expect("env");
    b.register_fn("unused", |_c, _p| Ok(()));
    let mut ep = b.start().expect("start");
    let fail: Option<u32> = std::env::var("FAIL_RANK").ok().and_then(|v| v.parse().ok());
    if fail == Some(ep.rank().0) {
        std::process::exit(3);
    }
    eprintln!("rank {} waiting", ep.rank());
    // Waits until killed (or until its peer's death is noticed).
    let _ = ep.wait_until(|| false);
    // A rank that notices the failure itself exits non-zero too.
    std::process::exit(if ep.rank() == Rank(0) { 4 } else { 5 });
}

fn fmrun(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut c = common::fmrun::fmrun(args, "launcher_rank");
    c.envs(env.iter().copied()).stdout(Stdio::null());
    c
}

fn leftovers(pid: u32) -> Vec<String> {
    let prefix = fastmsg::internal::launcher::job_file_prefix(&format!("fm{pid}"));
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// A rank killed by a signal is named as such (before: "exited with
/// status 139", which reads like an exit code the program chose).
#[test]
fn a_rank_killed_by_a_signal_is_named_with_its_signal() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fmrun"));
    cmd.args(["-n", "2", "sh", "-c", "kill -SEGV $$"])
        .stdin(Stdio::null());
    let out = common::fmrun::run(cmd, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(139),
        "128 + 11, as a shell says: {err}"
    );
    assert!(err.contains("was killed by signal 11 ("), "{err}");
}

#[test]
fn a_failing_rank_stops_the_job_with_its_status() {
    let mut child = fmrun(&["-n", "3", "--grace", "1"], &[("FAIL_RANK", "2")])
        .spawn()
        .unwrap();
    let pid = child.id();
    let status = wait_timeout(&mut child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(3), "the failing rank's status");
    assert!(
        leftovers(pid).is_empty(),
        "segment left behind: {:?}",
        leftovers(pid)
    );
}

#[test]
fn sigint_stops_every_rank_and_cleans_up() {
    let mut child = fmrun(&["-n", "2", "--grace", "1"], &[])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until both ranks report that they are waiting.
    let mut err = child.stderr.take().unwrap();
    let mut seen = String::new();
    let t = Instant::now();
    while seen.matches("waiting").count() < 2 {
        use std::io::Read;
        let mut buf = [0u8; 256];
        let n = err.read(&mut buf).unwrap();
        assert!(
            n > 0 && t.elapsed() < Duration::from_secs(30),
            "ranks did not start: {seen}"
        );
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let sent = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = wait_timeout(&mut child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "128 + SIGINT");
    assert!(
        leftovers(pid).is_empty(),
        "segment left behind: {:?}",
        leftovers(pid)
    );
}

#[test]
fn a_missing_program_is_reported() {
    let out = Command::new(env!("CARGO_BIN_EXE_fmrun"))
        .args(["-n", "2", "/nonexistent/program"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot start rank 0"));
}

#[test]
fn bad_arguments_are_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_fmrun"))
        .args(["-n", "2", "--queues", "3", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--queues"));
    // Tuning options by the library's rules, before any rank starts: the
    // error names the option (not once per rank, naming the variable).
    for (opt, value, says) in [
        (
            "--frame-size",
            "100",
            "--frame-size 100 is not a multiple of 64",
        ),
        ("--credits", "0", "--credits 0 credits can never send"),
        ("--timeout", "0", "--timeout 0 s"),
    ] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fmrun"));
        cmd.args(["-n", "2", opt, value, "sh", "-c", "echo RANK-STARTED"])
            .stdin(Stdio::null());
        let out = common::fmrun::run(cmd, Duration::from_secs(30));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{opt} {value}: {err}");
        assert!(err.contains(says), "{opt} {value}: {err}");
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("RANK-STARTED"),
            "{opt} {value}: a rank was started"
        );
    }
}
