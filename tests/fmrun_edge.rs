//! fmrun at its edges: ranks die with fmrun (parent-
//! death signal), output is forwarded line by line (never interleaved
//! mid-line; `--tag-output`), every file of the job is removed whatever the
//! job id, a user's FASTMSG_SHM_DIR is respected, and a job killed in its
//! first 300 ms leaves no process behind, and no file once the next job
//! with its id ran.

mod common;

use common::fmrun::wait_timeout;
use fastmsg::bootstrap::job_file_prefix;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Rank program, by `EDGE_MODE`:
/// - `print`: print `LINES` long lines in small raw writes, exit 0;
/// - `wait`: start, say so, wait for ever;
/// - `early`: rank `EDGE_FAIL` exits 3 before starting, the others start
///   (and wait for it in the segment);
/// - `quick`: start, close, exit 0.
#[test]
fn edge_rank() {
    let Ok(rank) = std::env::var("FASTMSG_RANK") else {
        return;
    };
    let rank: u32 = rank.parse().unwrap();
    let mode = std::env::var("EDGE_MODE").unwrap();
    if mode == "print" {
        print_lines(rank);
        std::process::exit(0);
    }
    if mode == "early" && std::env::var("EDGE_FAIL").ok() == Some(rank.to_string()) {
        std::process::exit(3);
    }
    let mut b = fastmsg::EndpointBuilder::from_env().expect("env");
    b.register_fn("unused", |_c, _p| Ok(()));
    let mut ep = match b.start() {
        Ok(ep) => ep,
        Err(e) => {
            eprintln!("START-ERROR: {e}");
            std::process::exit(2);
        }
    };
    if mode == "quick" {
        ep.close().expect("close");
        std::process::exit(0);
    }
    eprintln!("rank {rank} waiting");
    let _ = ep.wait_until(|| false);
    std::process::exit(5);
}

const LINES: usize = 200;
const PIECES: usize = 16;

/// The text of line `i` of `rank`: a digit string, written in `PIECES`
/// separate `write` calls, so lines of ranks printing at once interleave
/// mid-line unless the launcher forwards whole lines.
fn line_text(rank: u32, i: usize) -> String {
    let body: String = std::iter::repeat_n(char::from(b'a' + rank as u8), 40 * PIECES).collect();
    format!("rank {rank} line {i} {body}")
}

fn print_lines(rank: u32) {
    use std::io::Write;
    use std::os::fd::AsFd;
    // A duplicate of stdout's descriptor: unbuffered writes.
    let fd = std::io::stdout().as_fd().try_clone_to_owned().unwrap();
    let mut raw = std::fs::File::from(fd);
    // The test harness has begun a line ("test edge_rank ... "): end it.
    raw.write_all(b"\n").unwrap();
    for i in 0..LINES {
        let mut t = line_text(rank, i).into_bytes();
        t.push(b'\n');
        for piece in t.chunks(t.len().div_ceil(PIECES)) {
            raw.write_all(piece).unwrap();
        }
    }
}

fn fmrun(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut c = common::fmrun::fmrun(args, "edge_rank");
    c.envs(env.iter().copied()).stdin(Stdio::null());
    c
}

/// Read `r` until `n` lines contain `what` (within 30 s).
fn await_lines(r: &mut impl BufRead, what: &str, n: usize) {
    let t = Instant::now();
    let mut seen = 0;
    let mut line = String::new();
    while seen < n {
        line.clear();
        let got = r.read_line(&mut line).unwrap();
        assert!(
            got > 0 && t.elapsed() < Duration::from_secs(30),
            "only {seen} of {n} lines with {what:?}"
        );
        if line.contains(what) {
            seen += 1;
        }
    }
}

/// Children of `parent` (from /proc).
fn children(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if ppid_and_state(pid).is_some_and(|(pp, _)| pp == parent) {
            out.push(pid);
        }
    }
    out
}

/// Parent pid and state letter of `pid`, if it exists.
fn ppid_and_state(pid: u32) -> Option<(u32, char)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    Some((ppid, state))
}

/// Live processes whose environment says they are ranks of `job`.
fn processes_of(job: &str) -> Vec<u32> {
    let needle = format!("FASTMSG_JOB={job}\0");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if alive(pid) && env.windows(needle.len()).any(|w| w == needle.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

fn alive(pid: u32) -> bool {
    ppid_and_state(pid).is_some_and(|(_, s)| s != 'Z' && s != 'X')
}

#[test]
fn ranks_die_within_a_second_of_fmrun_killed_with_sigkill() {
    let mut child = fmrun(&["-n", "3"], &[("EDGE_MODE", "wait")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    await_lines(&mut err, "waiting", 3);
    let ranks = children(child.id());
    assert_eq!(ranks.len(), 3, "three rank processes: {ranks:?}");
    child.kill().unwrap(); // SIGKILL: fmrun cannot clean up
    child.wait().unwrap();
    let t = Instant::now();
    while ranks.iter().any(|&p| alive(p)) && t.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let orphans: Vec<u32> = ranks.iter().copied().filter(|&p| alive(p)).collect();
    for &p in &orphans {
        let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
    }
    assert!(
        orphans.is_empty(),
        "ranks {orphans:?} outlived fmrun by more than a second"
    );
}

#[test]
fn output_is_forwarded_in_whole_lines_tagged_with_the_rank() {
    const RANKS: u32 = 4;
    let out = fmrun(
        &["-n", &RANKS.to_string(), "--tag-output"],
        &[("EDGE_MODE", "print")],
    )
    .stderr(Stdio::null())
    .output()
    .unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    let text = String::from_utf8(out.stdout).unwrap();
    let mut next = vec![0usize; RANKS as usize];
    for l in text.lines().filter(|l| l.contains(" line ")) {
        let r = l
            .strip_prefix('[')
            .and_then(|x| x.split_once("] "))
            .and_then(|(r, _)| r.parse::<u32>().ok())
            .unwrap_or_else(|| panic!("untagged line: {l:.80}"));
        let i = next[r as usize];
        assert_eq!(
            l,
            format!("[{r}] {}", line_text(r, i)),
            "line {i} of rank {r} mangled"
        );
        next[r as usize] += 1;
    }
    assert_eq!(next, vec![LINES; RANKS as usize], "every line, once");
}

/// Two threads forward every rank's output (one per stream): 12 ranks
/// cost fmrun two threads besides its main thread, not two per rank (256
/// ranks once took 512 threads, and under a memory limit the ones that
/// could not start dropped their ranks' pipes and messages).
#[test]
fn two_threads_forward_every_ranks_output() {
    const RANKS: usize = 12;
    let mut child = fmrun(&["-n", &RANKS.to_string()], &[("EDGE_MODE", "wait")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    // Every rank's line came through: the forwarding works for all.
    await_lines(&mut err, "waiting", RANKS);
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let threads: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("Threads: in /proc/PID/status");
    // SIGTERM: fmrun stops its ranks and removes the job's files.
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        threads, 3,
        "fmrun's threads with {RANKS} ranks: main and a forwarder per stream"
    );
}

fn files_with_prefix(dir: &Path, prefix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

fn private_dir(tag: &str) -> PathBuf {
    common::procs::private_shm_dir(tag)
}

#[test]
fn a_sanitized_job_id_is_cleaned_up_in_the_users_shm_dir() {
    let dir = private_dir("edge-sanitize");
    let job = format!("my job/{}", std::process::id());
    let prefix = job_file_prefix(&job);
    // Rank 2 fails before attaching: ranks 0 and 1 wait in the segment,
    // which stays named until fmrun stops them and cleans up.
    let mut child = fmrun(
        &["-n", "3", "--grace", "1", "--job", &job],
        &[
            ("EDGE_MODE", "early"),
            ("EDGE_FAIL", "2"),
            ("FASTMSG_SHM_DIR", dir.to_str().unwrap()),
            ("FASTMSG_TIMEOUT", "20"),
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let status = wait_timeout(&mut child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(3), "the failing rank's status");
    assert!(
        files_with_prefix(Path::new("/dev/shm"), &prefix).is_empty(),
        "FASTMSG_SHM_DIR was overridden"
    );
    let left = files_with_prefix(&dir, &prefix);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn jobs_killed_in_their_first_300_ms_leave_nothing_behind() {
    use rand::Rng;
    let dir = private_dir("edge-early");
    let job = format!("early-{}", std::process::id());
    let prefix = job_file_prefix(&job);
    let d = dir.to_str().unwrap().to_owned();
    let env = |mode| [("EDGE_MODE", mode), ("FASTMSG_SHM_DIR", d.as_str())];
    let mut g = rand::rng();
    for round in 0..8 {
        let mut child = fmrun(&["-n", "3", "--grace", "1", "--job", &job], &env("wait"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(g.random_range(0..300)));
        if round % 2 == 0 {
            // Ctrl-C: fmrun stops the ranks and removes the job's files.
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            let status = wait_timeout(&mut child, Duration::from_secs(30));
            // 128 + SIGINT: no rank failed before (say, on what the
            // previous, killed job left in the segment directory). Or
            // killed by it, before it had set its handlers (and so before
            // it started any rank).
            use std::os::unix::process::ExitStatusExt;
            assert!(
                status.code() == Some(130) || status.signal() == Some(2),
                "round {round}: {status:?}"
            );
            let left = files_with_prefix(&dir, &prefix);
            assert!(left.is_empty(), "round {round}: left {left:?}");
        } else {
            // SIGKILL: nobody cleans up now; the ranks die with fmrun and
            // the next job with this id collects what they left.
            child.kill().unwrap();
            child.wait().unwrap();
            let t = Instant::now();
            let mut left = processes_of(&job);
            while !left.is_empty() && t.elapsed() < Duration::from_secs(1) {
                std::thread::sleep(Duration::from_millis(10));
                left = processes_of(&job);
            }
            for &p in &left {
                let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
            }
            assert!(
                left.is_empty(),
                "round {round}: ranks {left:?} outlived fmrun"
            );
        }
    }
    let mut next = fmrun(&["-n", "3", "--job", &job], &env("quick"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_timeout(&mut next, Duration::from_secs(60));
    let mut err = String::new();
    use std::io::Read;
    next.stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let left = files_with_prefix(&dir, &prefix);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "the next job with the id: {err}");
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn cleaning_up_a_job_leaves_a_longer_job_id_of_the_same_user_alone() {
    let dir = private_dir("edge-longer-id");
    let job = format!("j{}", std::process::id());
    let longer = format!("{job}-b");
    // What job `<job>-b` has in the directory: its segment on host `h`,
    // its rendezvous file. (Job `<job>` on a host named `b-h` would have
    // had the segment's name with the old `-` after the id.)
    let theirs = [
        format!("{}h", job_file_prefix(&longer)),
        format!("{}h.root", job_file_prefix(&longer)),
    ];
    for f in &theirs {
        std::fs::write(dir.join(f), b"another job's").unwrap();
    }
    let mut child = fmrun(
        &["-n", "2", "--job", &job],
        &[
            ("EDGE_MODE", "quick"),
            ("FASTMSG_SHM_DIR", dir.to_str().unwrap()),
            ("FASTMSG_TIMEOUT", "20"),
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let status = wait_timeout(&mut child, Duration::from_secs(30));
    let ours = files_with_prefix(&dir, &job_file_prefix(&job));
    let kept: Vec<bool> = theirs.iter().map(|f| dir.join(f).exists()).collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(status.code(), Some(0), "the job itself");
    assert!(ours.is_empty(), "the job's own files left behind: {ours:?}");
    assert_eq!(
        kept,
        [true, true],
        "job {longer}'s files removed by job {job}'s clean-up"
    );
}

/// More ranks on one host than the engine serves (4,096) are refused by
/// fmrun itself, naming the range, before any rank starts: no 5,000
/// processes started only for rank 0 to refuse them.
#[test]
fn more_local_ranks_than_the_engine_serves_are_refused_before_any_starts() {
    let dir = std::env::temp_dir().join(format!("fastmsg-too-many-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let out = common::fmrun::run(
        {
            let mut c = Command::new(env!("CARGO_BIN_EXE_fmrun"));
            c.args([
                "-n",
                "5000",
                "sh",
                "-c",
                "touch \"$EDGE_DIR/$FASTMSG_RANK\"",
            ])
            .env("EDGE_DIR", &dir);
            c
        },
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("5000 ranks on one host") && err.contains("1 ..= 4096"),
        "{err}"
    );
    let started = std::fs::read_dir(&dir).unwrap().count();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(started, 0, "{started} ranks were started");
}
