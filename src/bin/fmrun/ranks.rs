//! Starting, signalling and reaping the rank processes.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Make the rank die with fmrun: `PR_SET_PDEATHSIG(SIGKILL)` in the child
/// before `exec` (the setting survives exec), and if fmrun is already
/// gone by then, die at once.
pub fn die_with_parent(cmd: &mut Command) {
    // SAFETY: getpid is async-signal-safe; the pid is taken in the parent.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the child between fork and exec and only
    // makes async-signal-safe calls (prctl, getppid, _exit), allocating
    // nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(137); // fmrun died before the prctl
            }
            Ok(())
        });
    }
}

/// Signal every rank still running.
pub fn kill_all(pids: &[(u32, libc::pid_t)], sig: libc::c_int) {
    for &(_, pid) in pids {
        // SAFETY: signalling our own children; a reaped pid is not in the
        // list.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// Reap one child; `block` waits. Returns (pid, exit code) or None.
pub fn reap(block: bool) -> Option<(libc::pid_t, i32)> {
    let mut status = 0;
    // SAFETY: waitpid on our own children with a valid status pointer.
    let pid = unsafe { libc::waitpid(-1, &mut status, if block { 0 } else { libc::WNOHANG }) };
    if pid <= 0 {
        return None;
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        1
    };
    Some((pid, code))
}
