//! Chaos: a four-rank all-to-all storm (`common::storm`, 4000 messages per
//! rank, about 0.2 s here) in which a random
//! rank is killed with SIGKILL at a random moment after start-up, twenty
//! times. Every survivor must end within a second of the kill — with a
//! typed error that names a failure (after which its `close` must fail at
//! once too: the failure stays seen), or with success if the job had
//! already finished its last close barrier — nothing may hang, no byte may
//! arrive wrong (the storm checks every one), and nothing may be left in
//! the segment directory (a private `FASTMSG_SHM_DIR` per run).
//!
//! Ranks are processes started by hand (`fmrun` would stop the survivors
//! itself). The seed of each run is printed, and any failure names it.

mod common;

use common::procs::{self, Spawner};
use common::storm::storm_rank_then;
use fastmsg::EndpointBuilder;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

const RANKS: u32 = 4;
const RUNS: usize = 20;
/// Survivors must be done this long after the kill.
const REPORT_WITHIN: Duration = Duration::from_secs(1);

/// Exit status of a survivor that reported a failure.
const REPORTED: i32 = 3;

/// The rank program: a storm; marks its start-up with a file; exits 0 on
/// success, `REPORTED` on a typed error (printed).
#[test]
fn chaos_rank() {
    let Ok(dir) = std::env::var("CHAOS_DIR") else {
        return;
    };
    let b = EndpointBuilder::from_env().expect("env");
    let msgs = std::env::var("CHAOS_MSGS").map_or(4000, |v| v.parse().unwrap());
    let r = storm_rank_then(
        b,
        msgs,
        64 << 10,
        0xc4a05,
        |rank| {
            std::fs::write(Path::new(&dir).join(format!("started-{rank}")), b"").unwrap();
        },
        |ep, _| {
            // The failure stays seen: leaving in order fails, at once.
            let t = Instant::now();
            let r = ep.close();
            assert!(r.is_err(), "close after a peer's failure gave Ok");
            assert!(
                t.elapsed() < Duration::from_millis(500),
                "close took {:?}",
                t.elapsed()
            );
        },
    );
    match r {
        Ok(_) => std::process::exit(0),
        Err(e) => {
            eprintln!("chaos rank {}: {e}", std::env::var("FASTMSG_RANK").unwrap());
            std::process::exit(REPORTED);
        }
    }
}

/// Wait until every rank has started (its marker exists); false past the
/// limit.
fn all_started(dir: &Path, limit: Duration) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if (0..RANKS).all(|r| dir.join(format!("started-{r}")).exists()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

/// One run: returns a description of what went wrong, if anything.
fn one_run(run: usize, seed: u64) -> Result<(), String> {
    let mut g = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = procs::private_shm_dir(&format!("chaos{run}"));
    let markers = std::env::temp_dir().join(format!("fastmsg-chaos-{}-{run}", std::process::id()));
    let _ = std::fs::remove_dir_all(&markers);
    std::fs::create_dir(&markers).unwrap();
    let sp = Spawner {
        rank_test: "chaos_rank",
        size: RANKS,
        job: format!("chaos-{}-{run}", std::process::id()),
        env: vec![
            ("CHAOS_DIR".into(), markers.to_string_lossy().into_owned()),
            ("FASTMSG_SHM_DIR".into(), dir.to_string_lossy().into_owned()),
            ("FASTMSG_CREDITS".into(), "8".into()),
        ],
    };
    let mut ranks: Vec<Child> = (0..RANKS).map(|r| sp.spawn(r, &[], &[])).collect();
    let victim = g.random_range(0..RANKS) as usize;
    let delay = Duration::from_micros(g.random_range(0..200_000));
    let result = (|| {
        if !all_started(&markers, Duration::from_secs(20)) {
            return Err("the ranks did not all start".to_owned());
        }
        std::thread::sleep(delay);
        let _ = ranks[victim].kill(); // SIGKILL
        let killed = Instant::now();
        let _ = ranks[victim].wait();
        let mut worst = Duration::ZERO;
        for (r, child) in ranks.iter_mut().enumerate() {
            if r == victim {
                continue;
            }
            let status = procs::wait_until(child, killed + Duration::from_secs(10))
                .ok_or(format!("survivor {r} hung (killed after 10 s)"))?;
            let after = killed.elapsed();
            match status.code() {
                Some(0) | Some(REPORTED) => {}
                _ => return Err(format!("survivor {r} failed: {status}")),
            }
            worst = worst.max(after);
        }
        if worst > REPORT_WITHIN {
            return Err(format!("the last survivor ended {worst:?} after the kill"));
        }
        println!(
            "chaos run {run}: killed rank {victim} {delay:?} after start; survivors done within {worst:?}"
        );
        Ok(())
    })();
    for c in &mut ranks {
        let _ = c.kill();
        let _ = c.wait();
    }
    let left: Vec<String> = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&markers);
    result?;
    if !left.is_empty() {
        return Err(format!("left in the segment directory: {left:?}"));
    }
    Ok(())
}

#[test]
fn a_rank_killed_at_random_in_a_storm_is_reported_by_every_survivor() {
    let base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let t = Instant::now();
    for run in 0..RUNS {
        let seed = base ^ (run as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        if let Err(e) = one_run(run, seed) {
            panic!("chaos run {run} (seed {seed:#x}): {e}");
        }
    }
    println!("{RUNS} chaos runs in {:?}", t.elapsed());
}
