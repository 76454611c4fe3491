//! What the launcher says about the job's layout against what the ranks
//! find, checked at once rather than discovered by a start-up timeout.
//!
//! - A job whose ranks span hosts needs a way to exchange addresses: a
//!   PMIx server, a PMI socket or `FASTMSG_ROOT`. Without any,
//!   [`no_wire_up`] is the error every rank returns at once, naming what
//!   to set or install.
//! - A job that does not use the network trusts the launcher that all its
//!   ranks share this host, and waits for them in one shared segment per
//!   host identity (`FASTMSG_HOST`, else the host name). If the ranks'
//!   host identities differ, that wait could never end. Each rank
//!   therefore announces its host identity in a small file beside the
//!   segment (`<job file prefix>~who.<rank>`: host identity and pid, mode
//!   0600) and a [`Watch`] looks at its peers' files while the segment
//!   waits: a peer of the job with another identity stops the wait on
//!   every rank within [`POLL`], with [`ConfigError::HostsDisagree`].
//!   Ranks on hosts that do not share the directory never see each other's
//!   files; for them the launcher's word stands.

use super::{job_file_prefix, JobInfo, Launcher};
use crate::error::{ConfigError, SegmentError, StartError};
use crate::sync::{AtomicBool, Ordering};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a [`Watch`] looks at the peers' files.
pub(crate) const POLL: Duration = Duration::from_millis(20);

/// The launcher in words, for the errors.
fn launcher_words(l: Launcher) -> &'static str {
    match l {
        Launcher::Fmrun => "fmrun",
        Launcher::Slurm => "srun",
        Launcher::OpenMpi => "Open MPI's mpirun",
        Launcher::Pmi => "the PMI launcher",
        Launcher::Pmix => "the PMIx server",
        Launcher::Threads => "the thread launcher",
        Launcher::Singleton => "nobody",
    }
}

/// What would carry the wire-up of a multi-host job, for the errors.
fn what_to_do(job: &JobInfo) -> String {
    let pmix = if super::pmix::server_present() {
        match super::pmix_library_version() {
            Ok(_) => String::new(),
            Err(e) => format!("{e}; "),
        }
    } else {
        String::new()
    };
    let launcher = match job.launcher {
        Launcher::Slurm => {
            "start with srun --mpi=pmix or --mpi=pmi2 (this step has no PMI: srun --mpi=none)"
        }
        Launcher::OpenMpi => "install the PMIx library (apt-get install libpmix2)",
        _ => "start under mpirun, srun --mpi=pmix or --mpi=pmi2, or MPICH's mpiexec",
    };
    format!(
        "{pmix}{launcher}; or set FASTMSG_ROOT=host:port (where rank 0 serves the rendezvous) and FASTMSG_SECRET on every rank"
    )
}

/// The error of a job whose ranks span hosts (`local size < size`) with
/// nothing to carry the wire-up: no PMIx server, no PMI socket, no
/// `FASTMSG_ROOT`.
pub(crate) fn no_wire_up(job: &JobInfo) -> ConfigError {
    ConfigError::NoWireUp {
        launcher: launcher_words(job.launcher),
        local: job.local_size,
        size: job.size,
        fix: what_to_do(job),
    }
}

/// The file in which `rank` of `job` announces its host identity.
fn who_file(dir: &Path, job: &str, rank: u32) -> PathBuf {
    dir.join(format!("{}~who.{rank}", job_file_prefix(job)))
}

/// Whether process `pid` exists (a file left by a dead process of an
/// earlier job with the same id is not a peer).
fn alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 sends nothing; it only checks the pid.
    #[allow(unsafe_code)]
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// A peer of `job` in `dir` whose host identity is not `job.host`, with
/// that identity.
fn disagreeing_peer(dir: &Path, job: &JobInfo) -> Option<(u32, String)> {
    let prefix = format!("{}~who.", job_file_prefix(&job.job));
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let name = entry.file_name();
        let Some(rank) = name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|r| r.parse::<u32>().ok())
        else {
            continue;
        };
        if rank == job.rank.0 || rank >= job.size {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let mut words = text.split_whitespace();
        let (Some(host), Some(pid)) = (words.next(), words.next().and_then(|p| p.parse().ok()))
        else {
            continue;
        };
        if host != job.host && alive(pid) {
            return Some((rank, host.to_owned()));
        }
    }
    None
}

/// Whether process `pid` has ended and waits only to be reaped by its
/// parent (it still answers `kill(pid, 0)`).
fn zombie(pid: i32) -> bool {
    // The state follows the command name, which is in parentheses.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Remove the announcements of `job` in `dir` whose writer is dead, so
/// that they mislead no later job with the same id: what a rank whose
/// start failed does on its way out (a peer killed during start-up could
/// not remove its own). One rule: a writer is dead when its lifeline said
/// so (`died`, a rank the caller learnt had died: its process may still
/// be ending, alive to a look at its pid), else when its process is gone
/// or a zombie.
pub(crate) fn remove_stale_announcements(dir: &Path, job: &str, died: Option<u32>) {
    let prefix = format!("{}~who.", job_file_prefix(job));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rank) = name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        let lifeline_says_dead = died.is_some_and(|d| rank == d.to_string());
        let pid = || {
            std::fs::read_to_string(entry.path()).ok().and_then(|t| {
                t.split_whitespace()
                    .nth(1)
                    .and_then(|p| p.parse::<i32>().ok())
            })
        };
        if lifeline_says_dead || pid().is_some_and(|p| p > 0 && (!alive(p) || zombie(p))) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn disagree(job: &JobInfo, other: u32, other_host: String) -> ConfigError {
    ConfigError::HostsDisagree {
        launcher: launcher_words(job.launcher),
        size: job.size,
        rank: job.rank.0,
        host: job.host.clone(),
        other,
        other_host,
        fix: format!("{}; or unset FASTMSG_HOST", what_to_do(job)),
    }
}

struct Running {
    file: PathBuf,
    job: String,
    flag: Arc<AtomicBool>,
    found: Arc<Mutex<Option<ConfigError>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// This rank's announcement and the look at its peers' while the shared
/// segment waits for them (see the module documentation). Dropping it
/// stops the look and removes the announcement.
pub(crate) struct Watch(Option<Running>);

impl Watch {
    /// Announce this rank's host identity in `dir` and start looking at
    /// the peers' announcements, for a job all of whose ranks the launcher
    /// puts on this host (`shm_only`: no network); for any other job, or a
    /// one-rank job, or ranks that are threads, a watch that does nothing.
    ///
    /// # Errors
    /// [`ConfigError::HostsDisagree`] if a peer has already announced
    /// another host identity.
    pub(crate) fn start(dir: &Path, job: &JobInfo, shm_only: bool) -> Result<Watch, ConfigError> {
        if !shm_only || job.size <= 1 || job.launcher == Launcher::Threads {
            return Ok(Watch(None));
        }
        let file = who_file(dir, &job.job, job.rank.0);
        let tmp = file.with_extension("tmp");
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            writeln!(f, "{} {}", job.host, std::process::id())?;
            std::fs::rename(&tmp, &file)
        };
        if let Err(e) = write() {
            // Only the early diagnosis is lost; the start-up goes on, and
            // nothing is left behind (a full directory fails the write
            // after the file exists).
            let _ = std::fs::remove_file(&tmp);
            tracing::debug!("could not announce the host identity in {tmp:?}: {e}");
            return Ok(Watch(None));
        }
        let mut watch = Watch(Some(Running {
            file,
            job: job.job.clone(),
            flag: Arc::new(AtomicBool::new(false)),
            found: Arc::new(Mutex::new(None)),
            stop: Arc::new(AtomicBool::new(false)),
            thread: None,
        }));
        if let Some((other, host)) = disagreeing_peer(dir, job) {
            return Err(disagree(job, other, host));
        }
        let r = watch.0.as_mut().expect("set above");
        let (flag, found, stop) = (r.flag.clone(), r.found.clone(), r.stop.clone());
        let (dir, job) = (dir.to_owned(), job.clone());
        r.thread = std::thread::Builder::new()
            .name("fastmsg-layout".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some((other, host)) = disagreeing_peer(&dir, &job) {
                        *found.lock().unwrap_or_else(|p| p.into_inner()) =
                            Some(disagree(&job, other, host));
                        flag.store(true, Ordering::Relaxed);
                        return;
                    }
                    std::thread::park_timeout(POLL);
                }
            })
            .ok();
        Ok(watch)
    }

    /// The flag the segment's wait should give up on, if this watch runs.
    pub(crate) fn flag(&self) -> Option<&AtomicBool> {
        self.0.as_ref().map(|r| &*r.flag)
    }

    /// `e`, or the disagreement found if the wait gave up because of it.
    pub(crate) fn explain(&self, e: StartError) -> StartError {
        let Some(r) = &self.0 else { return e };
        // The wait failed: a peer that was killed during start-up cannot
        // remove its own announcement, so whoever learns of it does.
        if let Some(dir) = r.file.parent() {
            remove_stale_announcements(dir, &r.job, None);
        }
        if !matches!(e, StartError::Segment(SegmentError::Aborted { .. })) {
            return e;
        }
        match r.found.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(found) => found.into(),
            None => e,
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(r) = &mut self.0 {
            r.stop.store(true, Ordering::Relaxed);
            if let Some(t) = r.thread.take() {
                t.thread().unpark();
                let _ = t.join();
            }
            let _ = std::fs::remove_file(&r.file);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(rank: u32, host: &str) -> JobInfo {
        let mut j = JobInfo::single_host(rank, 4, "layout-test", Launcher::OpenMpi);
        j.host = host.into();
        j
    }

    #[test]
    fn a_peer_with_another_host_identity_is_found_at_once() {
        let dir = std::env::temp_dir().join(format!("fastmsg-layout-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = Watch::start(&dir, &job(0, "a"), true).unwrap();
        let a1 = Watch::start(&dir, &job(1, "a"), true).unwrap();
        let e = Watch::start(&dir, &job(2, "b"), true)
            .err()
            .expect("rank 2 disagrees");
        let text = e.to_string();
        assert!(matches!(e, ConfigError::HostsDisagree { .. }), "{text}");
        assert!(text.contains("\"b\"") && text.contains("\"a\""), "{text}");
        // The ranks already waiting see rank 2 (its file stays until its
        // watch is dropped; here the failed start left none, so announce).
        let b = Watch::start(&dir, &job(3, "b"), false).unwrap();
        assert!(b.flag().is_none(), "a job on the network does not watch");
        drop(b);
        std::fs::write(
            who_file(&dir, "layout-test", 3),
            format!("b {}\n", std::process::id()),
        )
        .unwrap();
        for w in [&a, &a1] {
            let flag = w.flag().expect("watching");
            let t0 = std::time::Instant::now();
            while !flag.load(Ordering::Relaxed) {
                assert!(t0.elapsed() < Duration::from_secs(20), "never noticed");
                std::thread::sleep(POLL);
            }
            let e = w.explain(SegmentError::Aborted { path: "seg".into() }.into());
            assert!(e.to_string().contains("FASTMSG_HOST"), "{e}");
        }
        drop((a, a1));
        let _ = std::fs::remove_file(who_file(&dir, "layout-test", 3));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "files left");
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn agreeing_ranks_and_dead_announcers_are_not_disagreements() {
        let dir = std::env::temp_dir().join(format!("fastmsg-layout2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A file of a dead process (pid far above pid_max) with another host.
        std::fs::write(who_file(&dir, "layout-test", 3), "z 2147483646\n").unwrap();
        let a = Watch::start(&dir, &job(0, "a"), true).unwrap();
        let a1 = Watch::start(&dir, &job(1, "a"), true).unwrap();
        std::thread::sleep(POLL * 5);
        assert!(!a.flag().unwrap().load(Ordering::Relaxed));
        assert!(!a1.flag().unwrap().load(Ordering::Relaxed));
        drop((a, a1));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
