//! Robustness audit (audit24): rank programs for conditions real HPC users
//! meet — a rank stopped (`SIGSTOP`, a debugger) or computing for seconds
//! without polling, a timer signal firing every millisecond, a rank late
//! to `start` — driven by `fmrun`, with the scenarios that found bugs as
//! tests (each says what it found, and what was fixed) and the harness
//! (`audit_rank_program`) usable by hand from scripts/repro/.
//!
//! `audit_rank_program`, configured by environment (all optional):
//! - `FASTMSG_TEST_ROUNDS` (default 20): rounds of: every rank sends
//!   `FASTMSG_TEST_MSGS` (default 8) verifiable messages of
//!   `FASTMSG_TEST_LEN` bytes (default 3000) to every other rank, waits for
//!   all of them, then a barrier and an allreduce (checked).
//! - `FASTMSG_TEST_NAP` = `rank:round:ms[:spin]`: that rank, at the start
//!   of that round, sleeps (or spins, without polling) that long.
//! - `FASTMSG_TEST_PUT` = bytes: each round starts with a put of that many
//!   bytes into the next rank's window.
//! - `FASTMSG_TEST_FDS_LEFT` = `rank:k`: after `start`, that rank opens
//!   files until only `k` descriptors are left (an application near its
//!   open-file limit).
//! - `FASTMSG_TEST_LATE` = `rank:ms`: that rank sleeps before `start`.
//! - `FASTMSG_TEST_CLOSE_NAP` = `rank:ms`: that rank sleeps before `close`.
//! - `FASTMSG_TEST_ALARM_US`: every rank installs a SIGALRM handler (no
//!   SA_RESTART) fired every that many microseconds of real time.
//! - `FASTMSG_TEST_SIGPIPE_DFL`: every rank restores SIGPIPE's default
//!   action (killing), as a C or Fortran main program has it.
//! - `FASTMSG_TEST_IGNORE_TERM`: every rank ignores SIGTERM (so survivors
//!   of a killed rank record their outcome before fmrun's SIGKILL).
//! - `FASTMSG_TEST_DIR`: each rank writes `pid-<rank>` there at start and
//!   `done-<rank>` (`ok` or the error) at its end.
//!
//! Each rank prints `AUDIT rank R ok` or `AUDIT rank R FAILED: …`.

#![allow(unsafe_code)]

mod common;

use fastmsg::{EndpointBuilder, Rank};
use fastmsg_handlers::{CollConfig, Collectives, Op};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The fields after the rank of the entry of variable `name` (entries
/// `rank:a[:b[:c]]`, comma-separated) that names rank `me`, if any.
fn for_rank(name: &str, me: u32) -> Option<Vec<String>> {
    let v = std::env::var(name).ok()?;
    v.split(',').find_map(|e| {
        let f: Vec<String> = e.split(':').map(str::to_owned).collect();
        (f.first()?.parse::<u32>().ok()? == me).then(|| f[1..].to_vec())
    })
}

extern "C" fn on_alarm(_: libc::c_int) {}

/// SIGALRM every `us` microseconds, handler installed without SA_RESTART.
fn arm_alarm(us: u64) {
    // SAFETY: a plain sigaction with an empty, async-signal-safe handler,
    // and a setitimer with a valid struct.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_alarm as *const () as usize;
        sa.sa_flags = 0;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut()), 0);
        let tv = libc::timeval {
            tv_sec: (us / 1_000_000) as libc::time_t,
            tv_usec: (us % 1_000_000) as libc::suseconds_t,
        };
        let it = libc::itimerval {
            it_interval: tv,
            it_value: tv,
        };
        assert_eq!(
            libc::setitimer(libc::ITIMER_REAL, &it, std::ptr::null_mut()),
            0
        );
    }
}

fn nap(ms: u64, spin: bool) {
    let d = Duration::from_millis(ms);
    if spin {
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < d {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
    } else {
        // Sleep the whole time even when a signal interrupts it.
        let t = Instant::now();
        while t.elapsed() < d {
            std::thread::sleep(d.saturating_sub(t.elapsed()));
        }
    }
}

/// What the library reports of a failure after a call failed: the error
/// a blocking wait of up to a second returns (its idle health check is
/// what reports a transport's own findings), as ` (then wait_until: …)`.
fn cause(ep: &mut fastmsg::Endpoint) -> Option<String> {
    let t = Instant::now();
    ep.wait_until(|| t.elapsed() > Duration::from_secs(1))
        .err()
        .map(|w| format!(" (then wait_until: {w})"))
}

/// The rank program (see the module docs); does nothing as a plain test.
#[test]
fn audit_rank_program() {
    if !common::launch::is_rank() {
        return;
    }
    let me_env = env_u64("FASTMSG_RANK", 0) as u32;
    let dir = std::env::var("FASTMSG_TEST_DIR")
        .ok()
        .map(std::path::PathBuf::from);
    if let Some(d) = &dir {
        std::fs::write(
            d.join(format!("pid-{me_env}")),
            std::process::id().to_string(),
        )
        .unwrap();
    }
    if std::env::var_os("FASTMSG_TEST_SIGPIPE_DFL").is_some() {
        // As a C or Fortran main program leaves it (Rust's runtime ignores it).
        // SAFETY: restoring a default disposition.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    if std::env::var_os("FASTMSG_TEST_IGNORE_TERM").is_some() {
        // Survive fmrun's SIGTERM after a rank's death (until its SIGKILL)
        // long enough to record how the death was reported.
        // SAFETY: setting a disposition.
        unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
    }
    if let Some(us) = std::env::var("FASTMSG_TEST_ALARM_US")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        arm_alarm(us);
    }
    let outcome = run_rank(me_env);
    let text = match &outcome {
        Ok(()) => "ok".to_owned(),
        Err(e) => e.clone(),
    };
    if let Some(d) = &dir {
        std::fs::write(d.join(format!("done-{me_env}")), &text).unwrap();
    }
    match outcome {
        Ok(()) => println!("AUDIT rank {me_env} ok"),
        Err(e) => {
            println!("AUDIT rank {me_env} FAILED: {e}");
            panic!("rank {me_env}: {e}");
        }
    }
}

fn run_rank(me: u32) -> Result<(), String> {
    let rounds = env_u64("FASTMSG_TEST_ROUNDS", 20);
    let msgs = env_u64("FASTMSG_TEST_MSGS", 8);
    let len = env_u64("FASTMSG_TEST_LEN", 3000) as usize;
    let t0 = Instant::now();
    let log = |what: &str| eprintln!("[{:8.3}] rank {me}: {what}", t0.elapsed().as_secs_f64());
    let mut b = EndpointBuilder::from_env().map_err(|e| format!("from_env: {e}"))?;
    let size = b.size();
    // Per source: the checker of the message arriving now, and how many
    // came whole; an error is kept.
    type State = (Vec<Option<common::Checker>>, Vec<u64>, Option<String>);
    let st: Rc<RefCell<State>> = Rc::new(RefCell::new((
        (0..size).map(|_| None).collect(),
        vec![0; size as usize],
        None,
    )));
    let s2 = st.clone();
    let h = b.register_fn("audit", move |_ctx, p| {
        let mut g = s2.borrow_mut();
        let s = &mut *g;
        let src = p.source().0 as usize;
        let seq = s.1[src];
        let ck = s.0[src].get_or_insert_with(|| common::Checker::new(src as u32, me, seq, len));
        if let Err(e) = ck.feed(p.offset(), p.data()) {
            s.2.get_or_insert(e);
        }
        if p.is_last() {
            let whole = ck.done();
            s.0[src] = None;
            if !whole {
                s.2.get_or_insert(format!("message {seq} from {src} ended short"));
            }
            s.1[src] += 1;
        }
        Ok(())
    });
    let coll = Collectives::register(&mut b, CollConfig::default());
    // One-sided puts into the next rank's window each round.
    let put = env_u64("FASTMSG_TEST_PUT", 0) as usize;
    let win = b.window("audit", put.max(8) * size as usize);
    if let Some(f) = for_rank("FASTMSG_TEST_LATE", me) {
        let ms: u64 = f[0].parse().unwrap();
        log(&format!("late: sleeping {ms} ms before start"));
        nap(ms, false);
    }
    let mut ep = b.start().map_err(|e| format!("start: {e}"))?;
    log("started");
    // Keep open files (the program's own) until only K descriptors are left.
    let mut hogs = Vec::new();
    if let Some(f) = for_rank("FASTMSG_TEST_FDS_LEFT", me) {
        let k: usize = f[0].parse().unwrap();
        while let Ok(f) = std::fs::File::open("/dev/null") {
            hogs.push(f);
        }
        hogs.truncate(hogs.len().saturating_sub(k));
        log(&format!(
            "holding {} files, {k} descriptors left",
            hogs.len()
        ));
    }
    let nap_at = for_rank("FASTMSG_TEST_NAP", me);
    for round in 0..rounds {
        if let Some(f) = &nap_at {
            if f[0].parse::<u64>().unwrap() == round {
                let ms: u64 = f[1].parse().unwrap();
                let spin = f.get(2).is_some_and(|s| s == "spin");
                log(&format!("round {round}: napping {ms} ms (spin {spin})"));
                nap(ms, spin);
                log("nap over");
            }
        }
        if put > 0 {
            let dest = Rank((me + 1) % size);
            let data = vec![(round as u8) ^ (me as u8); put];
            if let Err(e) = ep.put(win, dest, me as usize * put, &data) {
                // What the library recorded of the cause, if anything.
                let why = cause(&mut ep);
                return Err(format!(
                    "round {round}: put to {dest}: {e}{}",
                    why.unwrap_or_default()
                ));
            }
        }
        for k in 1..size {
            let dest = Rank((me + k) % size);
            for i in 0..msgs {
                let seq = round * msgs + i;
                let m = common::message(me, dest.0, seq, len);
                if let Err(e) = ep.send(dest, h, &[&m]) {
                    let why = cause(&mut ep);
                    return Err(format!(
                        "round {round}: send {seq} to {dest}: {e}{}",
                        why.unwrap_or_default()
                    ));
                }
            }
        }
        let want = (round + 1) * msgs;
        let st3 = st.clone();
        ep.wait_until(|| {
            let s = st3.borrow();
            s.2.is_some() || (0..size as usize).all(|r| r == me as usize || s.1[r] >= want)
        })
        .map_err(|e| format!("round {round}: wait for messages: {e}"))?;
        if let Some(e) = &st.borrow().2 {
            return Err(format!("round {round}: wrong message: {e}"));
        }
        coll.barrier(&mut ep)
            .map_err(|e| format!("round {round}: barrier: {e}"))?;
        let mut x = [u64::from(me) + round];
        coll.allreduce(&mut ep, &mut x, Op::Sum)
            .map_err(|e| format!("round {round}: allreduce: {e}"))?;
        let n = u64::from(size);
        let expect = n * (n - 1) / 2 + n * round;
        if x[0] != expect {
            return Err(format!("round {round}: allreduce {} != {expect}", x[0]));
        }
    }
    log("rounds done");
    if let Some(f) = for_rank("FASTMSG_TEST_CLOSE_NAP", me) {
        let ms: u64 = f[0].parse().unwrap();
        log(&format!("sleeping {ms} ms before close"));
        nap(ms, false);
    }
    ep.close().map_err(|e| format!("close: {e}"))?;
    log("closed");
    drop(hogs);
    Ok(())
}

/// A fresh directory for one job's `pid-*` and `done-*` files.
fn job_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("fm-audit-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// What rank `r` wrote as its outcome (`ok` or its error), if it did.
fn done_of(dir: &std::path::Path, r: u32) -> Option<String> {
    std::fs::read_to_string(dir.join(format!("done-{r}"))).ok()
}

/// Send `sig` to `pid`; whether it was delivered (the process may be gone:
/// fmrun ends a job whose rank failed).
fn signal(pid: u32, sig: &str) -> bool {
    std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run kill")
        .success()
}

/// Bug A (see the audit report): a rank whose lazy network connection
/// cannot be made *because of its own state* — here it has used up its
/// open-file limit, as an application holding many files does — got
/// `SendError::PeerGone`, "rank 2 has exited or died; cannot send to it",
/// though rank 2 is alive and well, and the cause (EMFILE on the socket)
/// was in no message any rank printed. Now the send fails with
/// `SendError::Unreachable`, naming it ("Too many open files").
#[test]
fn a_lazy_connect_that_fails_here_names_its_cause_not_a_dead_peer() {
    let dir = job_dir("fds");
    let mut cmd = common::fmrun::fmrun(&["-n", "3", "--net", "tcp"], "audit_rank_program");
    cmd.env("FASTMSG_TEST_DIR", &dir)
        .env("FASTMSG_TEST_ROUNDS", "3")
        .env("FASTMSG_TEST_FDS_LEFT", "1:0")
        // Nobody dials rank 1 before it has used up its descriptors (a
        // connection accepted before would spare it the dial that fails):
        // the others wait a while before their first send.
        .env("FASTMSG_TEST_NAP", "0:0:1500,2:0:1500");
    let out = common::fmrun::run(cmd, Duration::from_secs(90));
    let got = done_of(&dir, 1);
    let _ = std::fs::remove_dir_all(&dir);
    let got = got.unwrap_or_else(|| {
        panic!(
            "rank 1 wrote no outcome; output:\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert!(
        !got.contains("exited or died"),
        "a live peer was reported dead: rank 1 got {got:?}"
    );
    assert!(
        got.contains("open files"),
        "rank 1's error does not name the cause (out of descriptors): {got:?}"
    );
}

/// Bug A, second face: a peer *stopped* (a debugger, SIGSTOP) when
/// another rank first sends to it, for longer than `FASTMSG_TIMEOUT`
/// (5 s here, as CI jobs set it; 60 s by default), was reported as having
/// "exited or died" by the sender's `send` (later: `Unreachable`, naming
/// the time-out), and the sender's job failed, though the peer's kernel
/// accepted the connection (the peer is alive) and it resumes 12 s later.
/// Now the first send waits for the live peer as every other wait does
/// (`netio::patience`), and the job finishes.
#[test]
fn a_stopped_peer_first_sent_to_is_not_reported_dead() {
    let dir = job_dir("lazy-stop");
    let mut cmd = common::fmrun::fmrun(
        &["-n", "3", "--net", "tcp", "--timeout", "5"],
        "audit_rank_program",
    );
    // Rank 1 (stopped at 0.5 s) sends nothing before; ranks 0 and 2 send
    // their first messages to it at 1.5 s (0 <-> 1 is connected by start).
    cmd.env("FASTMSG_TEST_DIR", &dir)
        .env("FASTMSG_TEST_ROUNDS", "3")
        .env("FASTMSG_TEST_NAP", "1:0:3000,0:0:1500,2:0:1500")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut job = cmd.spawn().unwrap();
    let t = Instant::now();
    let pid = loop {
        if let Some(p) = std::fs::read_to_string(dir.join("pid-1"))
            .ok()
            .and_then(|p| p.trim().parse::<u32>().ok())
        {
            break p;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "rank 1 never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    std::thread::sleep(Duration::from_millis(500));
    assert!(signal(pid, "STOP"), "rank 1 ended before it was stopped");
    std::thread::sleep(Duration::from_secs(12));
    signal(pid, "CONT");
    common::fmrun::wait_timeout(&mut job, Duration::from_secs(60));
    let got: Vec<Option<String>> = (0..3).map(|r| done_of(&dir, r)).collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ok")),
        "a stopped (live) rank failed the job: outcomes {got:?}"
    );
}

/// Bug B (see the audit report): over libfabric (`tcp;ofi_rxm`, a
/// manual-progress provider), a put larger than the sockets hold into a
/// rank that computes for more than 30 s without calling the library —
/// an ordinary compute phase — fails after 30 s (the ofi wire's `STUCK`)
/// with `PutError::PeerGone`, "rank 1 has exited or died", and the job
/// ended; rank 1 is alive and would have polled at 35 s. (A 20 s compute
/// phase passed; 1 MiB puts passed; the TCP transport passed, its NIC
/// thread reads for a computing rank.) Now the put waits for a live peer
/// (its set-up connection asked every 100 ms), saying so at 30 s.
#[cfg(feature = "ofi")]
#[test]
fn ofi_a_put_to_a_rank_computing_35_s_is_not_a_dead_peer() {
    let dir = job_dir("ofi-compute");
    let mut cmd = common::fmrun::fmrun(&["-n", "3", "--net", "ofi"], "audit_rank_program");
    cmd.env("FASTMSG_TEST_DIR", &dir)
        .env("FASTMSG_TEST_ROUNDS", "5")
        .env("FASTMSG_TEST_MSGS", "2")
        .env("FASTMSG_TEST_PUT", (32usize << 20).to_string())
        .env("FASTMSG_TEST_NAP", "1:3:35000:spin");
    let out = common::fmrun::run(cmd, Duration::from_secs(240));
    let got: Vec<Option<String>> = (0..3).map(|r| done_of(&dir, r)).collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        got.iter().all(|g| g.as_deref() == Some("ok")),
        "a computing (live) rank failed the job: outcomes {got:?}\n{}",
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("AUDIT"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
