//! Why the shared-memory segment could not be made, opened or trusted:
//! [`SegmentError`], naming the file and what was wrong with it.

use super::Attendance;
use std::path::PathBuf;
use std::time::Duration;

/// Creating, opening or validating the shared-memory segment failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SegmentError {
    /// An OS call failed.
    #[error("shared segment {path}: {op} failed: {source}")]
    Io {
        /// Segment path.
        path: PathBuf,
        /// What was attempted.
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file does not start with fastmsg's magic.
    #[error("shared segment {path} has magic {found:#018x}, not fastmsg's {expected:#018x}: not a fastmsg segment")]
    BadMagic {
        /// Segment path.
        path: PathBuf,
        /// Magic found.
        found: u64,
        /// Magic expected.
        expected: u64,
    },
    /// The layout version differs (ranks built from different fastmsg versions).
    #[error("shared segment {path} has layout version {found}, this build uses {expected}: rebuild every rank with the same fastmsg")]
    VersionMismatch {
        /// Segment path.
        path: PathBuf,
        /// Version found.
        found: u32,
        /// Version expected.
        expected: u32,
    },
    /// The file is shorter than its header says.
    #[error("shared segment {path} is {len} bytes, its layout needs {need}")]
    Truncated {
        /// Segment path.
        path: PathBuf,
        /// Actual length.
        len: u64,
        /// Needed length.
        need: u64,
    },
    /// The segment was created with different parameters.
    #[error("shared segment {path} was created with {what} = {theirs}, this rank expects {ours}: start every rank with the same settings")]
    ConfigMismatch {
        /// Segment path.
        path: PathBuf,
        /// Which parameter.
        what: &'static str,
        /// Our value.
        ours: u64,
        /// The segment's value.
        theirs: u64,
    },
    /// A live job of this user holds the segment name (its creator's
    /// lifeline is held).
    #[error("shared segment {path} belongs to a live job (its creator, pid {pid} as it recorded it in its PID namespace, is alive); two jobs use the same job id: choose another FASTMSG_JOB / fmrun --job")]
    InUse {
        /// Segment path.
        path: PathBuf,
        /// Creator's pid, as it recorded itself.
        pid: u32,
    },
    /// The file at the segment's name is not one this user may trust: owned
    /// by another user, readable or writable by group or others, or not a
    /// regular file. Nothing in it was read.
    #[error("shared segment {path} is owned by uid {owner} with mode {mode:04o} ({why}); it is not trusted and not used. If another user created it, choose another job id (or ask them / root to remove it)")]
    Untrusted {
        /// Segment path.
        path: PathBuf,
        /// The file's owner.
        owner: u32,
        /// The file's permission bits.
        mode: u32,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The local rank 0 created the segment's file but could not make the
    /// segment (its own error says why) and marked the name so: this
    /// rank cannot start either.
    #[error("the local rank 0 could not make shared segment {path} (its own error says why; most often a full directory: see FASTMSG_SHM_DIR); the job cannot start")]
    CreatorFailed {
        /// Segment path.
        path: PathBuf,
    },
    /// The segment at the name was left by a job whose creator died; the
    /// local rank 0 of this job would have replaced it but did not.
    #[error("shared segment {path} is stale: its creator (pid {pid} in its own namespace) is gone, and no live local rank 0 replaced it; is local rank 0 of this job started, with the same job id?")]
    Stale {
        /// Segment path.
        path: PathBuf,
        /// The dead creator's recorded pid.
        pid: u32,
    },
    /// Peers did not appear in time.
    #[error(
        "waited {waited:?} for {what} in shared segment {path}; are all ranks of the job started?"
    )]
    Timeout {
        /// Segment path.
        path: PathBuf,
        /// What we were waiting for.
        what: &'static str,
        /// How long.
        waited: Duration,
    },
    /// Some ranks of this host never attached to its segment in time.
    #[error(
        "waited {waited:?} in shared segment {path} for {} of the {} ranks of this host to attach: {ranks}; are all ranks of the job started?",
        ranks.missing.len(),
        ranks.local
    )]
    NotAttached {
        /// Segment path.
        path: PathBuf,
        /// Which ranks came and which did not.
        ranks: Box<Attendance>,
        /// How long.
        waited: Duration,
    },
    /// A rank of this host attached to the segment and armed its
    /// lifeline, then ended before start-up was over (killed, crashed,
    /// or it gave up and dropped its endpoint): the job cannot start.
    #[error("rank {rank} (pid {pid} as it recorded itself) {how} during start-up, after attaching to shared segment {path}; the job cannot start without it")]
    RankGone {
        /// Segment path.
        path: PathBuf,
        /// The global rank that ended.
        rank: u32,
        /// Its recorded pid (in its own PID namespace).
        pid: u32,
        /// How it ended, as its lifeline tells.
        how: &'static str,
    },
    /// More processes attached than the job has local ranks.
    #[error("shared segment {path}: more than {local} processes attached")]
    TooManyAttached {
        /// Segment path.
        path: PathBuf,
        /// Local ranks expected.
        local: u32,
    },
    /// Start-up was abandoned because another rank failed.
    #[error("gave up waiting in shared segment {path}: another rank of the job failed")]
    Aborted {
        /// Segment path.
        path: PathBuf,
    },
    /// The requested layout does not fit in memory limits.
    #[error("shared segment layout too large: {what}")]
    TooLarge {
        /// What overflowed.
        what: String,
    },
    /// The segment's directory cannot hold it: the space is reserved up
    /// front (`posix_fallocate`), so this is reported at start-up instead
    /// of a SIGBUS on first touch.
    #[error("shared segment {path} needs {need} bytes, but {dir} cannot provide them ({source}; {} free): free space there, point FASTMSG_SHM_DIR (fmrun --shm-dir) at a larger tmpfs, or lower FASTMSG_CREDITS, FASTMSG_FRAME_SIZE or the ranks per host", match free { Some(f) => format!("{f} bytes"), None => "unknown bytes".to_owned() })]
    NoSpace {
        /// Segment path.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
        /// Bytes the segment needs.
        need: u64,
        /// Bytes free in the directory's file system (`statvfs`), if known.
        free: Option<u64>,
        /// The OS error of the reservation.
        source: std::io::Error,
    },
}
