//! PMIx: a rank started by a PMIx server — Open MPI's `mpirun`, `srun
//! --mpi=pmix`, `prterun` — takes its rank, the job size and its local
//! rank and local size from PMIx ([`job_from_env`]); a job that needs the
//! network then runs the wire-up (`kvs`) over PMIx put/commit/fence/get
//! ([`Store`]) instead of the rendezvous at `FASTMSG_ROOT`.
//!
//! The PMIx client library is loaded at run time (`ffi`), only when the
//! environment says a PMIx server started this process ([`server_present`]):
//! every build speaks PMIx, and none needs PMIx to build or to run
//! elsewhere.

mod client;
mod ffi;
#[cfg(test)]
mod layout_tests;

use super::kvs::KeyValue;
use super::{host_identity, JobInfo, Launcher};
use crate::error::{ConfigError, PmixError, StartError};
use crate::id::Rank;
use std::ffi::CString;
use std::time::Duration;

/// Whether the environment says a PMIx server started this process: a
/// PMIx rank and namespace (`PMIX_RANK`, `PMIX_NAMESPACE`), or the
/// server's address (`PMIX_SERVER_URI`, `PMIX_SERVER_URI2`, …).
pub(crate) fn server_present() -> bool {
    (std::env::var_os("PMIX_RANK").is_some() && std::env::var_os("PMIX_NAMESPACE").is_some())
        || std::env::vars_os()
            .any(|(k, _)| k.to_str().is_some_and(|k| k.starts_with("PMIX_SERVER_URI")))
}

/// The version of the PMIx library, loaded if it is not yet (for
/// `fastmsg-info`).
///
/// # Errors
/// [`PmixError::NoLibrary`] where it is not installed.
pub fn library_version() -> Result<String, PmixError> {
    client::version()
}

/// The job as PMIx describes it, when this process was started by a PMIx
/// server ([`server_present`]); `None` otherwise.
///
/// # Errors
/// [`ConfigError::Pmix`] if the library is not installed
/// ([`PmixError::NoLibrary`]), or the server cannot be reached or lacks a
/// key.
pub(crate) fn job_from_env() -> Result<Option<JobInfo>, ConfigError> {
    if !server_present() {
        return Ok(None);
    }
    let s = client::session()?;
    let job = ffi::RANK_WILDCARD;
    Ok(Some(JobInfo {
        rank: Rank(s.rank()),
        size: s.get_u32(job, ffi::PMIX_JOB_SIZE)?,
        local_rank: s.get_u32(s.rank(), ffi::PMIX_LOCAL_RANK)?,
        local_size: s.get_u32(job, ffi::PMIX_LOCAL_SIZE)?,
        job: super::env::sanitize(&format!("pmix-{}", s.namespace())),
        host: host_identity(),
        launcher: Launcher::Pmix,
    }))
}

/// The PMIx session as the wire-up's key-value store: keys are per rank
/// in PMIx, so they go in as they are.
pub(crate) struct Store(&'static client::Session);

/// This process's PMIx session (connected by [`job_from_env`]).
///
/// # Errors
/// [`StartError::Pmix`] if `PMIx_Init` failed.
pub(crate) fn store() -> Result<Store, StartError> {
    Ok(Store(client::session()?))
}

fn cstr(key: &str) -> Result<CString, StartError> {
    CString::new(key).map_err(|_| {
        PmixError::Value {
            call: "a key".into(),
            what: format!("{key:?} holds a NUL byte"),
        }
        .into()
    })
}

impl KeyValue for Store {
    fn put(&mut self, key: &str, value: &str) -> Result<(), StartError> {
        Ok(self.0.put_str(&cstr(key)?, value)?)
    }

    fn fence(&mut self, timeout: Duration) -> Result<(), StartError> {
        self.0.commit()?;
        Ok(self.0.fence(timeout)?)
    }

    fn get(&mut self, rank: u32, key: &str) -> Result<String, StartError> {
        Ok(self.0.get_str(rank, &cstr(key)?)?)
    }
}
