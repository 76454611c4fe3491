//! `fmrun -n N [options] prog args…` — start N ranks of `prog` on this host.
//!
//! One host's share of a multi-host job: `fmrun -n N --size S --rank-offset
//! K --root HOST:PORT --secret S --job ID prog…` starts global ranks
//! `K .. K+N` of an `S`-rank job on this host; run it once per host (by
//! hand, ssh, or a script); rank 0's host serves the rendezvous at
//! `--root`. `--net tcp` forces every pair, also on one host, onto the
//! network transport (a secret is then generated if none is given).
//!
//! Sets the environment each rank reads (`FASTMSG_RANK`, `FASTMSG_SIZE`,
//! `FASTMSG_LOCAL_RANK`, `FASTMSG_LOCAL_SIZE`, `FASTMSG_JOB`, and the
//! tuning variables given as options), lets the ranks write straight to its
//! stdout/stderr, and exits with the first non-zero exit status (128 + n for
//! a rank killed by signal n). When a rank fails, or on Ctrl-C/SIGTERM, the
//! remaining ranks are terminated (SIGTERM, then SIGKILL after a grace
//! period). The job's shared segment is removed in every case.

#![allow(unsafe_code)]

use clap::Parser;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    name = "fmrun",
    version,
    about = "Start N ranks of a fastmsg program on this host",
    trailing_var_arg = true
)]
struct Args {
    /// Number of ranks.
    #[arg(short = 'n', long = "np", value_name = "N")]
    ranks: u32,
    /// Receive queues per rank (1 ..= N; default: N up to 16).
    #[arg(long, value_name = "M")]
    queues: Option<u32>,
    /// Wait policy when idle.
    #[arg(long, value_name = "POLICY", value_parser = ["spin", "yield", "sleep", "auto"])]
    wait: Option<String>,
    /// Credits per pair of ranks, in frames.
    #[arg(long, value_name = "FRAMES")]
    credits: Option<u32>,
    /// Payload bytes per shared-memory frame (multiple of 64).
    #[arg(long, value_name = "BYTES")]
    frame_size: Option<u32>,
    /// Seconds ranks wait for each other at start-up.
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<u64>,
    /// Seconds between SIGTERM and SIGKILL when stopping ranks.
    #[arg(long, default_value_t = 2, value_name = "SECONDS")]
    grace: u64,
    /// Directory of the shared segment.
    #[arg(long, default_value = "/dev/shm", value_name = "DIR")]
    shm_dir: String,
    /// Ranks in the whole job, over all hosts (default: -n).
    #[arg(long, value_name = "S")]
    size: Option<u32>,
    /// Global rank of this host's first rank.
    #[arg(long, default_value_t = 0, value_name = "K")]
    rank_offset: u32,
    /// Where rank 0 serves the rendezvous (needed when ranks span hosts).
    #[arg(long, value_name = "HOST:PORT")]
    root: Option<String>,
    /// The job secret every connection proves (default: FASTMSG_SECRET,
    /// else a fresh random one for a one-host job).
    #[arg(long, value_name = "SECRET")]
    secret: Option<String>,
    /// Job id, the same on every host (default: a fresh one; needed when
    /// ranks span hosts).
    #[arg(long, value_name = "ID")]
    job: Option<String>,
    /// This host's identity (FASTMSG_HOST; default: the host name).
    #[arg(long, value_name = "NAME")]
    host_id: Option<String>,
    /// Transport between ranks: auto (shm on a host, tcp between hosts),
    /// tcp or verbs (every pair over the network, like UCX_TLS).
    #[arg(long, value_name = "NET", value_parser = ["auto", "tcp", "verbs"])]
    net: Option<String>,
    /// Program and its arguments.
    #[arg(required = true, value_name = "PROG")]
    command: Vec<String>,
}

/// The signal that asked us to stop (0: none).
static STOP: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    STOP.store(sig, Ordering::Relaxed);
}

fn install_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction is valid; the handler only stores to an
        // atomic (async-signal-safe); no SA_RESTART so waitpid returns EINTR.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = 0;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

fn kill_all(pids: &[(u32, libc::pid_t)], sig: libc::c_int) {
    for &(_, pid) in pids {
        // SAFETY: signalling our own children; a reaped pid is not in the list.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// Reap one child; `block` waits. Returns (pid, exit code) or None.
fn reap(block: bool) -> Option<(libc::pid_t, i32)> {
    let mut status = 0;
    // SAFETY: waitpid on our own children with a valid status pointer.
    let pid = unsafe { libc::waitpid(-1, &mut status, if block { 0 } else { libc::WNOHANG }) };
    if pid <= 0 {
        return None;
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        1
    };
    Some((pid, code))
}

fn remove_segments(dir: &str, job: &str) {
    let prefix = format!("fastmsg-{job}-");
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// A fresh job secret: 128 random bits, hex.
fn fresh_secret() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random source");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn main() -> ExitCode {
    fastmsg::log::init_as("fmrun");
    let args = Args::parse();
    if args.ranks == 0 {
        eprintln!("fmrun: -n must be at least 1");
        return ExitCode::from(2);
    }
    if let Some(q) = args.queues {
        if q == 0 || q > args.ranks {
            eprintln!(
                "fmrun: --queues must be in 1 ..= {} (the number of ranks)",
                args.ranks
            );
            return ExitCode::from(2);
        }
    }
    let size = args.size.unwrap_or(args.ranks);
    let spans_hosts = size != args.ranks;
    if args
        .rank_offset
        .checked_add(args.ranks)
        .is_none_or(|e| e > size)
    {
        eprintln!(
            "fmrun: ranks {} .. {} do not fit a job of --size {size}",
            args.rank_offset,
            u64::from(args.rank_offset) + u64::from(args.ranks)
        );
        return ExitCode::from(2);
    }
    if spans_hosts && (args.root.is_none() || args.job.is_none()) {
        eprintln!("fmrun: a job spanning hosts (--size > -n) needs --root HOST:PORT and --job ID, the same on every host");
        return ExitCode::from(2);
    }
    let env_secret = std::env::var("FASTMSG_SECRET")
        .ok()
        .filter(|s| !s.is_empty());
    let secret = match args.secret.clone().or(env_secret) {
        Some(s) => Some(s),
        None if spans_hosts || args.root.is_some() => {
            eprintln!(
                "fmrun: a network job needs --secret (or FASTMSG_SECRET), the same on every host"
            );
            return ExitCode::from(2);
        }
        None => Some(fresh_secret()),
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let job = args
        .job
        .clone()
        .unwrap_or_else(|| format!("fm{}-{:08x}", std::process::id(), nanos));
    install_handlers();
    let mut live: Vec<(u32, libc::pid_t)> = Vec::new();
    let mut code = 0;
    for local in 0..args.ranks {
        let rank = args.rank_offset + local;
        let mut cmd = Command::new(&args.command[0]);
        cmd.args(&args.command[1..])
            .env("FASTMSG_RANK", rank.to_string())
            .env("FASTMSG_SIZE", size.to_string())
            .env("FASTMSG_LOCAL_RANK", local.to_string())
            .env("FASTMSG_LOCAL_SIZE", args.ranks.to_string())
            .env("FASTMSG_JOB", &job)
            .env("FASTMSG_SHM_DIR", &args.shm_dir);
        let opts = [
            ("FASTMSG_QUEUES", args.queues.map(|v| v.to_string())),
            ("FASTMSG_WAIT", args.wait.clone()),
            ("FASTMSG_CREDITS", args.credits.map(|v| v.to_string())),
            ("FASTMSG_FRAME_SIZE", args.frame_size.map(|v| v.to_string())),
            ("FASTMSG_TIMEOUT", args.timeout.map(|v| v.to_string())),
            ("FASTMSG_ROOT", args.root.clone()),
            ("FASTMSG_SECRET", secret.clone()),
            ("FASTMSG_HOST", args.host_id.clone()),
            ("FASTMSG_NET", args.net.clone()),
        ];
        let mut given = Vec::new();
        for (k, v) in opts {
            if let Some(v) = v {
                cmd.env(k, v);
                given.push(k);
            }
        }
        // For the configuration report: which settings came from options.
        cmd.env(fastmsg::settings::FLAGS_VAR, given.join(","));
        match cmd.spawn() {
            Ok(child) => live.push((rank, child.id() as libc::pid_t)),
            Err(e) => {
                tracing::error!("cannot start rank {rank} ({}): {e}", args.command[0]);
                code = 127;
                break;
            }
        }
    }
    let mut stopping: Option<Instant> = None;
    let mut killed = false;
    if code != 0 {
        kill_all(&live, libc::SIGTERM);
        stopping = Some(Instant::now());
    }
    while !live.is_empty() {
        let sig = STOP.swap(0, Ordering::Relaxed);
        if sig != 0 && stopping.is_none() {
            tracing::warn!("signal {sig}: stopping {} rank(s)", live.len());
            if code == 0 {
                code = 128 + sig;
            }
            kill_all(&live, libc::SIGTERM);
            stopping = Some(Instant::now());
        }
        if let Some(t) = stopping {
            if !killed && t.elapsed() > Duration::from_secs(args.grace) {
                kill_all(&live, libc::SIGKILL);
                killed = true;
            }
        }
        // Block while nothing is being stopped; poll while a grace period runs.
        let got = if stopping.is_some() {
            let r = reap(false);
            if r.is_none() {
                std::thread::sleep(Duration::from_millis(10));
            }
            r
        } else {
            reap(true)
        };
        if let Some((pid, c)) = got {
            let Some(i) = live.iter().position(|&(_, p)| p == pid) else {
                continue;
            };
            let (rank, _) = live.swap_remove(i);
            if c != 0 && code == 0 {
                code = c;
                if stopping.is_none() {
                    tracing::error!("rank {rank} exited with status {c}; stopping the other ranks");
                    kill_all(&live, libc::SIGTERM);
                    stopping = Some(Instant::now());
                }
            }
        }
    }
    remove_segments(&args.shm_dir, &job);
    ExitCode::from(code.clamp(0, 255) as u8)
}
