//! Removing every file the job may have left in the segment directory.

use fastmsg::internal::launcher::job_file_prefix;
use std::os::unix::fs::MetadataExt;

/// Remove this user's files of `job` (segments, rendezvous address files)
/// from `dir`: every name starting with [`job_file_prefix`], which applies
/// the same sanitising as the ranks do, whatever characters the id has.
pub fn remove_job_files(dir: &str, job: &str) {
    let prefix = job_file_prefix(job);
    // SAFETY: geteuid cannot fail and touches no memory.
    let me = unsafe { libc::geteuid() };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if !e.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        // Only our own files (the uid in the prefix says so, the owner
        // must agree): never another user's, even as root.
        if e.metadata().is_ok_and(|m| m.uid() == me) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}
