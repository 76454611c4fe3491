//! The shared segment against other users and leftovers, end to end under
//! fmrun: a file another user made at the job's segment
//! name is refused naming its owner (never used: no hijack); a garbage
//! file of our own at the name is replaced, and no rank fails on it (the
//! old race gave `BadMagic` in 5 of 6 runs).

mod common;

use fastmsg::internal::launcher::job_file_prefix;
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

/// The arguments that make this test binary run the rank program alone.
const RANK_PROGRAM: [&str; 5] = [
    "trust_rank",
    "--exact",
    "--nocapture",
    "--test-threads",
    "1",
];

fn segment_name(dir: &str, job: &str, host: &str) -> PathBuf {
    PathBuf::from(dir).join(format!("{}{host}", job_file_prefix(job)))
}

fn fmrun(ranks: &str, dir: &str, job: &str, host: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fmrun"))
        .args(["-n", ranks, "--grace", "1", "--job", job, "--shm-dir", dir])
        .arg(std::env::current_exe().unwrap())
        .args(RANK_PROGRAM)
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

/// A rank that never starts: the ranks that did are told, by global rank,
/// which one never attached to the host's segment (before, the error said
/// only "every local rank to attach").
#[test]
fn a_rank_that_never_starts_is_named_by_the_ranks_that_did() {
    let dir = common::procs::private_shm_dir("trust-missing");
    let job = format!("missing-{}", std::process::id());
    // Ranks 0 and 1 of a 3-rank job; rank 2 is never started.
    let mut ranks: Vec<_> = (0..2)
        .map(|rank| {
            Command::new(std::env::current_exe().unwrap())
                .args(RANK_PROGRAM)
                .env("FASTMSG_RANK", rank.to_string())
                .env("FASTMSG_SIZE", "3")
                .env("FASTMSG_JOB", &job)
                .env("FASTMSG_SHM_DIR", &dir)
                .env("FASTMSG_TIMEOUT", "2")
                .stdin(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    for (rank, child) in ranks.iter_mut().enumerate() {
        let status = common::procs::wait_until(child, deadline);
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(status.and_then(|s| s.code()), Some(2), "rank {rank}: {err}");
        assert!(
            err.contains("rank(s) 2 never attached"),
            "rank {rank}: {err}"
        );
        assert!(
            err.contains("for 1 of the 3 ranks of this host"),
            "rank {rank}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tmpfs of 64 KiB mounted for the test, unmounted (and its mount point
/// removed) when dropped.
struct SmallTmpfs(PathBuf);

impl SmallTmpfs {
    fn mount(tag: &str) -> Option<SmallTmpfs> {
        let dir = std::env::temp_dir().join(format!("fastmsg-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs"])
            .arg(&dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        Some(SmallTmpfs(dir))
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A segment directory without one free page: every rank's start fails
/// with a typed error (the creator reserves the header page before it
/// writes the robust mutex there: a SIGBUS before) — `NoSpace` for the
/// local rank 0, and for the other rank, at once rather than at the
/// start-up time-out, that the creator failed — and no segment file is
/// left behind: ranks started by hand, no launcher to clean up.
#[test]
fn a_full_directory_is_no_space_and_leaves_no_file() {
    if !common::netns::is_root() {
        eprintln!("skipped: needs root to mount a small tmpfs");
        return;
    }
    let Some(fs) = SmallTmpfs::mount("full") else {
        eprintln!("skipped: cannot mount a tmpfs here");
        return;
    };
    // Fill it: write until the file system refuses.
    let filler = fs.0.join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let page = [0x5au8; 4096];
        while f.write_all(&page).is_ok() {}
    }
    let sp = common::procs::Spawner {
        rank_test: "trust_rank",
        size: 2,
        job: format!("full-{}", std::process::id()),
        env: vec![
            ("FASTMSG_SHM_DIR".into(), fs.0.display().to_string()),
            ("FASTMSG_TIMEOUT".into(), "30".into()),
        ],
    };
    let mut ranks: Vec<_> = (0..2)
        .map(|r| {
            let mut c = sp
                .command(r, &[], &[])
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn rank");
            let _ = c.stdin.take();
            c
        })
        .collect();
    // Well below the 30 s time-out: the creator holds its mark for 0.5 s.
    let st = common::procs::wait_all(&mut ranks, std::time::Duration::from_secs(10), "full dir");
    let mut errs = Vec::new();
    for c in &mut ranks {
        let mut err = String::new();
        std::io::Read::read_to_string(c.stderr.as_mut().unwrap(), &mut err).unwrap();
        errs.push(err);
    }
    for (r, s) in st.iter().enumerate() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            s.signal(),
            None,
            "rank {r} died of a signal: {s:?}: {}",
            errs[r]
        );
        assert_eq!(
            s.code(),
            Some(2),
            "rank {r} must fail to start: {s:?}: {}",
            errs[r]
        );
    }
    assert!(
        errs[0].contains("cannot provide them"),
        "rank 0: {}",
        errs[0]
    );
    assert!(
        errs[1].contains("the local rank 0 could not make shared segment"),
        "rank 1: {}",
        errs[1]
    );
    let left: Vec<_> = std::fs::read_dir(&fs.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "filler")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
