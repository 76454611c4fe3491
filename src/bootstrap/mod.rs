//! Who am I in which job: rank, size, the ranks on this host, the job id.
//!
//! Read from the launcher's environment ([`JobInfo::from_env`]): `fmrun`
//! (`FASTMSG_*`), Slurm (`SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`,
//! `SLURM_NTASKS_PER_NODE`…), Open MPI (`OMPI_COMM_WORLD_*`) or PMI
//! (`PMI_RANK`, `PMI_SIZE`), or a PMIx server (`mpirun`, `srun
//! --mpi=pmix`, `prterun`: `pmix`, whose library is loaded at run time);
//! without any, a one-rank job (see `manners`). A job that needs the
//! network wires up through the launcher's key-value store when there is
//! one (`kvs`: PMIx, or the socket at `PMI_FD` — PMI-2 under `srun
//! --mpi=pmi2`, PMI-1 under MPICH's `mpiexec`, `pmi2`), with no
//! `FASTMSG_ROOT` or secret to set; otherwise its ranks meet at a
//! `rendezvous` served by rank 0 at `FASTMSG_ROOT`. What the launcher
//! says and what the ranks find contradicting each other (`layout`) is an
//! error at once. Every connection is
//! authenticated with the job secret (`netio::auth`). The thread launcher
//! that runs several ranks in one process is `fastmsg::threads`, above the
//! endpoint.

mod addr;
mod env;
pub(crate) mod kvs;
pub(crate) mod layout;
mod manners;
pub(crate) mod pmi2;
pub(crate) mod pmix;
pub(crate) mod rendezvous;
pub mod secret;
mod slurm_tasks;

pub use env::{host_identity, JobInfo, Launcher};

/// A job id made file-name safe, as [`JobInfo`] keeps it (and as it
/// appears in the names of the job's files, see [`job_file_prefix`]).
pub fn sanitize_job_id(job: &str) -> String {
    env::sanitize(job)
}

/// The start of every file fastmsg makes for `job` in the segment
/// directory (the shared segment, the one-host rendezvous address):
/// `fastmsg-<euid>-<job>@` with `job` made file-name safe as [`JobInfo`]
/// makes it. `fmrun` removes the files with this prefix when its job ends.
/// The `@`, which a file-name safe job id never holds, ends the id: no
/// job's prefix starts another's (`a` and `a-b`; with a `-` there, job
/// `a` would own the files of job `a-b` on host `b-…`, `a-b`'s on host `…`).
pub fn job_file_prefix(job: &str) -> String {
    // SAFETY: geteuid cannot fail and touches no memory.
    #[allow(unsafe_code)]
    let euid = unsafe { libc::geteuid() };
    format!("fastmsg-{euid}-{}@", sanitize_job_id(job))
}

/// The version of the PMIx client library (`OpenPMIx 4.2.2` …), loaded
/// at run time as under a PMIx server.
///
/// # Errors
/// [`PmixError::NoLibrary`](crate::error::PmixError::NoLibrary) where it
/// is not installed.
pub fn pmix_library_version() -> Result<String, crate::error::PmixError> {
    pmix::library_version()
}

/// How a job that needs the network would exchange its addresses, in
/// words (`fastmsg-info`): the rendezvous at `root` when given, else the
/// launcher's key-value store (PMIx with its library's version, PMI-2 or
/// PMI-1 at `PMI_FD`), else none.
pub fn wire_up_source(job: &JobInfo, root: Option<&str>) -> String {
    if let Some(root) = root {
        return format!("rendezvous at FASTMSG_ROOT={root}");
    }
    if job.launcher == Launcher::Pmix {
        return match pmix::library_version() {
            Ok(v) => format!("PMIx ({v})"),
            Err(e) => format!("none: {e}"),
        };
    }
    if pmi2::available() {
        return format!("{} at PMI_FD", pmi2::Protocol::from_env().name());
    }
    if job.local_size == job.size {
        "none needed (every rank on this host); for a multi-host job start under a PMIx or PMI launcher, or set FASTMSG_ROOT".into()
    } else {
        layout::no_wire_up(job).to_string()
    }
}

/// A fresh job id: pid, time and a counter (unique on this host).
pub fn fresh_job_id() -> String {
    static COUNTER: crate::sync::AtomicU64 = crate::sync::AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "t{}-{:x}-{}",
        std::process::id(),
        t & 0xffff_ffff_ffff,
        COUNTER.fetch_add(1, crate::sync::Ordering::Relaxed)
    )
}
