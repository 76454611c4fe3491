//! What a launcher-less or half-launched start means (MPI's manners).
//!
//! - No launcher at all: the program runs as a one-rank job, like an MPI
//!   singleton ([`singleton`]), so `./prog` works by hand.
//! - Inside a Slurm allocation but outside a job step — a batch script or
//!   `salloc` shell that forgot `srun` — the shell's `SLURM_PROCID=0` and
//!   `SLURM_NTASKS=N` describe the batch step, not this program's ranks:
//!   believing them would make rank 0 wait the whole start-up time-out for
//!   N-1 ranks that were never started. [`slurm_step_check`] fails at once
//!   with [`ConfigError::SlurmOutsideStep`], naming `srun`.

use super::env::{host_identity, sanitize, JobInfo, Launcher};
use crate::error::ConfigError;
use crate::id::Rank;

/// Slurm's id of the batch step (`SLURM_BATCH_SCRIPT`, 0xfffffffe): the
/// batch shell is not a step that started ranks.
const BATCH_STEP: &str = "4294967294";

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// A one-rank job for a program started by hand. Its job id is unique to
/// the process, so two singletons on a host never meet.
pub(crate) fn singleton() -> JobInfo {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    JobInfo {
        rank: Rank(0),
        size: 1,
        local_rank: 0,
        local_size: 1,
        job: sanitize(&format!("single{}-{nanos:08x}", std::process::id())),
        host: host_identity(),
        launcher: Launcher::Singleton,
    }
}

/// Called when the Slurm variables are used: they must come from a job
/// step (`srun`), not from the batch shell.
///
/// # Errors
/// [`ConfigError::SlurmOutsideStep`] when `SLURM_JOB_ID` is set and no
/// step id (`SLURM_STEP_ID`, older `SLURM_STEPID`), or the batch step's.
pub(crate) fn slurm_step_check() -> Result<(), ConfigError> {
    let Some(job) = var("SLURM_JOB_ID").or_else(|| var("SLURM_JOBID")) else {
        return Ok(());
    };
    let step = var("SLURM_STEP_ID").or_else(|| var("SLURM_STEPID"));
    if step.as_deref().is_some_and(|s| s.trim() != BATCH_STEP) {
        return Ok(());
    }
    Err(ConfigError::SlurmOutsideStep {
        job,
        procid: var("SLURM_PROCID").unwrap_or_default(),
        ntasks: var("SLURM_NTASKS").unwrap_or_default(),
    })
}
