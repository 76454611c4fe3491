//! Why an endpoint could not be configured: [`ConfigError`] — a setting
//! out of range or unknown, a launcher's environment that contradicts
//! itself — naming the setting or variable and what it accepts.

use super::PmixError;
use std::path::PathBuf;

/// The job's configuration (environment or builder) is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No launcher environment was found. (`JobInfo::from_env` no longer
    /// returns it: a program started by hand is a one-rank job.)
    #[error("no job environment found (looked for {looked}); start the program with `fmrun -n N prog`, srun or mpirun")]
    NoLauncher {
        /// The variables looked for.
        looked: &'static str,
    },
    /// A variable is present but unusable.
    #[error("environment variable {var}={value:?} is invalid: {why}")]
    BadEnv {
        /// Variable name.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        why: String,
    },
    /// A setting is out of range.
    #[error("invalid setting {what}: {why}")]
    Invalid {
        /// Which setting.
        what: &'static str,
        /// What is wrong.
        why: String,
    },
    /// The open-file limit (`RLIMIT_NOFILE`) is below what a rank of
    /// this job needs for its network connections, and the hard limit
    /// does not allow raising it.
    #[error("a rank of this {size}-rank job needs about {need} open files ({peers} network connections and {spare} for everything else), but RLIMIT_NOFILE allows {hard} (soft limit {soft}): raise the hard limit (`ulimit -Hn`, `nofile` in limits.conf, `LimitNOFILE` of a systemd unit) or start fewer ranks")]
    TooFewDescriptors {
        /// Ranks in the job.
        size: u32,
        /// Network connections a rank may hold (every other rank).
        peers: u64,
        /// Descriptors kept for everything else.
        spare: u64,
        /// Descriptors needed in all.
        need: u64,
        /// The soft limit found.
        soft: u64,
        /// The hard limit found.
        hard: u64,
    },
    /// The secret file is unusable (readable by others, not ours, empty…).
    #[error("secret file {path}: {why}")]
    SecretFile {
        /// The file.
        path: PathBuf,
        /// What is wrong (owner and mode when they are the problem).
        why: String,
    },
    /// Settings ask for more memory than this host has (or than 64-bit
    /// arithmetic can count: `asked` is then `None`).
    #[error("{what} ask for {} of memory per rank, but this host has {available} bytes: lower them", match asked { Some(a) => format!("{a} bytes"), None => "more than 2^64 bytes".to_owned() })]
    TooMuchMemory {
        /// The settings concerned.
        what: &'static str,
        /// Bytes asked for (`None`: beyond 64-bit arithmetic).
        asked: Option<u64>,
        /// Physical memory of this host, bytes.
        available: u64,
    },
    /// Started inside a Slurm allocation but not as a job step (`srun`).
    #[error("started inside Slurm job {job} but not by srun (SLURM_JOB_ID is set, SLURM_STEP_ID is not): SLURM_PROCID={procid:?} and SLURM_NTASKS={ntasks:?} describe the batch shell, not this program's ranks; start it with `srun prog` (or `fmrun -n N prog` for ranks on this node)")]
    SlurmOutsideStep {
        /// `SLURM_JOB_ID`.
        job: String,
        /// The batch shell's `SLURM_PROCID`.
        procid: String,
        /// The batch shell's `SLURM_NTASKS`.
        ntasks: String,
    },
    /// The PMIx server (mpirun, srun --mpi=pmix) refused or failed a call.
    #[error(transparent)]
    Pmix(#[from] PmixError),
    /// The job's ranks span hosts and nothing carries the wire-up between
    /// them: no PMIx server, no PMI socket, no `FASTMSG_ROOT`.
    #[error("{launcher} puts {local} of the job's {size} ranks on this host, the others elsewhere, and nothing can carry the addresses between hosts (no PMIx server, no PMI socket at PMI_FD, no FASTMSG_ROOT): {fix}")]
    NoWireUp {
        /// Who started the job.
        launcher: &'static str,
        /// Ranks on this host, as the launcher says.
        local: u32,
        /// Ranks in the job.
        size: u32,
        /// What to set or install.
        fix: String,
    },
    /// The launcher puts every rank on this host, but the ranks' host
    /// identities (`FASTMSG_HOST`, else the host name) differ.
    #[error("{launcher} says all {size} ranks of the job are on this host, but their host identities differ: rank {rank} is on {host:?}, rank {other} on {other_host:?} (FASTMSG_HOST, else the host name), and nothing can tell which ranks share memory: {fix}")]
    HostsDisagree {
        /// Who started the job.
        launcher: &'static str,
        /// Ranks in the job.
        size: u32,
        /// This rank.
        rank: u32,
        /// Its host identity.
        host: String,
        /// A rank with another identity.
        other: u32,
        /// That identity.
        other_host: String,
        /// What to set or install.
        fix: String,
    },
}
