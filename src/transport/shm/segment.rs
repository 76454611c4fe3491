//! The shared segment: one file in `/dev/shm` per host and job, mode 0600,
//! mapped by every local rank (seed 004 §5: "one shared memory region").
//!
//! The local rank 0 *creates* it: exclusive create, size, lay out, and
//! finally store the magic with Release — the magic doubles as the "ready"
//! flag. The others *open* it: wait for the file and the magic, validate
//! magic, layout version and parameters, then map it whole. Each process
//! then takes an SMT id by fetch-and-increment of the header's counter and
//! records its pid and global rank in the SMT map. Once everybody has
//! attached, the creator unlinks the name, so nothing is left behind even
//! if the job crashes later.
//!
//! Bad segments (foreign file, other version, other parameters, truncated,
//! a stale segment of a dead job) give a [`SegmentError`] naming the file
//! and what was wrong.

#![allow(unsafe_code)]

use super::layout::{Layout, Params, HEADER_BYTES};
use crate::error::SegmentError;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use memmap2::MmapMut;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// "FASTMSG\x01" little-endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"FASTMSG\x01");
/// Bumped whenever the byte layout changes.
pub const LAYOUT_VERSION: u32 = 2;

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

static_assertions::const_assert!(core::mem::size_of::<Header>() as u64 <= HEADER_BYTES);

/// An entry of the SMT map: who holds an SMT id.
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
#[derive(Debug)]
pub struct Segment {
    map: MmapMut,
    layout: Layout,
    path: PathBuf,
    creator: bool,
    unlinked: bool,
}

/// Where the segment of `job` on host `host` lives.
pub fn segment_path(dir: &Path, job: &str, host: &str) -> PathBuf {
    dir.join(format!("fastmsg-{job}-{host}"))
}

/// FNV-1a of the job id, stored in the header to catch a foreign segment.
fn job_hash(job: &str) -> u64 {
    job.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn pid_alive(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

impl Segment {
    /// Create the segment (local rank 0).
    ///
    /// # Errors
    /// I/O errors, [`SegmentError::InUse`] if a live process of another job
    /// holds the name.
    pub fn create(path: &Path, job: &str, params: Params) -> Result<Segment, SegmentError> {
        let layout = Layout::new(params)?;
        let io = |op: &'static str| {
            let path = path.to_path_buf();
            move |source| SegmentError::Io { path, op, source }
        };
        let file = loop {
            match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
            {
                Ok(f) => break f,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    // A leftover: remove it if its creator is dead.
                    Self::remove_stale(path)?;
                }
                Err(e) => return Err(io("create")(e)),
            }
        };
        file.set_len(layout.total).map_err(io("resize"))?;
        // SAFETY: we just created the file and own its contents; other
        // processes only touch it through atomics once the magic is set.
        let map = unsafe { MmapMut::map_mut(&file) }.map_err(io("mmap"))?;
        let seg = Segment {
            map,
            layout,
            path: path.to_path_buf(),
            creator: true,
            unlinked: false,
        };
        seg.initialise(job);
        Ok(seg)
    }

    fn remove_stale(path: &Path) -> Result<(), SegmentError> {
        if let Ok(file) = File::open(path) {
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            if len >= HEADER_BYTES {
                // SAFETY: read-only map of a file we only read through atomics.
                if let Ok(map) = unsafe { memmap2::Mmap::map(&file) } {
                    // SAFETY: the map is at least HEADER_BYTES long and page
                    // aligned; Header is all atomics, valid for any bytes.
                    let h = unsafe { &*(map.as_ptr() as *const Header) };
                    let pid = h.creator_pid.load(Ordering::Relaxed);
                    if pid != 0 && pid != std::process::id() && pid_alive(pid) {
                        return Err(SegmentError::InUse {
                            path: path.to_path_buf(),
                            pid,
                        });
                    }
                }
            }
        }
        match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
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
        // visible to a process that sees the magic (Acquire in `open`).
        h.magic.store(MAGIC, Ordering::Release);
    }

    /// Open the segment created by the local rank 0, waiting up to `timeout`
    /// for it to appear and be ready.
    ///
    /// # Errors
    /// [`SegmentError::BadMagic`], [`SegmentError::VersionMismatch`],
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
        let io = |op: &'static str| {
            let path = path.to_path_buf();
            move |source| SegmentError::Io { path, op, source }
        };
        let timed_out = |what| SegmentError::Timeout {
            path: path.to_path_buf(),
            what,
            waited: start.elapsed(),
        };
        let mut pause = Duration::from_micros(50);
        let aborted = || abort.is_some_and(|a| a.load(std::sync::atomic::Ordering::Relaxed));
        let mut backoff = |start: Instant| -> bool {
            if start.elapsed() > timeout || aborted() {
                return false;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(10));
            true
        };
        // Wait for the file to exist with at least a header.
        let file = loop {
            match OpenOptions::new().read(true).write(true).open(path) {
                Ok(f) => {
                    let len = f.metadata().map_err(io("stat"))?.len();
                    if len >= HEADER_BYTES {
                        break f;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io("open")(e)),
            }
            if !backoff(start) {
                return Err(if aborted() {
                    SegmentError::Aborted {
                        path: path.to_path_buf(),
                    }
                } else {
                    timed_out("the segment file")
                });
            }
        };
        // Wait for the magic, through a header-sized map.
        {
            // SAFETY: the file is at least HEADER_BYTES long (checked above)
            // and files under /dev/shm are not truncated by fastmsg.
            let head = unsafe {
                memmap2::MmapOptions::new()
                    .len(HEADER_BYTES as usize)
                    .map(&file)
            }
            .map_err(io("mmap header"))?;
            // SAFETY: the map is page aligned and long enough; Header is
            // all atomics, valid for any bytes.
            let h = unsafe { &*(head.as_ptr() as *const Header) };
            loop {
                // SYNC POINT segment-ready (acquire side): pairs with the
                // Release store of the magic in `initialise`.
                let magic = h.magic.load(Ordering::Acquire);
                if magic == MAGIC {
                    break;
                }
                if magic != 0 {
                    return Err(SegmentError::BadMagic {
                        path: path.to_path_buf(),
                        found: magic,
                        expected: MAGIC,
                    });
                }
                if !backoff(start) {
                    return Err(if aborted() {
                        SegmentError::Aborted {
                            path: path.to_path_buf(),
                        }
                    } else {
                        timed_out("the creator to initialise the segment")
                    });
                }
            }
        }
        let len = file.metadata().map_err(io("stat"))?.len();
        // Map everything the file has: validated below before any use
        // beyond the header.
        // SAFETY: the file is at least HEADER_BYTES long; other processes
        // access shared parts only through atomics and the queue protocol.
        let map = unsafe { MmapMut::map_mut(&file) }.map_err(io("mmap"))?;
        let layout = Layout::new(params)?;
        let seg = Segment {
            map,
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
                "doorbells (FASTMSG_WAIT=sleep)",
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

    /// Wait until every local rank has attached; return the global rank and
    /// pid of each SMT id.
    ///
    /// # Errors
    /// [`SegmentError::Timeout`] if some rank does not attach in time.
    pub fn wait_all_attached(
        &mut self,
        timeout: Duration,
        abort: Option<&AtomicBool>,
    ) -> Result<Vec<(u32, u32)>, SegmentError> {
        let start = Instant::now();
        let local = self.layout.params.local;
        let mut out = Vec::with_capacity(local as usize);
        for smt in 0..local {
            let e = self.smt_entry(smt);
            let mut spins = 0u32;
            // SYNC POINT smt-entry (acquire side): pairs with `attach`.
            while e.ready.load(Ordering::Acquire) == 0 {
                if abort.is_some_and(|a| a.load(std::sync::atomic::Ordering::Relaxed)) {
                    return Err(SegmentError::Aborted {
                        path: self.path.clone(),
                    });
                }
                if start.elapsed() > timeout {
                    return Err(SegmentError::Timeout {
                        path: self.path.clone(),
                        what: "every local rank to attach",
                        waited: start.elapsed(),
                    });
                }
                spins += 1;
                if spins < 100 {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            out.push((
                e.rank.load(Ordering::Relaxed),
                e.pid.load(Ordering::Relaxed),
            ));
        }
        if self.creator && !self.unlinked {
            // Everyone has it mapped: the name is no longer needed.
            let _ = std::fs::remove_file(&self.path);
            self.unlinked = true;
        }
        Ok(out)
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
        self.map.as_ptr() as *mut u8
    }

    fn header(&self) -> &Header {
        // SAFETY: the map is at least HEADER_BYTES long and page aligned;
        // Header is all atomics, valid for any bytes.
        unsafe { &*(self.map.as_ptr() as *const Header) }
    }

    /// The SMT map entry `smt`.
    pub fn smt_entry(&self, smt: u32) -> &SmtEntry {
        assert!(smt < self.layout.params.local);
        let off = self.layout.map_off + 64 * u64::from(smt);
        // SAFETY: in bounds (validated layout), 64-byte aligned; all atomics.
        unsafe { &*(self.map.as_ptr().add(off as usize) as *const SmtEntry) }
    }

    /// The lifeline of SMT id `smt` (see [`super::liveness`]).
    pub fn life_line(&self, smt: u32) -> &super::liveness::LifeLine {
        assert!(smt < self.layout.params.local);
        let off = self.layout.life(smt);
        // SAFETY: in bounds (validated layout), 64-byte aligned; a LifeLine
        // is an atomic word and a process-shared mutex, valid as zeros.
        unsafe { &*(self.map.as_ptr().add(off as usize) as *const super::liveness::LifeLine) }
    }

    /// The doorbell of SMT id `smt`.
    pub fn doorbell(&self, smt: u32) -> &crate::wake::Doorbell {
        assert!(smt < self.layout.params.local);
        let off = self.layout.doorbell_off + 64 * u64::from(smt);
        // SAFETY: in bounds, 64-byte aligned; Doorbell is all atomics.
        unsafe { &*(self.map.as_ptr().add(off as usize) as *const crate::wake::Doorbell) }
    }

    /// The credit line `returned[receiver][sender]`.
    pub fn credit_line(&self, receiver: u32, sender: u32) -> &crate::flow::CreditLine {
        let local = self.layout.params.local;
        assert!(receiver < local && sender < local);
        let off = self.layout.credit(receiver, sender);
        // SAFETY: in bounds, 64-byte aligned; CreditLine is an atomic.
        unsafe { &*(self.map.as_ptr().add(off as usize) as *const crate::flow::CreditLine) }
    }

    /// The window area of SMT id `smt`: base pointer and length.
    pub fn window_area(&self, smt: u32) -> (*mut u8, u64) {
        assert!(smt < self.layout.params.local);
        let off = self.layout.window(smt) as usize;
        // Stays inside the validated mapping; the area is
        // `window_bytes` long and 64-byte aligned.
        (
            self.base().wrapping_add(off),
            self.layout.params.window_bytes,
        )
    }

    /// Tail counter (line 0) and free-list head (line 1) of a queue.
    pub fn queue_counters(&self, smt: u32, q: u32) -> (&AtomicU64, &AtomicU64) {
        let off = self.queue_checked(smt, q);
        // SAFETY: in bounds, 64-byte aligned; two atomics on their own lines.
        unsafe {
            let p = self.map.as_ptr().add(off as usize);
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
                self.map.as_ptr().add(off as usize) as *const crate::queue::Slot,
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
        let job = crate::bootstrap::threads::fresh_job_id();
        segment_path(Path::new("/dev/shm"), &job, tag)
    }

    const T: Duration = Duration::from_secs(5);

    #[test]
    fn a_foreign_file_is_refused_by_magic() {
        let p = path("magic");
        let mut f = File::create(&p).unwrap();
        f.write_all(&[0xAB; 8192]).unwrap();
        let e = Segment::open(&p, "j", params(), T, None).unwrap_err();
        assert!(
            matches!(e, SegmentError::BadMagic { found, .. } if found == 0xABAB_ABAB_ABAB_ABAB),
            "{e}"
        );
        assert!(e.to_string().contains("not a fastmsg segment"));
        std::fs::remove_file(&p).unwrap();
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
    fn a_missing_creator_times_out_with_a_hint() {
        let p = path("absent");
        let e = Segment::open(&p, "j", params(), Duration::from_millis(100), None).unwrap_err();
        assert!(matches!(e, SegmentError::Timeout { .. }), "{e}");
        assert!(e.to_string().contains("are all ranks of the job started"));
    }

    #[test]
    fn a_stale_segment_of_a_dead_job_is_replaced() {
        let p = path("stale");
        let seg = Segment::create(&p, "old", params()).unwrap();
        // Pretend its creator was another process that has died.
        seg.header()
            .creator_pid
            .store(u32::MAX - 1, Ordering::Relaxed);
        std::mem::forget(seg); // leave the file behind, as a crash would
        let fresh = Segment::create(&p, "new", params()).unwrap();
        assert_eq!(
            fresh.header().job_hash.load(Ordering::Relaxed),
            job_hash("new")
        );
    }

    #[test]
    fn a_segment_of_a_live_process_is_not_taken() {
        let p = path("live");
        let seg = Segment::create(&p, "other", params()).unwrap();
        seg.header().creator_pid.store(1, Ordering::Relaxed); // init: alive
        let e = Segment::create(&p, "mine", params()).unwrap_err();
        assert!(matches!(e, SegmentError::InUse { pid: 1, .. }), "{e}");
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
            .wait_all_attached(T, None)
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
