//! The host's CPU facts that the `auto` wait policy decides by.
//!
//! `nproc` (the affinity mask) alone misleads both ways: under `mpirun
//! --bind-to core` or `srun --cpu-bind=cores` each rank's mask holds one
//! CPU although every rank has a core of its own, and a mask inherited by
//! all ranks of `taskset -c 0-1 fmrun -n 4` holds two CPUs shared by four
//! ranks. [`Cpus::probe`] reads three facts — the CPUs online, the job's
//! cgroup `cpuset` (Slurm and containers confine jobs this way), and this
//! process's affinity mask (`sched_getaffinity`) — and
//! [`Cpus::oversubscribed`] decides:
//!
//! - A mask narrower than the CPUs the host gives the job, under a launcher
//!   that binds each rank on its own (Slurm, Open MPI, PMI, PMIx), and small
//!   enough that every local rank can have one like it, is taken to be
//!   this rank's own share: oversubscribed when the rank's threads outnumber
//!   its CPUs.
//! - Otherwise the mask is shared by the host's ranks (fmrun, threads, a
//!   singleton, or masks too wide to be disjoint): oversubscribed when the
//!   host's ranks' threads outnumber the CPUs in it.

#![allow(unsafe_code)]

use crate::bootstrap::Launcher;

/// What [`Cpus::probe`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cpus {
    /// Logical CPUs online (`sysconf(_SC_NPROCESSORS_ONLN)`).
    pub online: u32,
    /// CPUs in this process's cgroup `cpuset.cpus.effective` (cgroup v2),
    /// if readable.
    pub cpuset: Option<u32>,
    /// CPUs in this process's affinity mask (`sched_getaffinity`).
    pub affinity: u32,
}

/// How [`Cpus::oversubscribed`] read the affinity mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaskReading {
    /// The mask is this rank's own (the launcher binds ranks).
    PerRank,
    /// The mask is shared by all ranks of the host.
    Shared,
}

impl Cpus {
    /// Read the facts for this process.
    pub fn probe() -> Cpus {
        // SAFETY: sysconf has no memory-safety preconditions.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        let online = u32::try_from(online).unwrap_or(1).max(1);
        Cpus {
            online,
            cpuset: cgroup_cpuset(),
            affinity: affinity_count().unwrap_or(online),
        }
    }

    /// CPUs the host gives this job: the cgroup's cpuset, else all online.
    pub fn host(&self) -> u32 {
        self.cpuset
            .map_or(self.online, |c| c.min(self.online))
            .max(1)
    }

    /// How the affinity mask is read for a job of `local_ranks` ranks on
    /// this host started by `launcher` (see the module docs).
    pub fn reading(&self, local_ranks: u32, launcher: Launcher) -> MaskReading {
        let binds = matches!(
            launcher,
            Launcher::Slurm | Launcher::OpenMpi | Launcher::Pmi | Launcher::Pmix
        );
        let narrowed = self.affinity < self.host();
        let fits = u64::from(self.affinity) * u64::from(local_ranks) <= u64::from(self.host());
        if binds && narrowed && fits {
            MaskReading::PerRank
        } else {
            MaskReading::Shared
        }
    }

    /// Whether `local_ranks` ranks of `threads_per_rank` busy threads each
    /// have fewer CPUs than threads.
    pub fn oversubscribed(
        &self,
        local_ranks: u32,
        threads_per_rank: u32,
        launcher: Launcher,
    ) -> bool {
        match self.reading(local_ranks, launcher) {
            MaskReading::PerRank => threads_per_rank > self.affinity,
            MaskReading::Shared => {
                u64::from(local_ranks) * u64::from(threads_per_rank)
                    > u64::from(self.affinity.min(self.host()))
            }
        }
    }
}

/// CPUs in this process's affinity mask.
fn affinity_count() -> Option<u32> {
    // SAFETY: a zeroed cpu_set_t is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is us.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return None;
    }
    // SAFETY: `set` was filled in by the kernel above.
    let n = unsafe { libc::CPU_COUNT(&set) };
    u32::try_from(n).ok().filter(|&n| n > 0)
}

/// CPUs in the cgroup v2 `cpuset.cpus.effective` of this process.
fn cgroup_cpuset() -> Option<u32> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let file = format!("/sys/fs/cgroup{}/cpuset.cpus.effective", path.trim_end());
    let list = std::fs::read_to_string(file).ok()?;
    parse_cpu_list(list.trim())
}

/// Count the CPUs in a kernel CPU list such as `0-3,8,10-11`.
pub(crate) fn parse_cpu_list(s: &str) -> Option<u32> {
    if s.is_empty() {
        return None;
    }
    let mut n: u32 = 0;
    for part in s.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?),
            None => {
                let a = part.trim().parse::<u32>().ok()?;
                (a, a)
            }
        };
        n = n.checked_add(b.checked_sub(a)?.checked_add(1)?)?;
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8,10-11"), Some(7));
        assert_eq!(parse_cpu_list("5"), Some(1));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn bound_ranks_under_mpirun_are_not_oversubscribed() {
        // mpirun --bind-to core, 4 ranks on a 16-CPU host: nproc = 1 each.
        let c = Cpus {
            online: 16,
            cpuset: None,
            affinity: 1,
        };
        assert_eq!(c.reading(4, Launcher::OpenMpi), MaskReading::PerRank);
        assert!(!c.oversubscribed(4, 1, Launcher::OpenMpi));
        // A NIC thread beside each rank on its single core is.
        assert!(c.oversubscribed(4, 2, Launcher::OpenMpi));
        // 32 ranks cannot each have their own CPU of 16.
        assert!(c.oversubscribed(32, 1, Launcher::Slurm));
    }

    #[test]
    fn a_mask_fmrun_passes_on_is_shared() {
        // taskset -c 0-1 fmrun -n 4 on a 16-CPU host.
        let c = Cpus {
            online: 16,
            cpuset: None,
            affinity: 2,
        };
        assert_eq!(c.reading(4, Launcher::Fmrun), MaskReading::Shared);
        assert!(c.oversubscribed(4, 1, Launcher::Fmrun));
        assert!(!c.oversubscribed(2, 1, Launcher::Fmrun));
    }

    #[test]
    fn the_cgroup_cpuset_bounds_the_host() {
        // A Slurm job given 4 of 64 CPUs, unbound ranks.
        let c = Cpus {
            online: 64,
            cpuset: Some(4),
            affinity: 4,
        };
        assert_eq!(c.host(), 4);
        assert_eq!(c.reading(8, Launcher::Slurm), MaskReading::Shared);
        assert!(c.oversubscribed(8, 1, Launcher::Slurm));
        assert!(!c.oversubscribed(4, 1, Launcher::Slurm));
    }

    #[test]
    fn probe_reads_this_machine() {
        let c = Cpus::probe();
        assert!(c.online >= 1 && c.affinity >= 1);
        assert!(c.affinity <= c.online, "{c:?}");
        let std_count = std::thread::available_parallelism().map_or(0, |n| n.get() as u32);
        // std also applies cgroup quotas, so it may be lower, never higher.
        assert!(std_count <= c.affinity, "{c:?} vs {std_count}");
    }
}
