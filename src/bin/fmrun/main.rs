//! `fmrun -n N [options] prog args…` — start N ranks of `prog` on this host.
//!
//! One host's share of a multi-host job: `fmrun -n N --size S --rank-offset
//! K --root HOST:PORT --secret-file FILE --job ID prog…` starts global
//! ranks `K .. K+N` of an `S`-rank job on this host; run it once per host
//! (by hand, ssh, or a script); rank 0's host serves the rendezvous at
//! `--root`. `--net tcp` forces every pair, also on one host, onto the
//! network transport (a secret is then generated if none is given).
//!
//! Sets the environment each rank reads (`FASTMSG_RANK`, `FASTMSG_SIZE`,
//! `FASTMSG_LOCAL_RANK`, `FASTMSG_LOCAL_SIZE`, `FASTMSG_JOB`,
//! `FASTMSG_SECRET` — the secret travels by environment only — and the
//! tuning variables given as options), forwards the ranks' output line by
//! line ([`output`]; `--tag-output` prefixes `[rank] `), and exits with the
//! first non-zero exit status (128 + n for a rank killed by signal n). When
//! a rank fails, or on Ctrl-C/SIGTERM, the remaining ranks are terminated
//! (SIGTERM, then SIGKILL after a grace period); if fmrun itself is killed,
//! its ranks get SIGKILL from the kernel (parent-death signal, [`ranks`]).
//! Every file of the job in the segment directory is removed in every case
//! ([`cleanup`]); one left by an fmrun killed with -9 is collected by the
//! next job with that id. The soft open-file limit is raised for the
//! ranks' pipes when the hard limit allows it ([`limits`]).

#![allow(unsafe_code)]

mod args;
mod cleanup;
mod limits;
mod output;
mod ranks;
mod secret;

use args::Args;
use clap::Parser;
use output::{Forwarders, Stream};
use ranks::{kill_all, reap};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

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
    if let Err(e) = args.check_tuning() {
        eprintln!("fmrun: {e}");
        return ExitCode::from(2);
    }
    if let Err(e) = limits::ensure(args.ranks) {
        eprintln!("fmrun: {e}");
        return ExitCode::from(2);
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
    let secret = match secret::resolve(
        args.secret.as_deref(),
        args.secret_file.as_deref(),
        spans_hosts || args.root.is_some(),
    ) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fmrun: {e}");
            return ExitCode::from(2);
        }
    };
    let shm_dir = args
        .shm_dir
        .clone()
        .or_else(|| {
            std::env::var("FASTMSG_SHM_DIR")
                .ok()
                .filter(|d| !d.is_empty())
        })
        .unwrap_or_else(|| "/dev/shm".into());
    let job = args.job.clone().unwrap_or_else(|| {
        // The pid (for people), 32 random bits (for other users: the
        // segment name is not predictable).
        let mut r = [0u8; 4];
        getrandom::fill(&mut r).expect("the OS random source");
        format!("fm{}-{:08x}", std::process::id(), u32::from_le_bytes(r))
    });
    install_handlers();
    let mut live: Vec<(u32, libc::pid_t)> = Vec::new();
    // Two threads forward every rank's output (one per stream); if they
    // cannot start (a memory or thread limit), the ranks write to fmrun's
    // own streams.
    let mut forwarders = match Forwarders::start() {
        Ok(f) => Some(f),
        Err(e) => {
            tracing::warn!("cannot start the output threads ({e}): the ranks write to fmrun's stdout and stderr directly, untagged, lines of different ranks possibly mixed");
            None
        }
    };
    let (rank_out, rank_err) = if forwarders.is_some() {
        (Stdio::piped as fn() -> Stdio, Stdio::piped as fn() -> Stdio)
    } else {
        (
            Stdio::inherit as fn() -> Stdio,
            Stdio::inherit as fn() -> Stdio,
        )
    };
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
            .env("FASTMSG_SHM_DIR", &shm_dir)
            // By environment (readable by this user and root only), never
            // on a command line; the file variable would be redundant.
            .env("FASTMSG_SECRET", &secret)
            .env_remove("FASTMSG_SECRET_FILE")
            .stdin(Stdio::inherit())
            .stdout(rank_out())
            .stderr(rank_err());
        ranks::die_with_parent(&mut cmd);
        let opts = [
            ("FASTMSG_QUEUES", args.queues.map(|v| v.to_string())),
            ("FASTMSG_WAIT", args.wait.clone()),
            ("FASTMSG_CREDITS", args.credits.map(|v| v.to_string())),
            ("FASTMSG_FRAME_SIZE", args.frame_size.map(|v| v.to_string())),
            ("FASTMSG_TIMEOUT", args.timeout.map(|v| v.to_string())),
            ("FASTMSG_ROOT", args.root.clone()),
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
        cmd.env(fastmsg::internal::launcher::FLAGS_VAR, given.join(","));
        match cmd.spawn() {
            Ok(mut child) => {
                if let Some(f) = &mut forwarders {
                    let tag = args.tag_output.then(|| format!("[{rank}] "));
                    if let Some(o) = child.stdout.take() {
                        f.add(rank, o, Stream::Out, tag.clone());
                    }
                    if let Some(e) = child.stderr.take() {
                        f.add(rank, e, Stream::Err, tag);
                    }
                }
                live.push((rank, child.id() as libc::pid_t));
            }
            Err(e) => {
                tracing::error!("cannot start rank {rank} ({}): {e}", args.command[0]);
                code = 127;
                break;
            }
        }
    }
    if let Some(f) = &mut forwarders {
        f.all_added();
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
        if let Some((pid, ending)) = got {
            let Some(i) = live.iter().position(|&(_, p)| p == pid) else {
                continue;
            };
            let (rank, _) = live.swap_remove(i);
            if ending.code != 0 && code == 0 {
                code = ending.code;
                if stopping.is_none() {
                    // The rank's own last words first.
                    if let Some(f) = &mut forwarders {
                        f.drained(rank, Duration::from_millis(200));
                    }
                    tracing::error!("rank {rank} {ending}; stopping the other ranks");
                    kill_all(&live, libc::SIGTERM);
                    stopping = Some(Instant::now());
                }
            }
        }
    }
    cleanup::remove_job_files(&shm_dir, &job);
    if let Some(f) = forwarders {
        f.finish(Duration::from_secs(2));
    }
    ExitCode::from(code.clamp(0, 255) as u8)
}
