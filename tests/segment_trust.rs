//! The shared segment against other users and leftovers, end to end under
//! fmrun (issue 11 class 5): a file another user made at the job's segment
//! name is refused naming its owner (never used: no hijack); a garbage
//! file of our own at the name is replaced, and no rank fails on it (the
//! old race gave `BadMagic` in 5 of 6 runs).

mod common;

use fastmsg::bootstrap::job_file_prefix;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// Rank program: start, exchange one message around the ring, close.
#[test]
fn trust_rank() {
    if std::env::var("FASTMSG_RANK").is_err() {
        return;
    }
    let mut b = fastmsg::EndpointBuilder::from_env().expect("env");
    let got = std::rc::Rc::new(std::cell::Cell::new(false));
    let g = got.clone();
    let h = b.register_fn("ping", move |_c, _p| {
        g.set(true);
        Ok(())
    });
    let mut ep = match b.start() {
        Ok(ep) => ep,
        Err(e) => {
            eprintln!("START-ERROR: {e}");
            std::process::exit(2);
        }
    };
    let next = fastmsg::Rank((ep.rank().0 + 1) % ep.size());
    ep.send(next, h, &[b"ping"]).expect("send");
    ep.wait_until(|| got.get()).expect("wait");
    ep.close().expect("close");
}

fn segment_name(dir: &str, job: &str, host: &str) -> PathBuf {
    PathBuf::from(dir).join(format!("{}{host}", job_file_prefix(job)))
}

fn fmrun(ranks: &str, dir: &str, job: &str, host: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fmrun"))
        .args(["-n", ranks, "--grace", "1", "--job", job, "--shm-dir", dir])
        .arg(std::env::current_exe().unwrap())
        .args([
            "trust_rank",
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("FASTMSG_HOST", host)
        .env("FASTMSG_TIMEOUT", "20")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn another_users_file_at_the_name_is_refused_naming_its_owner() {
    if !common::netns::is_root() {
        eprintln!("skipped: needs root to act as another user (setpriv --reuid)");
        return;
    }
    // /dev/shm itself: world-writable and sticky, where the attack happens.
    let dir = "/dev/shm";
    let job = format!("trust-{}", std::process::id());
    let path = segment_name(dir, &job, "h");
    // The attacker (nobody) pre-creates the name, world-writable, with a
    // plausible header: a real segment of its own would do the same.
    let made = Command::new("setpriv")
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .args([
            "sh",
            "-c",
            "umask 0; head -c 65536 /dev/zero > \"$1\"",
            "sh",
        ])
        .arg(&path)
        .status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipped: setpriv cannot run as uid 65534 here");
        let _ = std::fs::remove_file(&path);
        return;
    }
    let out = fmrun("2", dir, &job, "h");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("owned by uid 65534"), "{err}");
    assert!(err.contains("0666"), "{err}");
}

#[test]
fn a_garbage_file_of_ours_at_the_name_is_replaced_every_time() {
    let dir = common::procs::private_shm_dir("trust-garbage");
    let d = dir.to_str().unwrap();
    for run in 0..6 {
        let job = format!("garbage-{}-{run}", std::process::id());
        let path = segment_name(d, &job, "h");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, &[0xAB; 8192]).unwrap();
        drop(f);
        let out = fmrun("4", d, &job, "h");
        assert!(
            out.status.success(),
            "run {run}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!path.exists(), "run {run}: the segment was left behind");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
