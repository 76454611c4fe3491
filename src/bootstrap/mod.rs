//! Who am I in which job: rank, size, the ranks on this host, the job id.
//!
//! Read from the launcher's environment ([`JobInfo::from_env`]): `fmrun`
//! (`FASTMSG_*`), Slurm (`SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`,
//! `SLURM_NTASKS_PER_NODE`…), Open MPI (`OMPI_COMM_WORLD_*`) or PMI
//! (`PMI_RANK`, `PMI_SIZE`). [`threads`] runs several ranks as threads of
//! one process, for tests and examples.

mod env;
pub mod threads;

pub use env::{JobInfo, Launcher};
