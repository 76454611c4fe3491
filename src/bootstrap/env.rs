//! Job identity from launcher environment variables.

use crate::error::ConfigError;
use crate::id::Rank;

/// Which launcher started this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// `fmrun` (or a script setting `FASTMSG_RANK` …).
    Fmrun,
    /// Slurm's `srun`.
    Slurm,
    /// Open MPI's `mpirun`.
    OpenMpi,
    /// A PMI-1 launcher (MPICH's hydra and friends).
    Pmi,
    /// A PMIx server (`mpirun`, `srun --mpi=pmix`, `prterun`), spoken to
    /// through the PMIx library (loaded at run time).
    Pmix,
    /// [`crate::threads`]: ranks are threads of one process.
    Threads,
    /// No launcher: a one-rank job started by hand (an MPI singleton).
    Singleton,
}

/// A rank's place in the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobInfo {
    /// This rank.
    pub rank: Rank,
    /// Ranks in the job.
    pub size: u32,
    /// This rank's index among the ranks on its host.
    pub local_rank: u32,
    /// Ranks on this host.
    pub local_size: u32,
    /// Job id: names the shared segment; file-name safe.
    pub job: String,
    /// Host key: distinguishes hosts that share `/dev/shm` (namespaces).
    pub host: String,
    /// Who started us.
    pub launcher: Launcher,
}

/// `name` if set and not empty: `FASTMSG_*` (fmrun's) and the other
/// launchers' variables alike, read through the settings table.
fn var(name: &'static str) -> Option<String> {
    crate::settings::var(name).ok().filter(|v| !v.is_empty())
}

fn num(name: &'static str) -> Result<Option<u32>, ConfigError> {
    var(name)
        .map(|v| {
            v.trim().parse::<u32>().map_err(|e| ConfigError::BadEnv {
                var: name,
                value: v.clone(),
                why: e.to_string(),
            })
        })
        .transpose()
}

fn need(name: &'static str) -> Result<u32, ConfigError> {
    num(name)?.ok_or(ConfigError::BadEnv {
        var: name,
        value: String::new(),
        why: "missing".into(),
    })
}

/// This host's identity: `FASTMSG_HOST` if set (to tell apart "hosts"
/// that share a kernel, such as network namespaces), else the host name.
/// File-name safe: it is part of the shared segment's name.
pub fn host_identity() -> String {
    if let Some(h) = var("FASTMSG_HOST") {
        return sanitize(&h);
    }
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is valid for its length; gethostname NUL-terminates
    // within it on success.
    #[allow(unsafe_code)]
    let r = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
    let name = if r == 0 {
        let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..n]).into_owned()
    } else {
        String::new()
    };
    if name.is_empty() {
        "0".into()
    } else {
        sanitize(&name)
    }
}

/// Keep only characters that are safe in a file name, at most
/// [`SAFE_LEN`] of them. An id that had to change (an unsafe character
/// replaced, or cut short) ends with a hash of the whole original, so
/// that two ids differing only where the change was (`a:b` and `a_b`, or
/// past the cut) stay different: two jobs of one user on one host must
/// never share a segment name.
pub(crate) fn sanitize(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.';
    if s.len() <= SAFE_LEN && s.chars().all(safe) {
        return s.to_owned();
    }
    let kept: String = s
        .chars()
        .map(|c| if safe(c) { c } else { '_' })
        .take(SAFE_LEN - 17)
        .collect();
    format!("{kept}-{:016x}", fnv1a(s.as_bytes()))
}

/// The longest file-name safe id [`sanitize`] makes.
const SAFE_LEN: usize = 64;

/// FNV-1a, 64 bits: the same on every rank and build (unlike std's
/// hasher, whose algorithm may change between releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl JobInfo {
    /// A single-host job of `size` ranks (all local).
    pub fn single_host(rank: u32, size: u32, job: &str, launcher: Launcher) -> JobInfo {
        JobInfo {
            rank: Rank(rank),
            size,
            local_rank: rank,
            local_size: size,
            job: sanitize(job),
            host: "0".into(),
            launcher,
        }
    }

    /// Read the launcher's environment.
    ///
    /// # Errors
    /// [`ConfigError::BadEnv`] if a variable is malformed or inconsistent;
    /// [`ConfigError::SlurmOutsideStep`] inside a Slurm allocation but
    /// outside a step (no `srun`). With no launcher's variables at all the
    /// process is a one-rank job ([`Launcher::Singleton`]).
    pub fn from_env() -> Result<JobInfo, ConfigError> {
        let info = if let Some(rank) = num("FASTMSG_RANK")? {
            let size = need("FASTMSG_SIZE")?;
            let job = var("FASTMSG_JOB").ok_or(ConfigError::BadEnv {
                var: "FASTMSG_JOB",
                value: String::new(),
                why: "missing (fmrun sets it)".into(),
            })?;
            JobInfo {
                rank: Rank(rank),
                size,
                local_rank: num("FASTMSG_LOCAL_RANK")?.unwrap_or(rank),
                local_size: num("FASTMSG_LOCAL_SIZE")?.unwrap_or(size),
                job: sanitize(&job),
                host: host_identity(),
                launcher: Launcher::Fmrun,
            }
        } else if let Some(info) = super::pmix::job_from_env()? {
            info
        } else if let Some(rank) = num("OMPI_COMM_WORLD_RANK")? {
            let job = var("OMPI_MCA_orte_ess_jobid")
                .or_else(|| var("OMPI_MCA_ess_base_jobid"))
                .or_else(|| var("PMIX_NAMESPACE"))
                .unwrap_or_else(|| "ompi".into());
            JobInfo {
                rank: Rank(rank),
                size: need("OMPI_COMM_WORLD_SIZE")?,
                local_rank: need("OMPI_COMM_WORLD_LOCAL_RANK")?,
                local_size: need("OMPI_COMM_WORLD_LOCAL_SIZE")?,
                job: sanitize(&format!("ompi-{job}")),
                host: host_identity(),
                launcher: Launcher::OpenMpi,
            }
        } else if let Some(rank) = num("SLURM_PROCID")? {
            super::manners::slurm_step_check()?;
            let size = need("SLURM_NTASKS")?;
            let local_rank = need("SLURM_LOCALID")?;
            // This node's entry of the per-step list (SLURM_NTASKS_PER_NODE,
            // the allocation's, if the step's is missing): "4", "4(x2)",
            // "4,6", "2(x3),5" (see `slurm_tasks`).
            let (list_var, list) = match var("SLURM_STEP_TASKS_PER_NODE") {
                Some(v) => ("SLURM_STEP_TASKS_PER_NODE", Some(v)),
                None => ("SLURM_NTASKS_PER_NODE", var("SLURM_NTASKS_PER_NODE")),
            };
            let per_node = match list {
                Some(list) => {
                    let node = num("SLURM_NODEID")?.unwrap_or(0);
                    super::slurm_tasks::tasks_on_node(&list, node).map_err(|why| {
                        ConfigError::BadEnv {
                            var: list_var,
                            value: list.clone(),
                            why,
                        }
                    })?
                }
                None => size,
            };
            let job = format!(
                "slurm-{}-{}",
                var("SLURM_JOB_ID").unwrap_or_else(|| "0".into()),
                var("SLURM_STEP_ID").unwrap_or_else(|| "0".into())
            );
            JobInfo {
                rank: Rank(rank),
                size,
                local_rank,
                local_size: per_node,
                job: sanitize(&job),
                host: host_identity(),
                launcher: Launcher::Slurm,
            }
        } else if let Some(rank) = num("PMI_RANK")? {
            let size = need("PMI_SIZE")?;
            JobInfo {
                rank: Rank(rank),
                size,
                local_rank: num("PMI_LOCAL_RANK")?
                    .or(num("MPI_LOCALRANKID")?)
                    .unwrap_or(rank),
                local_size: num("PMI_LOCAL_SIZE")?
                    .or(num("MPI_LOCALNRANKS")?)
                    .unwrap_or(size),
                job: sanitize(&format!(
                    "pmi-{}",
                    var("PMI_KVSNAME")
                        .or_else(|| var("PMI_JOBID"))
                        .unwrap_or_else(|| "0".into())
                )),
                host: host_identity(),
                launcher: Launcher::Pmi,
            }
        } else {
            super::manners::singleton()
        };
        info.validate()?;
        Ok(info)
    }

    /// Check that the numbers are consistent.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the inconsistency.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |why: String| {
            Err(ConfigError::Invalid {
                what: "job layout",
                why,
            })
        };
        if self.size == 0 {
            return bad("the job has 0 ranks".into());
        }
        if self.rank.0 >= self.size {
            return bad(format!(
                "rank {} is not below size {}",
                self.rank, self.size
            ));
        }
        if self.local_size == 0 || self.local_size > self.size {
            return bad(format!(
                "{} local ranks in a job of {}",
                self.local_size, self.size
            ));
        }
        if self.local_rank >= self.local_size {
            return bad(format!(
                "local rank {} is not below local size {}",
                self.local_rank, self.local_size
            ));
        }
        if self.job.is_empty() {
            return bad("empty job id".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::sanitize;

    #[test]
    fn safe_ids_are_kept_and_changed_ones_stay_apart() {
        assert_eq!(sanitize("slurm-123-0"), "slurm-123-0");
        let a = sanitize("ompi-1234:5");
        let b = sanitize("ompi-1234_5");
        assert_eq!(b, "ompi-1234_5");
        assert_ne!(a, b);
        assert!(a.starts_with("ompi-1234_5-"), "{a}");
        let long = "p".repeat(70);
        let (x, y) = (sanitize(&format!("{long}1")), sanitize(&format!("{long}2")));
        assert_ne!(x, y);
        for id in [&a, &x, &y] {
            assert!(id.len() <= 64, "{id}");
            assert!(id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'));
        }
        // The same input, the same id (every rank computes it alone).
        assert_eq!(sanitize("my job/7"), sanitize("my job/7"));
    }
}
