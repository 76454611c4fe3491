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

/// How a rank ended, and how fmrun words it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ending {
    /// The status fmrun returns for it: the exit status, or 128 + n for
    /// a rank killed by signal n (as a shell reports it).
    pub code: i32,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
}

impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.signal {
            Some(sig) => write!(
                f,
                "was killed by signal {sig} ({}; status {})",
                signal_name(sig),
                self.code
            ),
            None => write!(f, "exited with status {}", self.code),
        }
    }
}

/// The usual name of signal `sig`.
fn signal_name(sig: i32) -> String {
    // SAFETY: strsignal returns a pointer to a NUL-terminated string that
    // stays valid until the next call; it is copied at once (fmrun calls
    // it from one thread).
    let p = unsafe { libc::strsignal(sig) };
    if p.is_null() {
        return format!("signal {sig}");
    }
    // SAFETY: non-null, NUL-terminated (above).
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

/// Reap one child; `block` waits. Returns its pid and how it ended, or
/// None.
pub fn reap(block: bool) -> Option<(libc::pid_t, Ending)> {
    let mut status = 0;
    // SAFETY: waitpid on our own children with a valid status pointer.
    let pid = unsafe { libc::waitpid(-1, &mut status, if block { 0 } else { libc::WNOHANG }) };
    if pid <= 0 {
        return None;
    }
    let ending = if libc::WIFEXITED(status) {
        Ending {
            code: libc::WEXITSTATUS(status),
            signal: None,
        }
    } else if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        Ending {
            code: 128 + sig,
            signal: Some(sig),
        }
    } else {
        Ending {
            code: 1,
            signal: None,
        }
    };
    Some((pid, ending))
}
