//! Who am I in which job: rank, size, the ranks on this host, the job id.
//!
//! Read from the launcher's environment ([`JobInfo::from_env`]): `fmrun`
//! (`FASTMSG_*`), Slurm (`SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`,
//! `SLURM_NTASKS_PER_NODE`…), Open MPI (`OMPI_COMM_WORLD_*`) or PMI
//! (`PMI_RANK`, `PMI_SIZE`); without any, a one-rank job (see `manners`). Jobs spanning hosts meet at a [`rendezvous`]
//! served by rank 0 at `FASTMSG_ROOT`, every connection authenticated with
//! the job secret (`auth`). [`threads`] runs several ranks as threads of
//! one process, for tests and examples.

pub(crate) mod auth;
mod env;
pub(crate) mod gate;
pub(crate) mod hosts;
mod manners;
pub mod rendezvous;
pub mod secret;
pub mod threads;

#[cfg(test)]
mod startup_tests;

pub use env::{host_identity, JobInfo, Launcher};

/// A job id made file-name safe, as [`JobInfo`] keeps it (and as it
/// appears in the names of the job's files, see
/// [`crate::transport::shm::segment::job_file_prefix`]).
pub fn sanitize_job_id(job: &str) -> String {
    env::sanitize(job)
}
