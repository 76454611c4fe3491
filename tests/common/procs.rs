//! Ranks started by hand as processes (not through `fmrun`, which would
//! stop the survivors of a failure itself): each re-executes the calling
//! test binary on one named test (the *rank program*) with the launcher
//! environment set, optionally through a wrapper command (`unshare --pid
//! --fork` for a rank in its own PID namespace). Every wait is bounded: a
//! rank still running past its limit is killed and reported as hung.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// One job's common settings.
pub struct Spawner<'a> {
    /// The exact name of the rank program's test.
    pub rank_test: &'a str,
    /// Ranks in the job.
    pub size: u32,
    /// A fresh job id.
    pub job: String,
    /// More environment for every rank.
    pub env: Vec<(String, String)>,
}

impl Spawner<'_> {
    /// Start rank `rank`, through `wrapper` (a command and its arguments)
    /// if given, with `extra` environment.
    pub fn spawn(&self, rank: u32, wrapper: &[&str], extra: &[(&str, String)]) -> Child {
        self.command(rank, wrapper, extra)
            .spawn()
            .expect("spawn rank")
    }

    /// The command [`spawn`](Self::spawn) runs, for a caller that sets
    /// more (its output piped, say) before starting it.
    pub fn command(&self, rank: u32, wrapper: &[&str], extra: &[(&str, String)]) -> Command {
        let exe = std::env::current_exe().unwrap();
        let mut c = match wrapper.split_first() {
            Some((w, args)) => {
                let mut c = Command::new(w);
                c.args(args).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        c.args([
            self.rank_test,
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("FASTMSG_RANK", rank.to_string())
        .env("FASTMSG_SIZE", self.size.to_string())
        .env("FASTMSG_JOB", &self.job)
        .env("FASTMSG_TIMEOUT", "20")
        .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null());
        c
    }
}

/// Wait for `child` until `deadline`; kill it past that (`None`: hung).
pub fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Wait for every child (bounded by `limit` in all); panic naming the
/// ranks that hung or failed. Returns the exit statuses in rank order.
pub fn wait_all(children: &mut [Child], limit: Duration, what: &str) -> Vec<ExitStatus> {
    let deadline = Instant::now() + limit;
    let out: Vec<Option<ExitStatus>> = children
        .iter_mut()
        .map(|c| wait_until(c, deadline))
        .collect();
    let hung: Vec<usize> = (0..out.len()).filter(|&r| out[r].is_none()).collect();
    assert!(
        hung.is_empty(),
        "{what}: rank(s) {hung:?} still running after {limit:?} (hung; killed)"
    );
    out.into_iter().map(Option::unwrap).collect()
}

/// Nanoseconds since the Unix epoch (comparable between processes of one
/// host).
pub fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// A fresh, empty, private segment directory under /dev/shm.
pub fn private_shm_dir(tag: &str) -> std::path::PathBuf {
    let d = Path::new("/dev/shm").join(format!("fastmsg-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir(&d).expect("create private segment directory");
    d
}

/// Whether `unshare --pid --fork` works here (root, and the tool exists).
pub fn can_unshare_pid() -> bool {
    Command::new("unshare")
        .args(["--pid", "--fork", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
