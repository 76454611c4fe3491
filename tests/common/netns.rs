//! Two "hosts" for multi-host tests: two Linux network namespaces that the
//! test creates itself, joined by a veth pair, with addresses assigned
//! inside them (a private /24 per pair; nothing else is ever addressed).
//! A job runs as one `fmrun` per namespace, each starting that host's
//! share of the ranks (`--size --rank-offset --root --job --host-id`, the
//! secret in `FASTMSG_SECRET`) by re-executing the calling test binary on one named test
//! (the *rank program*), which reads `FASTMSG_TEST_SCENARIO`.
//!
//! Shared by the root crate's `tests/net_hosts.rs` (as `common::netns`)
//! and `handlers/tests/net_collectives.rs` (by `#[path]`). Needs root;
//! [`Hosts::create`] returns `None`, with a message, where namespaces
//! cannot be created.
//!
//! Namespaces are named `fmh<pid>_<k>{a,b}` after the test process that
//! made them. A test process killed before its drop leaves its pair
//! behind; the next [`Hosts::create`] of any test process deletes the
//! pairs whose process no longer exists (a live process's are never
//! touched).

#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Two namespaces joined by a veth pair; removed on drop.
pub struct Hosts {
    pub ns: [String; 2],
    pub addr: [String; 2],
    /// Each namespace's end of the veth pair (see [`Hosts::cut`]).
    pub veth: [String; 2],
}

/// A job to run across the two hosts.
pub struct Job<'a> {
    /// The `fmrun` launcher.
    pub fmrun: &'a Path,
    /// The exact name of the test that is the rank program.
    pub rank_test: &'a str,
    /// Ranks started in each namespace.
    pub per_host: u32,
    /// Passed to the ranks as `FASTMSG_TEST_SCENARIO`.
    pub scenario: &'a str,
    /// More environment for the ranks.
    pub env: Vec<(String, String)>,
    /// The whole job is stopped (and the test fails) past this.
    pub limit: Duration,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Whether this process runs as root (namespaces need it).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

impl Hosts {
    /// `None` (with a message) where namespaces cannot be created.
    pub fn create(tag: &str) -> Option<Hosts> {
        if !is_root() {
            eprintln!("SKIP {tag}: not root, cannot create network namespaces");
            return None;
        }
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(sweep_stale);
        static N: AtomicU32 = AtomicU32::new(0);
        let k = N.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let id = format!("{}{k}", pid % 100_000);
        let ns = [format!("fmh{pid}_{k}a"), format!("fmh{pid}_{k}b")];
        let veth = [format!("fmv{id}a"), format!("fmv{id}b")];
        // Addresses inside our own namespaces only (a private /24 per pair).
        let net = 1 + k % 250;
        let addr = [format!("10.251.{net}.1"), format!("10.251.{net}.2")];
        let hosts = Hosts {
            ns: ns.clone(),
            addr: addr.clone(),
            veth: veth.clone(),
        };
        let setup = || -> Result<(), String> {
            for n in &ns {
                ip(&["netns", "add", n])?;
            }
            ip(&[
                "link", "add", &veth[0], "type", "veth", "peer", "name", &veth[1],
            ])?;
            for i in 0..2 {
                ip(&["link", "set", &veth[i], "netns", &ns[i]])?;
                ip(&[
                    "-n",
                    &ns[i],
                    "addr",
                    "add",
                    &format!("{}/24", addr[i]),
                    "dev",
                    &veth[i],
                ])?;
                ip(&["-n", &ns[i], "link", "set", &veth[i], "up"])?;
                ip(&["-n", &ns[i], "link", "set", "lo", "up"])?;
            }
            Ok(())
        };
        match setup() {
            Ok(()) => Some(hosts),
            Err(e) => {
                if e.contains("Operation not permitted") || e.contains("Permission denied") {
                    eprintln!("SKIP {tag}: cannot create network namespaces: {e}");
                    None
                } else {
                    panic!("creating test namespaces: {e}");
                }
            }
        }
    }

    /// Run `job`: `per_host` ranks in each namespace, `2 * per_host` in
    /// all. Panics if a host's ranks fail or the job outlives its limit
    /// (then both hosts' `fmrun`s are stopped, which stops their ranks).
    pub fn run(&self, job: &Job) {
        let mut children = self.spawn(job);
        let scenario = job.scenario;
        let start = Instant::now();
        let mut statuses = [None, None];
        while statuses.iter().any(Option::is_none) {
            for (h, c) in children.iter_mut().enumerate() {
                if statuses[h].is_none() {
                    statuses[h] = c.try_wait().unwrap();
                }
            }
            if start.elapsed() > job.limit {
                stop(&mut children);
                panic!(
                    "{scenario}: the job did not finish in {:?} (stopped)",
                    job.limit
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        for (h, s) in statuses.iter().enumerate() {
            let s = s.expect("every host finished");
            assert!(s.success(), "{scenario}: host {h}'s ranks failed: {s}");
        }
    }

    /// Cut host `h` off the other: its end of the veth pair goes down, so
    /// that nothing it sends arrives and nothing reaches it — to the other
    /// host it looks as if `h` crashed or lost power (no FIN, no RST, no
    /// ICMP error comes back).
    pub fn cut(&self, h: usize) {
        ip(&["-n", &self.ns[h], "link", "set", &self.veth[h], "down"])
            .unwrap_or_else(|e| panic!("cutting host {h} off: {e}"));
    }

    /// Start `job` as [`run`](Self::run) does, and return both hosts'
    /// `fmrun`s (host 0's first) for the caller to watch; [`stop`] ends
    /// them.
    pub fn spawn(&self, job: &Job) -> Vec<Child> {
        let exe = std::env::current_exe().unwrap();
        let scenario = job.scenario;
        let tag = format!("{}-{scenario}", std::process::id());
        let root = format!("{}:{}", self.addr[0], 17000 + std::process::id() % 20000);
        let size = 2 * job.per_host;
        (0..2)
            .map(|h| {
                Command::new("ip")
                    .args(["netns", "exec", &self.ns[h]])
                    .arg(job.fmrun)
                    .args(["-n", &job.per_host.to_string()])
                    .args(["--size", &size.to_string()])
                    .args(["--rank-offset", &(job.per_host * h as u32).to_string()])
                    .args(["--root", &root])
                    .env("FASTMSG_SECRET", "namespaces-secret")
                    .env_remove("FASTMSG_SECRET_FILE")
                    .args(["--job", &format!("nh{tag}")])
                    .args(["--host-id", &format!("host{h}"), "--timeout", "60"])
                    .arg(&exe)
                    .args([
                        job.rank_test,
                        "--exact",
                        "--nocapture",
                        "--test-threads",
                        "1",
                    ])
                    .env("FASTMSG_TEST_SCENARIO", scenario)
                    .envs(job.env.iter().map(|(k, v)| (k, v)))
                    .stdout(Stdio::inherit())
                    .stderr(Stdio::inherit())
                    .spawn()
                    .expect("start fmrun")
            })
            .collect()
    }
}

/// The process id in a test namespace's name (`fmh<pid>_<k>a|b`).
fn owner_of(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("fmh")?;
    let (pid, tail) = rest.split_once('_')?;
    let k = tail.strip_suffix('a').or_else(|| tail.strip_suffix('b'))?;
    if k.is_empty() || !k.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Delete the test namespaces of processes that no longer exist (killed
/// before their `Hosts` was dropped). Best effort: a failure leaves them.
fn sweep_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        if let Some(pid) = owner_of(name) {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = ip(&["netns", "del", name]);
            }
        }
    }
}

#[test]
fn names_of_test_namespaces_give_their_process() {
    assert_eq!(owner_of("fmh4242_0a"), Some(4242));
    assert_eq!(owner_of("fmh4242_17b"), Some(4242));
    assert_eq!(owner_of("fmh4242_c"), None);
    assert_eq!(owner_of("fmh4242_1c"), None);
    assert_eq!(
        owner_of("fmh42420a"),
        None,
        "the old names are not ours to judge"
    );
    assert_eq!(owner_of("other"), None);
}

/// SIGTERM each `fmrun` (it stops its ranks), SIGKILL what is left
/// (within about 5 s).
pub fn stop(children: &mut [Child]) {
    for c in children.iter() {
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
    }
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5)
        && children
            .iter_mut()
            .any(|c| matches!(c.try_wait(), Ok(None)))
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    for c in children.iter_mut() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for n in &self.ns {
            let _ = ip(&["netns", "del", n]);
        }
    }
}
