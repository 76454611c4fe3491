//! The shared segment: one file per host and job in the segment directory
//! (`/dev/shm`), mapped by every local rank (HPVM §5: "one shared
//! memory region").
//!
//! The local rank 0 *creates* it: `O_CREAT|O_EXCL|O_NOFOLLOW`, mode exactly
//! 0600 (set with `fchmod`, whatever the umask), a header page first, in
//! which it arms the *creator line* (a `LifeLine` in the header), then
//! the whole length reserved up front (`posix_fallocate`: a directory too
//! small is [`SegmentError::NoSpace`], never a SIGBUS), lays it out and
//! finally stores the magic with Release — the magic is the "ready" word.
//! A creator that fails after creating the file marks the name
//! (`failed_mark`), so the others fail at once rather than at the
//! start-up time-out.
//! The others *open* it: `O_NOFOLLOW`, then before reading a byte `fstat`
//! that the file is a regular file owned by this user with no group or
//! other permission bits ([`SegmentError::Untrusted`] names owner and
//! mode), then wait — with a deadline — for the magic, check that the
//! creator line is held (a live creator), validate version and
//! parameters, and map it whole. Each process then takes an SMT id by
//! fetch-and-increment of the header's counter and records its pid and
//! global rank in the SMT map. Once everybody has attached, the creator
//! unlinks the name, so nothing is left behind if the job crashes later.
//!
//! **Names.** `fastmsg-<euid>-<job>@<host>` (`bootstrap::job_file_prefix`): two users
//! never want the same name, and a file another user made at ours is
//! refused by its owner ([`SegmentError::Untrusted`], at create and open),
//! never used. Another user can still *squat* on a predictable name (a
//! denial of service, not a hijack: the sticky `/dev/shm` lets nobody but
//! its owner or root remove it); `fmrun`'s default job ids carry 32 random
//! bits, and an explicit `--job` or a launcher's job id should not be
//! predictable where other users are hostile.
//!
//! **Stale segments.** A name already taken by this user is judged by its
//! creator line: held means a live job uses the id ([`SegmentError::InUse`]);
//! owner-dead, released, garbage, or unarmed for longer than
//! [`ARM_GRACE`] means stale: the creator removes it and creates afresh.
//! An opener that finds a stale or foreign-looking file (bad magic, dead
//! creator, other version) waits for the creator to replace it and only
//! reports the problem once it has persisted for [`REPLACE_GRACE`] — no
//! race with a creator that is about to replace it.

#![allow(unsafe_code)]

use super::failed_mark;
use super::layout::{Layout, Params, HEADER_BYTES};
use super::liveness::{Life, LifeGuard, LifeLine};
use super::mapping::{MapRef, Mapping};
use crate::bootstrap::job_file_prefix;
use crate::error::{Attendance, SegmentError};
use crate::sync::AtomicBool;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use memmap2::MmapMut;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// "FASTMSG\x01" little-endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"FASTMSG\x01");
/// Bumped whenever the byte layout changes.
pub const LAYOUT_VERSION: u32 = 3;
/// Offset of the creator line inside the header page.
pub const CREATOR_LINE: u64 = 512;
/// How long a segment file may stay unarmed (created, creator line not yet
/// held) before another creator counts it stale: the creator arms the line
/// microseconds after creating the file.
pub const ARM_GRACE: Duration = Duration::from_secs(1);
/// How long an opener waits for the creator to replace a stale or foreign
/// file before reporting it (longer than [`ARM_GRACE`]).
pub const REPLACE_GRACE: Duration = Duration::from_secs(2);

/// The segment header. Every field is atomic so processes may read it
/// concurrently without data races; all but `magic` and `attached` are
/// written once by the creator before the magic is published.
#[repr(C)]
#[derive(Debug)]
pub struct Header {
    magic: AtomicU64,
    version: AtomicU32,
    local: AtomicU32,
    queues: AtomicU32,
    credits: AtomicU32,
    frame_size: AtomicU32,
    doorbells: AtomicU32,
    creator_pid: AtomicU32,
    attached: AtomicU32,
    total: AtomicU64,
    job_hash: AtomicU64,
    window_bytes: AtomicU64,
}

static_assertions::const_assert!(core::mem::size_of::<Header>() as u64 <= CREATOR_LINE);
static_assertions::const_assert!(
    CREATOR_LINE + core::mem::size_of::<LifeLine>() as u64 <= HEADER_BYTES
);

/// An entry of the SMT map: who holds an SMT id.
// Shared layout: a fixed `repr(C, align(64))`, not crossbeam's `CachePadded`
// (128 on x86_64, platform dependent), which the segment's offsets and
// every process mapping it must agree on (docs/architecture.md).
#[repr(C, align(64))]
#[derive(Debug)]
pub struct SmtEntry {
    /// 0 until the entry is filled, then 1 (Release).
    pub ready: AtomicU32,
    /// The process id.
    pub pid: AtomicU32,
    /// The global rank.
    pub rank: AtomicU32,
}

/// A mapped, validated segment.
///
/// The mapping is shared (a `Mapping` in an `Arc`): the views this
/// segment hands out (`doorbell_ref`, `life_ref`, `window_view`) each keep
/// it mapped, so their holders may be dropped in any order.
#[derive(Debug)]
pub struct Segment {
    /// The creator's hold on its creator line (until everyone attached);
    /// the guard keeps its own map of the header page.
    creator_life: Option<LifeGuard>,
    map: Arc<Mapping>,
    layout: Layout,
    path: PathBuf,
    creator: bool,
    unlinked: bool,
}

fn euid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// Where the segment of `job` on host `host` lives.
pub fn segment_path(dir: &Path, job: &str, host: &str) -> PathBuf {
    dir.join(format!("{}{host}", job_file_prefix(job)))
}

/// FNV-1a of the job id, stored in the header to catch a foreign segment.
fn job_hash(job: &str) -> u64 {
    job.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Size `file` to `len` bytes with every page reserved now
/// (`posix_fallocate`): a directory too small for the segment is a
/// [`SegmentError::NoSpace`] here, not a SIGBUS when a rank first touches
/// an unbacked page of a sparse file.
fn reserve(file: &File, path: &Path, len: u64) -> Result<(), SegmentError> {
    use std::os::fd::AsRawFd;
    let Ok(off_len) = libc::off_t::try_from(len) else {
        return Err(SegmentError::TooLarge {
            what: format!("{len} bytes do not fit a file offset"),
        });
    };
    // SAFETY: a plain call on a descriptor we own; it returns an error
    // number instead of setting errno.
    let r = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, off_len) };
    if r == 0 {
        return Ok(());
    }
    let dir = path
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let source = std::io::Error::from_raw_os_error(r);
    if r == libc::ENOSPC || r == libc::EFBIG || r == libc::ENOMEM {
        return Err(SegmentError::NoSpace {
            path: path.to_path_buf(),
            free: free_bytes(&dir),
            dir,
            need: len,
            source,
        });
    }
    Err(SegmentError::Io {
        path: path.to_path_buf(),
        op: "reserve space for",
        source,
    })
}

/// Bytes an unprivileged user may still allocate under `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero statvfs is a valid out-parameter.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated, `st` is valid for writes.
    let r = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    #[allow(clippy::unnecessary_cast)] // fsblkcnt_t is not u64 everywhere
    (r == 0).then(|| (st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// [`open_trusted`] (write access) and the file's length; `None` when
/// there is no file at `path`.
fn open_trusted_len(path: &Path) -> Result<Option<(File, u64)>, SegmentError> {
    let Some(file) = open_trusted(path, true)? else {
        return Ok(None);
    };
    let len = file
        .metadata()
        .map_err(|source| SegmentError::Io {
            path: path.to_path_buf(),
            op: "fstat",
            source,
        })?
        .len();
    Ok(Some((file, len)))
}

/// Open the file at `path` without following a symbolic link, and check —
/// before a byte is read — that this user may trust it.
fn open_trusted(path: &Path, write: bool) -> Result<Option<File>, SegmentError> {
    let f = match OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            let m = std::fs::symlink_metadata(path).ok();
            return Err(SegmentError::Untrusted {
                path: path.to_path_buf(),
                owner: m.as_ref().map_or(u32::MAX, MetadataExt::uid),
                mode: m.as_ref().map_or(0, |m| m.mode() & 0o7777),
                why: "a symbolic link",
            });
        }
        Err(source) => {
            return Err(SegmentError::Io {
                path: path.to_path_buf(),
                op: "open",
                source,
            })
        }
    };
    let m = f.metadata().map_err(|source| SegmentError::Io {
        path: path.to_path_buf(),
        op: "fstat",
        source,
    })?;
    trusted(path, &m)?;
    Ok(Some(f))
}

/// The owner and mode checks of [`open_trusted`].
fn trusted(path: &Path, m: &std::fs::Metadata) -> Result<(), SegmentError> {
    let why = if !m.is_file() {
        Some("not a regular file")
    } else if m.uid() != euid() {
        Some("another user owns it")
    } else if m.mode() & 0o077 != 0 {
        Some("group or other users may read or write it")
    } else {
        None
    };
    match why {
        Some(why) => Err(SegmentError::Untrusted {
            path: path.to_path_buf(),
            owner: m.uid(),
            mode: m.mode() & 0o7777,
            why,
        }),
        None => Ok(()),
    }
}

/// A read-write map of the header page of `file` (at least that long).
fn map_head(file: &File, path: &Path) -> Result<MmapMut, SegmentError> {
    // SAFETY: the caller checked the file is at least HEADER_BYTES long;
    // it is this user's own file (checked), and shared parts of it are
    // only accessed through atomics and process-shared mutexes.
    unsafe {
        memmap2::MmapOptions::new()
            .len(HEADER_BYTES as usize)
            .map_mut(file)
    }
    .map_err(|source| SegmentError::Io {
        path: path.to_path_buf(),
        op: "mmap header",
        source,
    })
}

fn header_of(head: &[u8]) -> &Header {
    assert!(head.len() as u64 >= HEADER_BYTES);
    // SAFETY: at least HEADER_BYTES long and page aligned (a mapping);
    // Header is all atomics, valid for any bytes.
    unsafe { &*(head.as_ptr() as *const Header) }
}

fn creator_line_of(head: &[u8]) -> &LifeLine {
    assert!(head.len() as u64 >= HEADER_BYTES);
    // SAFETY: in bounds (const-asserted), 64-byte aligned; a LifeLine is
    // an atomic word and a process-shared mutex, valid as zeros, and its
    // mutex is only touched once the word says ALIVE (see `liveness`).
    unsafe { &*(head.as_ptr().add(CREATOR_LINE as usize) as *const LifeLine) }
}

/// What a creator finds at a taken name.
enum Taken {
    /// Nothing any more: try creating again.
    Gone,
    /// Stale (dead, released or garbage): removed, try again.
    Removed,
    /// A creator is between creating the file and arming its line.
    Arming,
}

/// What an opener finds at the name.
enum Found {
    /// Ready, with a live creator and our layout version.
    Ready(File),
    /// Not yet (no file, no header, no magic): keep waiting.
    NotYet,
    /// A problem the creator should fix by replacing the file; reported if
    /// it persists for [`REPLACE_GRACE`].
    Suspect(SegmentError),
}

impl Segment {
    /// Create the segment (local rank 0).
    ///
    /// # Errors
    /// [`SegmentError::InUse`] if a live job of this user holds the name,
    /// [`SegmentError::Untrusted`] if another user's file (or a link)
    /// does, [`SegmentError::NoSpace`] if the directory cannot hold it,
    /// I/O errors.
    pub fn create(path: &Path, job: &str, params: Params) -> Result<Segment, SegmentError> {
        let layout = Layout::new(params)?;
        let io = |op: &'static str| {
            let path = path.to_path_buf();
            move |source| SegmentError::Io { path, op, source }
        };
        let mut arming_since: Option<Instant> = None;
        let mut attempts = 0u32;
        let file = loop {
            match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(path)
            {
                Ok(f) => break f,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    attempts += 1;
                    if attempts > 1000 {
                        return Err(io("create (the name keeps reappearing)")(e));
                    }
                    match Self::judge_taken(
                        path,
                        arming_since.is_some_and(|t| t.elapsed() > ARM_GRACE),
                    )? {
                        Taken::Gone | Taken::Removed => arming_since = None,
                        Taken::Arming => {
                            arming_since.get_or_insert_with(Instant::now);
                            std::thread::sleep(Duration::from_millis(5));
                        }
                    }
                }
                Err(e) => return Err(io("create")(e)),
            }
        };
        // A second handle on the file, to mark the name if making fails.
        let marker = file.try_clone();
        let made = Self::make(file, path, job, layout);
        if made.is_err() {
            match &marker {
                Ok(m) => failed_mark::leave(m, path),
                Err(_) => {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
        made
    }

    /// Lay out a freshly created (empty) file.
    fn make(file: File, path: &Path, job: &str, layout: Layout) -> Result<Segment, SegmentError> {
        let io = |op: &'static str| {
            let path = path.to_path_buf();
            move |source| SegmentError::Io { path, op, source }
        };
        // Exactly 0600, whatever the umask left of the create mode.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(io("fchmod"))?;
        // The header page first, to arm the creator line at once: from now
        // on another creator sees a live job, not an abandoned file. Its
        // space is reserved before anything is written into it: in a full
        // directory the first store (the robust mutex `arm` initialises)
        // would otherwise be a SIGBUS instead of `NoSpace`.
        reserve(&file, path, HEADER_BYTES)?;
        let head = Mapping::new(map_head(&file, path)?);
        // SAFETY: in bounds (const-asserted), 64-byte aligned; a LifeLine
        // is an atomic word and a process-shared mutex, valid as zeros.
        let line: MapRef<LifeLine> = unsafe { head.view(CREATOR_LINE as usize) };
        // SAFETY: a fresh file: the line is unarmed and nobody uses it
        // until ALIVE is published by `arm`.
        let guard = unsafe { LifeLine::arm(line) }.map_err(|e| SegmentError::Io {
            path: path.to_path_buf(),
            op: e.call,
            source: std::io::Error::from_raw_os_error(e.errno),
        })?;
        let res = (|| {
            reserve(&file, path, layout.total)?;
            // SAFETY: we just created the file and own its contents; other
            // processes only touch it through atomics once the magic is set.
            unsafe { MmapMut::map_mut(&file) }.map_err(io("mmap"))
        })();
        // On an error the guard is dropped here, releasing the line.
        let map = res?;
        let seg = Segment {
            creator_life: Some(guard),
            map: Mapping::new(map),
            layout,
            path: path.to_path_buf(),
            creator: true,
            unlinked: false,
        };
        seg.initialise(job);
        Ok(seg)
    }

    /// The name is taken: by a live job (error), another user (error), a
    /// creator arming (wait), or a stale file of ours (removed).
    /// `arm_expired`: it has been unarmed for longer than [`ARM_GRACE`].
    fn judge_taken(path: &Path, arm_expired: bool) -> Result<Taken, SegmentError> {
        if failed_mark::is_marked(path) {
            // A failed creator's mark, left by one killed while it held it.
            return Self::remove_stale(path);
        }
        let Some((file, len)) = open_trusted_len(path)? else {
            return Ok(Taken::Gone);
        };
        if len >= HEADER_BYTES {
            let head = map_head(&file, path)?;
            let h = header_of(&head);
            // SYNC POINT segment-ready (acquire side), as in `look`.
            let magic = h.magic.load(Ordering::Acquire);
            let ours = magic == 0
                || (magic == MAGIC && h.version.load(Ordering::Relaxed) == LAYOUT_VERSION);
            if ours {
                match creator_line_of(&head).probe() {
                    Life::Alive => {
                        return Err(SegmentError::InUse {
                            path: path.to_path_buf(),
                            pid: h.creator_pid.load(Ordering::Relaxed),
                        })
                    }
                    Life::Unarmed if !arm_expired && magic == 0 => return Ok(Taken::Arming),
                    _ => {} // dead, released, or unarmed for too long
                }
            }
            // Garbage, another layout version, or a dead creator: stale.
        } else if !arm_expired {
            return Ok(Taken::Arming);
        }
        Self::remove_stale(path)
    }

    /// Remove a stale file at `path` (gone already is fine).
    fn remove_stale(path: &Path) -> Result<Taken, SegmentError> {
        match std::fs::remove_file(path) {
            Ok(()) => Ok(Taken::Removed),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Taken::Gone),
            Err(source) => Err(SegmentError::Io {
                path: path.to_path_buf(),
                op: "remove stale segment",
                source,
            }),
        }
    }

    fn initialise(&self, job: &str) {
        let l = &self.layout;
        let h = self.header();
        h.version.store(LAYOUT_VERSION, Ordering::Relaxed);
        h.local.store(l.params.local, Ordering::Relaxed);
        h.queues.store(l.params.queues, Ordering::Relaxed);
        h.credits.store(l.params.credits, Ordering::Relaxed);
        h.frame_size.store(l.params.frame_size, Ordering::Relaxed);
        h.doorbells
            .store(u32::from(l.params.doorbells), Ordering::Relaxed);
        h.creator_pid.store(std::process::id(), Ordering::Relaxed);
        h.attached.store(0, Ordering::Relaxed);
        h.total.store(l.total, Ordering::Relaxed);
        h.job_hash.store(job_hash(job), Ordering::Relaxed);
        h.window_bytes
            .store(l.params.window_bytes, Ordering::Relaxed);
        // The file is fresh (zero-filled by the kernel): SMT map, doorbells,
        // credit lines, queue counters and in-use flags start at zero as
        // required. Only the slot stamps need their lap-0 values.
        for smt in 0..l.params.local {
            for q in 0..l.params.queues {
                for (i, slot) in self.slots(smt, q).iter().enumerate() {
                    slot.reset(i as u64);
                }
            }
        }
        // SYNC POINT segment-ready (release side): everything above is
        // visible to a process that sees the magic (Acquire in `look`).
        h.magic.store(MAGIC, Ordering::Release);
    }

    /// One look at the name, for an opener.
    fn look(path: &Path) -> Result<Found, SegmentError> {
        let opened = open_trusted_len(path);
        // Looked at after the open: a mark set since is seen now, and an
        // open refused because of the mark's mode is not an I/O error.
        if failed_mark::is_marked(path) {
            failed_mark::wait_cause_first(path);
            return Err(SegmentError::CreatorFailed {
                path: path.to_path_buf(),
            });
        }
        let Some((file, len)) = opened? else {
            return Ok(Found::NotYet);
        };
        if len < HEADER_BYTES {
            return Ok(Found::NotYet);
        }
        let head = map_head(&file, path)?;
        let h = header_of(&head);
        // SYNC POINT segment-ready (acquire side): pairs with the Release
        // store of the magic in `initialise`.
        let magic = h.magic.load(Ordering::Acquire);
        if magic == 0 {
            return Ok(Found::NotYet);
        }
        if magic != MAGIC {
            return Ok(Found::Suspect(SegmentError::BadMagic {
                path: path.to_path_buf(),
                found: magic,
                expected: MAGIC,
            }));
        }
        let version = h.version.load(Ordering::Relaxed);
        if version != LAYOUT_VERSION {
            return Ok(Found::Suspect(SegmentError::VersionMismatch {
                path: path.to_path_buf(),
                found: version,
                expected: LAYOUT_VERSION,
            }));
        }
        if creator_line_of(&head).probe() != Life::Alive {
            return Ok(Found::Suspect(SegmentError::Stale {
                path: path.to_path_buf(),
                pid: h.creator_pid.load(Ordering::Relaxed),
            }));
        }
        Ok(Found::Ready(file))
    }

    /// Open the segment created by the local rank 0, waiting up to `timeout`
    /// for it to appear and be ready.
    ///
    /// # Errors
    /// [`SegmentError::Untrusted`] and [`SegmentError::CreatorFailed`] at
    /// once; [`SegmentError::BadMagic`],
    /// [`SegmentError::VersionMismatch`] or [`SegmentError::Stale`] if the
    /// file stays so for [`REPLACE_GRACE`];
    /// [`SegmentError::ConfigMismatch`], [`SegmentError::Truncated`],
    /// [`SegmentError::Timeout`] or I/O errors.
    pub fn open(
        path: &Path,
        job: &str,
        params: Params,
        timeout: Duration,
        abort: Option<&AtomicBool>,
    ) -> Result<Segment, SegmentError> {
        let start = Instant::now();
        let mut pause = Duration::from_micros(50);
        let aborted = || abort.is_some_and(|a| a.load(crate::sync::Ordering::Relaxed));
        let mut suspect_since: Option<Instant> = None;
        let file = loop {
            match Self::look(path)? {
                Found::Ready(f) => break f,
                Found::NotYet => suspect_since = None,
                Found::Suspect(e) => {
                    let since = *suspect_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > REPLACE_GRACE {
                        return Err(e);
                    }
                }
            }
            if aborted() {
                return Err(SegmentError::Aborted {
                    path: path.to_path_buf(),
                });
            }
            if start.elapsed() > timeout {
                return Err(SegmentError::Timeout {
                    path: path.to_path_buf(),
                    what: "the segment file, ready and owned by this user",
                    waited: start.elapsed(),
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(10));
        };
        let io = |op: &'static str| {
            let path = path.to_path_buf();
            move |source| SegmentError::Io { path, op, source }
        };
        let len = file.metadata().map_err(io("stat"))?.len();
        // Map everything the file has: validated below before any use
        // beyond the header.
        // SAFETY: the file is at least HEADER_BYTES long and this user's
        // own (checked in `look`); other processes access shared parts only
        // through atomics and the queue protocol.
        let map = unsafe { MmapMut::map_mut(&file) }.map_err(io("mmap"))?;
        let layout = Layout::new(params)?;
        let seg = Segment {
            creator_life: None,
            map: Mapping::new(map),
            layout,
            path: path.to_path_buf(),
            creator: false,
            unlinked: false,
        };
        seg.validate(job, len)?;
        Ok(seg)
    }

    fn validate(&self, job: &str, len: u64) -> Result<(), SegmentError> {
        let h = self.header();
        let path = || self.path.clone();
        let version = h.version.load(Ordering::Relaxed);
        if version != LAYOUT_VERSION {
            return Err(SegmentError::VersionMismatch {
                path: path(),
                found: version,
                expected: LAYOUT_VERSION,
            });
        }
        let p = self.layout.params;
        let checks: [(&'static str, u64, u64); 7] = [
            (
                "bytes of one-sided windows",
                p.window_bytes,
                h.window_bytes.load(Ordering::Relaxed),
            ),
            (
                "local ranks",
                p.local.into(),
                h.local.load(Ordering::Relaxed).into(),
            ),
            (
                "FASTMSG_QUEUES",
                p.queues.into(),
                h.queues.load(Ordering::Relaxed).into(),
            ),
            (
                "FASTMSG_CREDITS",
                p.credits.into(),
                h.credits.load(Ordering::Relaxed).into(),
            ),
            (
                "FASTMSG_FRAME_SIZE",
                p.frame_size.into(),
                h.frame_size.load(Ordering::Relaxed).into(),
            ),
            (
                "doorbells (FASTMSG_WAIT=sleep, or auto where membarrier is offered; every rank of a host must agree)",
                u64::from(p.doorbells),
                h.doorbells.load(Ordering::Relaxed).into(),
            ),
            (
                "job id hash",
                job_hash(job),
                h.job_hash.load(Ordering::Relaxed),
            ),
        ];
        for (what, ours, theirs) in checks {
            if ours != theirs {
                return Err(SegmentError::ConfigMismatch {
                    path: path(),
                    what,
                    ours,
                    theirs,
                });
            }
        }
        let need = self.layout.total;
        if len < need || h.total.load(Ordering::Relaxed) != need {
            return Err(SegmentError::Truncated {
                path: path(),
                len,
                need,
            });
        }
        Ok(())
    }

    /// Take an SMT id (seed: fetch-and-increment on a shared counter) and
    /// record `rank` and our pid under it.
    ///
    /// # Errors
    /// [`SegmentError::TooManyAttached`] if all ids are taken.
    pub fn attach(&self, rank: u32) -> Result<u32, SegmentError> {
        let local = self.layout.params.local;
        // Relaxed: the counter only hands out distinct ids; the entry's
        // ready flag publishes what we write under the id.
        let smt = self.header().attached.fetch_add(1, Ordering::Relaxed);
        if smt >= local {
            return Err(SegmentError::TooManyAttached {
                path: self.path.clone(),
                local,
            });
        }
        let e = self.smt_entry(smt);
        e.pid.store(std::process::id(), Ordering::Relaxed);
        e.rank.store(rank, Ordering::Relaxed);
        // SYNC POINT smt-entry (release side): pid and rank are visible to
        // whoever sees ready = 1 (Acquire in `wait_all_attached`).
        e.ready.store(1, Ordering::Release);
        Ok(smt)
    }

    /// The error of a wait for attachment that timed out: which SMT ids
    /// are still missing, and which global ranks came (`None` if none is
    /// missing after all: the last came between the look and the clock).
    fn not_attached(&self, waited: Duration) -> Option<SegmentError> {
        let (mut missing, mut attached) = (Vec::new(), Vec::new());
        for smt in 0..self.layout.params.local {
            let e = self.smt_entry(smt);
            // SYNC POINT smt-entry (acquire side): pairs with `attach`.
            if e.ready.load(Ordering::Acquire) == 0 {
                missing.push(smt);
            } else {
                attached.push(e.rank.load(Ordering::Relaxed));
            }
        }
        attached.sort_unstable();
        if missing.is_empty() {
            return None;
        }
        Some(SegmentError::NotAttached {
            path: self.path.clone(),
            ranks: Box::new(Attendance {
                local: self.layout.params.local,
                missing,
                attached,
                missing_ranks: None,
            }),
            waited,
        })
    }

    /// Wait until every local rank has attached; return the global rank and
    /// pid of each SMT id.
    ///
    /// # Errors
    /// [`SegmentError::NotAttached`] if some rank does not attach in time.
    pub fn wait_all_attached(
        &mut self,
        me: u32,
        timeout: Duration,
        abort: Option<&AtomicBool>,
    ) -> Result<Vec<(u32, u32)>, SegmentError> {
        let start = Instant::now();
        let local = self.layout.params.local;
        let mut out = Vec::with_capacity(local as usize);
        let mut gone = GoneWatch::new(me);
        for smt in 0..local {
            let e = self.smt_entry(smt);
            let backoff = crossbeam_utils::Backoff::new();
            // SYNC POINT smt-entry (acquire side): pairs with `attach`.
            while e.ready.load(Ordering::Acquire) == 0 {
                if abort.is_some_and(|a| a.load(crate::sync::Ordering::Relaxed)) {
                    return Err(SegmentError::Aborted {
                        path: self.path.clone(),
                    });
                }
                gone.look(self)?;
                if start.elapsed() > timeout {
                    // (None: every rank came meanwhile; the loop sees it.)
                    if let Some(e) = self.not_attached(start.elapsed()) {
                        return Err(e);
                    }
                }
                // Spin, then yield, then (another process is slow to
                // start) sleep between looks.
                if backoff.is_completed() {
                    std::thread::sleep(Duration::from_micros(200));
                } else {
                    backoff.snooze();
                }
            }
            out.push((
                e.rank.load(Ordering::Relaxed),
                e.pid.load(Ordering::Relaxed),
            ));
        }
        if self.creator && !self.unlinked {
            // Everyone has it mapped: the name is no longer needed, nor is
            // the creator line that told other creators it was in use.
            let _ = std::fs::remove_file(&self.path);
            self.unlinked = true;
            self.creator_life = None;
        }
        Ok(out)
    }

    /// A rank other than SMT id `me` that attached, armed its lifeline
    /// and has ended since (its lifeline says dead, left or closed), as
    /// the error that names it. A rank that died is named before one that
    /// left: leaving during start-up is what a rank does after its own
    /// start failed, often because of that death.
    pub(crate) fn first_gone(&self, me: u32) -> Option<SegmentError> {
        let mut found: Option<(Life, u32)> = None;
        for smt in (0..self.layout.params.local).filter(|&smt| smt != me) {
            // SYNC POINT smt-entry (acquire side): pairs with `attach`.
            if self.smt_entry(smt).ready.load(Ordering::Acquire) == 0 {
                continue;
            }
            let life = self.life_line(smt).probe();
            if life == Life::Dead {
                found = Some((life, smt));
                break;
            }
            if life.is_gone() && found.is_none() {
                found = Some((life, smt));
            }
        }
        let (life, smt) = found?;
        let e = self.smt_entry(smt);
        Some(SegmentError::RankGone {
            path: self.path.clone(),
            rank: e.rank.load(Ordering::Relaxed),
            pid: e.pid.load(Ordering::Relaxed),
            how: match life {
                Life::Dead => "was killed or crashed",
                Life::Left => "gave up (dropped its endpoint)",
                _ => "closed its endpoint",
            },
        })
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The file path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Base address of the mapping.
    pub fn base(&self) -> *mut u8 {
        self.map.base()
    }

    /// The doorbell of SMT id `smt`, keeping the mapping alive.
    pub(crate) fn doorbell_ref(&self, smt: u32) -> MapRef<crate::wake::Doorbell> {
        assert!(smt < self.layout.params.local);
        let off = self.layout.doorbell_off + 64 * u64::from(smt);
        // SAFETY: in bounds, 64-byte aligned; Doorbell is all atomics.
        unsafe { self.map.view(off as usize) }
    }

    /// The lifeline of SMT id `smt`, keeping the mapping alive.
    pub(crate) fn life_ref(&self, smt: u32) -> MapRef<LifeLine> {
        assert!(smt < self.layout.params.local);
        // SAFETY: in bounds (validated layout), 64-byte aligned; a LifeLine
        // is an atomic word and a process-shared mutex, valid as zeros.
        unsafe { self.map.view(self.layout.life(smt) as usize) }
    }

    /// The window area of SMT id `smt`, keeping the mapping alive.
    pub(crate) fn window_view(&self, smt: u32) -> crate::window::WindowView {
        assert!(smt < self.layout.params.local);
        self.map.window(
            self.layout.window(smt) as usize,
            self.layout.params.window_bytes,
        )
    }

    fn header(&self) -> &Header {
        // SAFETY: the map is at least HEADER_BYTES long and page aligned;
        // Header is all atomics, valid for any bytes.
        unsafe { &*(self.map.base() as *const Header) }
    }

    /// The SMT map entry `smt`.
    pub fn smt_entry(&self, smt: u32) -> &SmtEntry {
        assert!(smt < self.layout.params.local);
        let off = self.layout.map_off + 64 * u64::from(smt);
        // SAFETY: in bounds (validated layout), 64-byte aligned; all atomics.
        unsafe { &*(self.map.base().add(off as usize) as *const SmtEntry) }
    }

    /// The lifeline of SMT id `smt` (see [`super::liveness`]).
    pub fn life_line(&self, smt: u32) -> &super::liveness::LifeLine {
        assert!(smt < self.layout.params.local);
        let off = self.layout.life(smt);
        // SAFETY: in bounds (validated layout), 64-byte aligned; a LifeLine
        // is an atomic word and a process-shared mutex, valid as zeros.
        unsafe { &*(self.map.base().add(off as usize) as *const super::liveness::LifeLine) }
    }

    /// The doorbell of SMT id `smt`.
    pub fn doorbell(&self, smt: u32) -> &crate::wake::Doorbell {
        assert!(smt < self.layout.params.local);
        let off = self.layout.doorbell_off + 64 * u64::from(smt);
        // SAFETY: in bounds, 64-byte aligned; Doorbell is all atomics.
        unsafe { &*(self.map.base().add(off as usize) as *const crate::wake::Doorbell) }
    }

    /// The credit line `returned[receiver][sender]`.
    pub fn credit_line(&self, receiver: u32, sender: u32) -> &crate::flow::CreditLine {
        let local = self.layout.params.local;
        assert!(receiver < local && sender < local);
        let off = self.layout.credit(receiver, sender);
        // SAFETY: in bounds, 64-byte aligned; CreditLine is an atomic.
        unsafe { &*(self.map.base().add(off as usize) as *const crate::flow::CreditLine) }
    }

    /// Tail counter (line 0) and free-list head (line 1) of a queue.
    pub fn queue_counters(&self, smt: u32, q: u32) -> (&AtomicU64, &AtomicU64) {
        let off = self.queue_checked(smt, q);
        // SAFETY: in bounds, 64-byte aligned; two atomics on their own lines.
        unsafe {
            let p = self.map.base().add(off as usize);
            (&*(p as *const AtomicU64), &*(p.add(64) as *const AtomicU64))
        }
    }

    /// The slots of a queue.
    pub fn slots(&self, smt: u32, q: u32) -> &[crate::queue::Slot] {
        let off = self.queue_checked(smt, q) + self.layout.slots_rel;
        // SAFETY: in bounds (validated layout), 64-byte aligned; Slot is an
        // atomic stamp plus plain data accessed only through the queue
        // protocol.
        unsafe {
            core::slice::from_raw_parts(
                self.map.base().add(off as usize) as *const crate::queue::Slot,
                self.layout.slots as usize,
            )
        }
    }

    /// Offset of the first frame of a queue.
    pub fn frames_offset(&self, smt: u32, q: u32) -> u64 {
        self.queue_checked(smt, q) + self.layout.frames_rel
    }

    fn queue_checked(&self, smt: u32, q: u32) -> u64 {
        assert!(smt < self.layout.params.local && q < self.layout.params.queues);
        self.layout.queue(smt, q)
    }
}

/// How often a start-up wait looks at the lifelines of the ranks that
/// attached: a rank that ends while the others wait for the rest is
/// reported within this (and the watchdog's own period) instead of at the
/// time-out.
const GONE_LOOK_EVERY: Duration = Duration::from_millis(20);

/// A start-up wait's look, now and then, for a rank that attached and
/// ended ([`Segment::first_gone`]).
pub(crate) struct GoneWatch {
    me: u32,
    next: Instant,
}

impl GoneWatch {
    /// Looks on behalf of SMT id `me` (whose own line is never probed).
    pub(crate) fn new(me: u32) -> Self {
        GoneWatch {
            me,
            next: Instant::now(),
        }
    }

    /// At most every [`GONE_LOOK_EVERY`]: the error naming a rank of
    /// `seg` that ended.
    pub(crate) fn look(&mut self, seg: &Segment) -> Result<(), SegmentError> {
        let now = Instant::now();
        if now < self.next {
            return Ok(());
        }
        self.next = now + GONE_LOOK_EVERY;
        seg.first_gone(self.me).map_or(Ok(()), Err)
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if self.creator && !self.unlinked {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn params() -> Params {
        Params {
            local: 2,
            queues: 2,
            credits: 4,
            frame_size: 256,
            doorbells: false,
            window_bytes: 64,
        }
    }

    fn path(tag: &str) -> PathBuf {
        let job = crate::bootstrap::fresh_job_id();
        segment_path(Path::new("/dev/shm"), &job, tag)
    }

    const T: Duration = Duration::from_secs(5);

    fn private_garbage(p: &Path) {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(p)
            .unwrap();
        f.write_all(&[0xAB; 8192]).unwrap();
    }

    #[test]
    fn a_foreign_file_is_refused_by_magic_once_it_stays() {
        let p = path("magic");
        private_garbage(&p);
        let t = Instant::now();
        let e = Segment::open(&p, "j", params(), T, None).unwrap_err();
        assert!(
            matches!(e, SegmentError::BadMagic { found, .. } if found == 0xABAB_ABAB_ABAB_ABAB),
            "{e}"
        );
        assert!(e.to_string().contains("not a fastmsg segment"));
        assert!(t.elapsed() >= REPLACE_GRACE, "waited for a replacement");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn a_garbage_file_is_replaced_by_the_creator_while_openers_wait() {
        // The creation race: openers that find the garbage first
        // must not fail; they wait for the creator's fresh segment.
        let p = path("race");
        private_garbage(&p);
        let q = p.clone();
        let opener = std::thread::spawn(move || {
            Segment::open(&q, "j", params(), T, None).map(|s| s.layout().total)
        });
        std::thread::sleep(Duration::from_millis(50));
        let seg = Segment::create(&p, "j", params()).unwrap();
        assert_eq!(opener.join().unwrap().unwrap(), seg.layout().total);
    }

    #[test]
    fn another_layout_version_is_refused() {
        let p = path("version");
        let seg = Segment::create(&p, "j", params()).unwrap();
        seg.header()
            .version
            .store(LAYOUT_VERSION + 1, Ordering::Relaxed);
        let e = Segment::open(&p, "j", params(), T, None).unwrap_err();
        assert!(
            matches!(e, SegmentError::VersionMismatch { found, expected, .. } if found == LAYOUT_VERSION + 1 && expected == LAYOUT_VERSION),
            "{e}"
        );
    }

    #[test]
    fn different_parameters_are_named() {
        let p = path("params");
        let _seg = Segment::create(&p, "j", params()).unwrap();
        let mut other = params();
        other.credits = 8;
        let e = Segment::open(&p, "j", other, T, None).unwrap_err();
        assert!(
            matches!(
                e,
                SegmentError::ConfigMismatch {
                    what: "FASTMSG_CREDITS",
                    ours: 8,
                    theirs: 4,
                    ..
                }
            ),
            "{e}"
        );
        let e = Segment::open(&p, "other-job", params(), T, None).unwrap_err();
        assert!(
            matches!(
                e,
                SegmentError::ConfigMismatch {
                    what: "job id hash",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn a_truncated_segment_is_refused() {
        let p = path("trunc");
        let seg = Segment::create(&p, "j", params()).unwrap();
        let f = OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(seg.layout().total / 2).unwrap();
        let e = Segment::open(&p, "j", params(), T, None).unwrap_err();
        assert!(matches!(e, SegmentError::Truncated { .. }), "{e}");
    }

    #[test]
    fn ranks_that_never_attach_are_named() {
        let p = path("absent-rank");
        let mut seg = Segment::create(&p, "j", params()).unwrap();
        seg.attach(7).unwrap();
        let e = seg
            .wait_all_attached(0, Duration::from_millis(100), None)
            .unwrap_err();
        let SegmentError::NotAttached { ranks, .. } = &e else {
            panic!("{e}");
        };
        assert_eq!(
            (&ranks.missing[..], &ranks.attached[..]),
            (&[1][..], &[7][..])
        );
        assert!(
            e.to_string()
                .contains("the ranks with local index 1 never attached (global ranks 7 did)"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_creator_times_out_with_a_hint() {
        let p = path("absent");
        let e = Segment::open(&p, "j", params(), Duration::from_millis(100), None).unwrap_err();
        assert!(matches!(e, SegmentError::Timeout { .. }), "{e}");
        assert!(e.to_string().contains("are all ranks of the job started"));
    }

    /// A segment whose creator thread ended holding its line, as a killed
    /// creator's would.
    fn abandoned(p: &Path, job: &'static str) {
        let q = p.to_path_buf();
        std::thread::spawn(move || std::mem::forget(Segment::create(&q, job, params()).unwrap()))
            .join()
            .unwrap();
    }

    #[test]
    fn a_stale_segment_of_a_dead_job_is_replaced() {
        let p = path("stale");
        abandoned(&p, "old");
        let fresh = Segment::create(&p, "new", params()).unwrap();
        assert_eq!(
            fresh.header().job_hash.load(Ordering::Relaxed),
            job_hash("new")
        );
    }

    #[test]
    fn an_opener_of_a_stale_segment_says_so() {
        let p = path("stale-open");
        abandoned(&p, "j");
        let e = Segment::open(&p, "j", params(), T, None).unwrap_err();
        assert!(matches!(e, SegmentError::Stale { .. }), "{e}");
        assert!(e.to_string().contains("stale"), "{e}");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn a_file_left_unarmed_is_collected_after_the_grace() {
        let p = path("unarmed");
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&p)
            .unwrap(); // a creator killed right after creating the file
        let t = Instant::now();
        let _seg = Segment::create(&p, "j", params()).unwrap();
        assert!(t.elapsed() >= ARM_GRACE);
    }

    #[test]
    fn a_segment_of_a_live_job_is_not_taken() {
        let p = path("live");
        let _seg = Segment::create(&p, "other", params()).unwrap();
        let q = p.clone();
        let e = std::thread::spawn(move || Segment::create(&q, "mine", params()).unwrap_err())
            .join()
            .unwrap();
        assert!(
            matches!(e, SegmentError::InUse { pid, .. } if pid == std::process::id()),
            "{e}"
        );
    }

    #[test]
    fn the_segment_is_mode_0600_whatever_the_umask() {
        let p = path("umask");
        // SAFETY: umask only sets the process's file mode mask.
        let old = unsafe { libc::umask(0o077 | 0o100) };
        let seg = Segment::create(&p, "j", params());
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        let _seg = seg.unwrap();
        let mode = std::fs::metadata(&p).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn group_or_other_bits_are_refused_before_reading() {
        let p = path("mode");
        let _seg = Segment::create(&p, "j", params()).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = Segment::open(&p, "j", params(), T, None).unwrap_err();
        assert!(
            matches!(e, SegmentError::Untrusted { mode: 0o666, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("0666"), "{e}");
    }

    #[test]
    fn a_symbolic_link_is_refused() {
        let p = path("link");
        std::os::unix::fs::symlink("/dev/null", &p).unwrap();
        let e = Segment::open(&p, "j", params(), T, None).unwrap_err();
        assert!(matches!(e, SegmentError::Untrusted { .. }), "{e}");
        let e = Segment::create(&p, "j", params()).unwrap_err();
        assert!(matches!(e, SegmentError::Untrusted { .. }), "{e}");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn another_users_file_is_refused_naming_its_owner() {
        if euid() != 0 {
            eprintln!("skipped: needs root to give a file to another uid (chown)");
            return;
        }
        let p = path("foreign");
        let seg = Segment::create(&p, "j", params()).unwrap();
        std::mem::forget(seg); // the file stays, as another user's would
        std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
        let e = Segment::open(&p, "j", params(), T, None).unwrap_err();
        assert!(
            matches!(e, SegmentError::Untrusted { owner: 65534, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("uid 65534"), "{e}");
        let e = Segment::create(&p, "j", params()).unwrap_err();
        assert!(
            matches!(e, SegmentError::Untrusted { owner: 65534, .. }),
            "{e}"
        );
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn a_directory_too_small_is_a_typed_error() {
        let p = path("nospace");
        let mut big = params();
        big.window_bytes = 1 << 36; // 64 GiB per rank, 128 GiB in all
        let c = std::ffi::CString::new("/dev/shm").unwrap();
        // SAFETY: an all-zero statvfs is a valid out-parameter; `c` is
        // NUL-terminated.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
        #[allow(clippy::unnecessary_cast)]
        let size = (st.f_blocks as u64).saturating_mul(st.f_frsize as u64);
        if size > 1 << 37 {
            eprintln!(
                "skipped: /dev/shm is {size} bytes, larger than the 128 GiB this test asks for"
            );
            return;
        }
        let e = Segment::create(&p, "j", big).unwrap_err();
        let SegmentError::NoSpace { need, dir, .. } = &e else {
            panic!("{e}");
        };
        assert!(*need > 1 << 37);
        assert_eq!(dir, Path::new("/dev/shm"));
        assert!(e.to_string().contains(&need.to_string()), "{e}");
        assert!(!p.exists(), "nothing left behind");
    }

    #[test]
    fn attach_hands_out_distinct_ids_and_refuses_extras() {
        let p = path("attach");
        let mut seg = Segment::create(&p, "j", params()).unwrap();
        let a = seg.attach(7).unwrap();
        let other = Segment::open(&p, "j", params(), T, None).unwrap();
        let b = other.attach(3).unwrap();
        assert_ne!(a, b);
        assert!(matches!(
            other.attach(9),
            Err(SegmentError::TooManyAttached { local: 2, .. })
        ));
        let ranks: Vec<u32> = seg
            .wait_all_attached(a, T, None)
            .unwrap()
            .iter()
            .map(|e| e.0)
            .collect();
        assert!(ranks.contains(&7) && ranks.contains(&3));
        assert!(
            !p.exists(),
            "the creator unlinks once everyone has attached"
        );
    }
}
