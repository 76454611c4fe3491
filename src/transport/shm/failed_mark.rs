//! The mark a local rank 0 leaves on the segment's name when it created
//! the file but could not make the segment (a full directory, most
//! often): the file's mode becomes owner-execute only, a mode that
//! creating with `0o600 & !umask` never gives, so the ranks waiting to
//! open the segment tell a failed creator from a slow one at their next
//! look and fail at once ([`SegmentError::CreatorFailed`]) instead of at
//! the start-up time-out. Changing a mode needs no free space.
//!
//! The creator holds the mark for [`HOLD`] (openers look every 10 ms at
//! most) and then removes the file, so nothing is left behind; a creator
//! killed while it holds the mark leaves the marked file, which the next
//! creator of the name removes as stale. An opener that sees the mark
//! waits until the name is gone (at most twice [`HOLD`]) and a moment
//! more ([`wait_cause_first`]) before it fails, so that the creator's own
//! error, the cause, comes first: a launcher that stops the job at its
//! first failing rank then shows the cause, not the consequence.
//!
//! [`SegmentError::CreatorFailed`]: crate::error::SegmentError::CreatorFailed

use std::fs::File;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

/// The mode of a marked name.
const MODE: u32 = 0o100;

/// How long the creator keeps the mark before it removes the file: ranks
/// that are still starting when it fails learn of it within this time.
pub(super) const HOLD: Duration = Duration::from_millis(500);

/// How long after the mark is gone an opener waits before failing: time
/// for the creator to report its error and end first.
const AFTER_GONE: Duration = Duration::from_millis(100);

/// Mark `file` (just created at `path`, by this process) as failed, hold
/// the mark for [`HOLD`], then remove the name. Best effort: a mark that
/// cannot be set only means the others wait for their time-out.
pub(super) fn leave(file: &File, path: &Path) {
    if file
        .set_permissions(std::fs::Permissions::from_mode(MODE))
        .is_ok()
    {
        std::thread::sleep(HOLD);
    }
    let _ = std::fs::remove_file(path);
}

/// Whether the name `path` carries the mark (a regular file of this user
/// with exactly the mark's mode; links are not followed).
pub(super) fn is_marked(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| {
        // SAFETY: geteuid cannot fail and touches no memory.
        let me = unsafe { libc::geteuid() };
        m.is_file() && m.uid() == me && m.mode() & 0o7777 == MODE
    })
}

/// For an opener that saw the mark: wait until the name is gone (bounded
/// by twice [`HOLD`], for a creator killed while it held it), then
/// [`AFTER_GONE`] more.
pub(super) fn wait_cause_first(path: &Path) {
    let start = std::time::Instant::now();
    while is_marked(path) && start.elapsed() < 2 * HOLD {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(AFTER_GONE);
}
