//! Robustness audit (audit24): rank programs for conditions real HPC users
//! meet — a rank stopped (`SIGSTOP`, a debugger) or computing for seconds
//! without polling, a timer signal firing every millisecond, a rank late
//! to `start` — driven by `fmrun`, with the scenarios that found bugs as
//! `#[ignore]`d reproductions (see the audit report) and the harness
//! (`audit_rank_program`) usable by hand from scripts/repro/.
//!
//! `audit_rank_program`, configured by environment (all optional):
//! - `FASTMSG_TEST_ROUNDS` (default 20): rounds of: every rank sends
//!   `FASTMSG_TEST_MSGS` (default 8) verifiable messages of
//!   `FASTMSG_TEST_LEN` bytes (default 3000) to every other rank, waits for
//!   all of them, then a barrier and an allreduce (checked).
//! - `FASTMSG_TEST_NAP` = `rank:round:ms[:spin]`: that rank, at the start
//!   of that round, sleeps (or spins, without polling) that long.
//! - `FASTMSG_TEST_LATE` = `rank:ms`: that rank sleeps before `start`.
//! - `FASTMSG_TEST_CLOSE_NAP` = `rank:ms`: that rank sleeps before `close`.
//! - `FASTMSG_TEST_ALARM_US`: every rank installs a SIGALRM handler (no
//!   SA_RESTART) fired every that many microseconds of real time.
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

/// `rank:a[:b[:c]]` fields of variable `name` for rank `me`, if it names it.
fn for_rank(name: &str, me: u32) -> Option<Vec<String>> {
    let v = std::env::var(name).ok()?;
    let f: Vec<String> = v.split(':').map(str::to_owned).collect();
    (f.first()?.parse::<u32>().ok()? == me).then(|| f[1..].to_vec())
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
    if let Some(f) = for_rank("FASTMSG_TEST_LATE", me) {
        let ms: u64 = f[0].parse().unwrap();
        log(&format!("late: sleeping {ms} ms before start"));
        nap(ms, false);
    }
    let mut ep = b.start().map_err(|e| format!("start: {e}"))?;
    log("started");
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
        for k in 1..size {
            let dest = Rank((me + k) % size);
            for i in 0..msgs {
                let seq = round * msgs + i;
                let m = common::message(me, dest.0, seq, len);
                ep.send(dest, h, &[&m])
                    .map_err(|e| format!("round {round}: send {seq} to {dest}: {e}"))?;
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
    Ok(())
}
