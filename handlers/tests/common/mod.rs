//! Helpers shared by the handlers' tests: deterministic inputs every
//! rank can recompute for every other rank, threaded job runners, and
//! jobs of rank processes bounded in time.

#![allow(dead_code)]

use fastmsg::threads;
use fastmsg::{EndpointBuilder, Error};
use fastmsg_handlers::aggregate::Aggregator;
use fastmsg_handlers::rpc::Rpc;
use fastmsg_handlers::{CollConfig, Collectives};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cell::Cell;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// A generator for (seed, iteration, rank, salt).
pub fn rng(seed: u64, iter: u64, rank: u32, salt: u64) -> StdRng {
    StdRng::seed_from_u64(
        seed ^ iter.wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ (u64::from(rank) << 40)
            ^ salt.wrapping_mul(0xc2b2_ae3d_27d4_eb4f),
    )
}

pub fn u64s(seed: u64, iter: u64, rank: u32, n: usize) -> Vec<u64> {
    let mut g = rng(seed, iter, rank, 1);
    (0..n).map(|_| g.random()).collect()
}

pub fn i64s(seed: u64, iter: u64, rank: u32, n: usize) -> Vec<i64> {
    let mut g = rng(seed, iter, rank, 2);
    (0..n)
        .map(|_| g.random_range(-1_000_000..1_000_000))
        .collect()
}

/// Floats spanning many magnitudes, so association changes rounding.
pub fn f64s(seed: u64, iter: u64, rank: u32, n: usize) -> Vec<f64> {
    let mut g = rng(seed, iter, rank, 3);
    (0..n)
        .map(|_| {
            let m: f64 = g.random_range(-1.0..1.0);
            m * 10f64.powi(g.random_range(-8..8))
        })
        .collect()
}

/// An element count: mostly small, sometimes past one 8 KiB frame.
pub fn count(seed: u64, iter: u64) -> usize {
    let mut g = rng(seed, iter, u32::MAX, 4);
    match g.random_range(0..10) {
        0 => 0,
        1 => g.random_range(1025..3000),
        _ => g.random_range(1..40),
    }
}

/// Run `n` ranks as threads with a registered `Collectives`.
pub fn run<T: Send>(
    n: u32,
    cfg: CollConfig,
    body: impl Fn(EndpointBuilder, Collectives) -> Result<T, Error> + Sync,
) -> Vec<T> {
    threads::run(
        n,
        |c| c.timeout = std::time::Duration::from_secs(120),
        |mut b| {
            let coll = Collectives::register(&mut b, cfg.clone());
            body(b, coll)
        },
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// How long one test's job may run before its blocking calls give up.
pub const TEST_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Run `n` ranks as threads, bounded: past [`TEST_LIMIT`] every blocking
/// call of the job gives up (`ExtractError::Aborted`) and the test fails
/// instead of hanging (rank 0's watch is enough: the flag is the job's).
/// `max_parked` replaces the default bound on parked bytes.
pub fn run_bounded<T: Send>(
    n: u32,
    max_parked: Option<usize>,
    body: impl Fn(EndpointBuilder) -> Result<T, Error> + Sync,
) -> Vec<T> {
    threads::run(
        n,
        |c| {
            c.timeout = TEST_LIMIT;
            if let Some(m) = max_parked {
                c.max_parked = m;
            }
            if c.job.rank.0 == 0 {
                if let Some(abort) = c.abort.clone() {
                    std::thread::spawn(move || {
                        std::thread::sleep(TEST_LIMIT);
                        abort.store(true, std::sync::atomic::Ordering::Relaxed);
                    });
                }
            }
        },
        body,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Run one oversubscribed job at a time within a test binary: the tests
/// of a binary run in parallel, and several jobs of 5–9 rank threads on a
/// 2-core machine would multiply each other's scheduling delays.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The `fmrun` launcher. It is a binary of the `fastmsg` package, so this
/// crate cannot name it with `env!("CARGO_BIN_EXE_fmrun")` (Cargo gives
/// that only to the package's own tests). It is found next to this test's
/// own executable's directory (`<target>/<profile>/deps/<test>` →
/// `<target>/<profile>/fmrun`): `cargo test --workspace` and `cargo build
/// --workspace --all-targets` (what CI runs) build it there, because
/// `fastmsg`'s own tests need it. `FMRUN=/path/to/fmrun` overrides the
/// search. If it is missing, the test fails and says how to build it — it
/// does not pass silently.
pub fn fmrun() -> PathBuf {
    if let Some(p) = std::env::var_os("FMRUN") {
        return p.into();
    }
    let exe = std::env::current_exe().expect("own path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("<target>/<profile>/deps/<test>");
    let p = profile_dir.join("fmrun");
    assert!(
        p.exists(),
        "{} not found: build it with `cargo build -p fastmsg --bin fmrun` (same profile), or set FMRUN",
        p.display()
    );
    p
}

/// Start this test binary's test `test` (exact name) as every rank of a
/// `size`-rank job of processes, one process a rank: `FASTMSG_RANK`,
/// `FASTMSG_SIZE` and `FASTMSG_JOB` (`<job>-<this process's id>`) set,
/// then `env`. The test reads an entry of `env` to know it runs as a rank.
pub fn spawn_ranks(test: &str, job: &str, size: u32, env: &[(&str, &str)]) -> Vec<Child> {
    let exe = std::env::current_exe().expect("own path");
    let job = format!("{job}-{}", std::process::id());
    (0..size)
        .map(|rank| {
            Command::new(&exe)
                .args([test, "--exact", "--nocapture", "--test-threads", "1"])
                .env("FASTMSG_RANK", rank.to_string())
                .env("FASTMSG_SIZE", size.to_string())
                .env("FASTMSG_JOB", &job)
                .envs(env.iter().copied())
                .spawn()
                .expect("spawn rank")
        })
        .collect()
}

/// Wait for every rank process, at most `limit` in all: each one's exit
/// status, `None` for one still running then (a hang), which is killed.
pub fn wait_bounded(ranks: &mut [Child], limit: Duration) -> Vec<Option<ExitStatus>> {
    let t = Instant::now();
    let mut status = vec![None; ranks.len()];
    while status.iter().any(Option::is_none) && t.elapsed() < limit {
        for (r, s) in ranks.iter_mut().zip(status.iter_mut()) {
            if s.is_none() {
                *s = r.try_wait().expect("wait");
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for (r, s) in ranks.iter_mut().zip(status.iter()) {
        if s.is_none() {
            let _ = r.kill();
            let _ = r.wait();
        }
    }
    status
}

/// The owner's answer to request `x` from `src` in [`ordered_rpc`].
pub fn answer(owner: u32, src: u32, x: u64) -> u64 {
    x.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (u64::from(owner) << 48) ^ u64::from(src)
}

/// Per owner, the next token expected; and how many completions came out
/// of order or wrong.
pub type OrderCheck = (Rc<Vec<Cell<u64>>>, Rc<Cell<u64>>);

/// Register the call channel `f` on `agg`, whose owners answer with
/// [`answer`], with a completion callback that checks the order: the
/// calls to each owner must carry the tokens 0, 1, … in the order they
/// are made, and each answer must be the owner's.
pub fn ordered_rpc(agg: &Aggregator, b: &mut EndpointBuilder) -> (Rpc<u64, u64>, OrderCheck) {
    let rpc = agg.rpc(b, "f", |ctx: &fastmsg::Ctx, src: fastmsg::Rank, x: u64| {
        Ok::<u64, String>(answer(ctx.rank().0, src.0, x))
    });
    let me = b.rank().0;
    let n = b.size();
    let next: Rc<Vec<Cell<u64>>> = Rc::new((0..n).map(|_| Cell::new(0)).collect());
    let bad = Rc::new(Cell::new(0u64));
    let (nx, bd) = (Rc::clone(&next), Rc::clone(&bad));
    rpc.on_complete(move |_ctx, owner, token, r| {
        let want = nx[owner.index()].get();
        if token != want || r != Ok(answer(owner.0, me, token)) {
            bd.set(bd.get() + 1);
        }
        nx[owner.index()].set(want + 1);
    });
    (rpc, (next, bad))
}
