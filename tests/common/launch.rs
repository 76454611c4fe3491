//! Running a rank program under a real launcher: Open MPI's `mpirun`
//! (its PMIx server is what fastmsg talks to, through the PMIx library
//! loaded at run time). The ranks are
//! the calling test binary, re-executed on one named test, split into
//! "hosts" by `FASTMSG_HOST` (`per_host` consecutive ranks each), with no
//! `FASTMSG_ROOT` and no `FASTMSG_SECRET`: the wire-up comes from PMIx.
//! Skips, saying why, when `mpirun` or the PMIx library is missing. The whole run is bounded; a hung job is killed.

#![allow(dead_code)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One job under `mpirun`.
pub struct MpiJob<'a> {
    /// The exact name of the rank program's test.
    pub rank_test: &'a str,
    /// Ranks in the job.
    pub size: u32,
    /// Consecutive ranks per `FASTMSG_HOST` "host".
    pub per_host: u32,
    /// `FASTMSG_TEST_SCENARIO` for the ranks.
    pub scenario: &'a str,
    /// More environment for the ranks.
    pub env: Vec<(String, String)>,
    /// How long the whole job may take.
    pub limit: Duration,
}

/// The environment variable that tells a rank program it was started by
/// this helper (whichever launcher).
pub const LAUNCHED: &str = "FMTEST_LAUNCHED";

/// Whether the rank program should run: started by `fmrun` or by
/// [`mpirun`] (not as an ordinary test).
pub fn is_rank() -> bool {
    std::env::var_os("FASTMSG_RANK").is_some() || std::env::var_os(LAUNCHED).is_some()
}

/// Why `mpirun` jobs cannot run here, if they cannot.
pub fn mpirun_missing() -> Option<String> {
    if let Err(e) = fastmsg::bootstrap::pmix_library_version() {
        return Some(e.to_string());
    }
    match Command::new("mpirun")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => None,
        Ok(s) => Some(format!("`mpirun --version` failed ({s})")),
        Err(e) => Some(format!("no `mpirun` ({e}); apt-get install openmpi-bin")),
    }
}

/// Run `job` under `mpirun`; panics if it fails or hangs. Returns the
/// seconds it took, or `None` (after printing why) if it was skipped.
pub fn mpirun(job: &MpiJob<'_>) -> Option<f64> {
    if let Some(why) = mpirun_missing() {
        eprintln!("skipped: {why}");
        return None;
    }
    let exe = std::env::current_exe().expect("own path");
    // Each rank picks its "host" from the rank PMIx gives it.
    let split = format!(
        "FASTMSG_HOST=fmhost$((${{PMIX_RANK:-$SLURM_PROCID}} / {})) exec \"$0\" \"$@\"",
        job.per_host
    );
    let mut c = Command::new("mpirun");
    c.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "--bind-to",
        "none",
    ])
    .args(["-n", &job.size.to_string()])
    .args(["sh", "-c", &split])
    .arg(&exe)
    .args([
        job.rank_test,
        "--exact",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env(LAUNCHED, "mpirun")
    .env("FASTMSG_TEST_SCENARIO", job.scenario)
    .env("FASTMSG_TIMEOUT", "30")
    .envs(job.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    .stdin(Stdio::null());
    for v in [
        "FASTMSG_RANK",
        "FASTMSG_SIZE",
        "FASTMSG_JOB",
        "FASTMSG_ROOT",
        "FASTMSG_SECRET",
        "FASTMSG_HOST",
    ] {
        c.env_remove(v);
    }
    let start = Instant::now();
    let mut child = c.spawn().expect("start mpirun");
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for mpirun") {
            break s;
        }
        if start.elapsed() > job.limit {
            // SIGTERM first (std only sends SIGKILL): mpirun then stops
            // its ranks itself; force it two seconds later.
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            std::thread::sleep(Duration::from_secs(2));
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "mpirun job {:?} still running after {:?} (hung; killed)",
                job.scenario, job.limit
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let secs = start.elapsed().as_secs_f64();
    assert!(status.success(), "mpirun job {:?}: {status}", job.scenario);
    eprintln!(
        "mpirun job {:?} ({} ranks) took {secs:.2} s",
        job.scenario, job.size
    );
    Some(secs)
}
