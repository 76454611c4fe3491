//! Moving pieces into frames: the one place payload bytes are copied on the
//! send side, and its self-tuning — seed 004 §6 ("PCI chipset pacing") in
//! today's terms.
//!
//! HPVM 1.9 found that the best way to push bytes over the PCI bridge
//! differed between chipsets, so it measured burst sizes at start-up and
//! kept the best. Here the question is how to write a frame that *another
//! core* reads next:
//!
//! - [`Strategy::Plain`]: ordinary stores (`copy_nonoverlapping`, i.e. the C
//!   library's `memcpy`). The lines stay in this core's cache; the reader
//!   pulls them from there.
//! - [`Strategy::Stream`]: non-temporal ("streaming") stores for the
//!   aligned body of the copy (AVX2 when the CPU has it, checked at run
//!   time, else SSE2), ordinary stores for the unaligned ends, then an
//!   `sfence`. Whole lines go to memory without a read-for-ownership and
//!   without evicting the sender's working set; the reader fetches them
//!   from memory instead of from the other core.
//!
//! Which wins, and from which copy size on, depends on the machine, so a
//! [`CopyPlan`] (strategy + threshold: copies shorter than `threshold` stay
//! plain) is *measured* by [`tune`]: a producer thread copies chunks of
//! each candidate size into a ring of frames (256 KiB, the default credit
//! window of 32 × 8 KiB frames) while a consumer thread copies them out,
//! both strategies interleaved, medians of three. Streaming is chosen from
//! the smallest chunk size at which it beats plain by more than 5 % at
//! that size and every larger one; otherwise the plan is plain.
//!
//! The plan is stored in `$XDG_CACHE_HOME/fastmsg/copy-plan` (else
//! `$HOME/.cache/fastmsg/copy-plan`), keyed by CPU model and count, and
//! reused; processes that find no valid plan take an `flock` on the file
//! so only one of them measures. `FASTMSG_COPY` overrides:
//! `auto` (default: stored plan, else tune once and store), `plain`,
//! `stream` or `stream:BYTES` (streaming from BYTES on, default 4096),
//! `tune` (measure again now and store).
//!
//! The hot path ([`copy_to_frame`]) costs one relaxed load and one compare
//! more than a plain copy; the plan is settled on the first call (or by
//! [`plan`]).

#![allow(unsafe_code)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// How a copy into a frame is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// `copy_nonoverlapping` (the C library's `memcpy`).
    Plain,
    /// Non-temporal stores for the aligned body, then `sfence`.
    Stream,
}

impl Strategy {
    /// The name used in `FASTMSG_COPY` and the plan file.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Plain => "plain",
            Strategy::Stream => "stream",
        }
    }
}

/// The chosen way of copying: `strategy` for copies of at least
/// `threshold` bytes, plain below.
#[derive(Clone, Debug, PartialEq)]
pub struct CopyPlan {
    /// Strategy for copies of `threshold` bytes or more.
    pub strategy: Strategy,
    /// Smallest copy that uses `strategy` (`usize::MAX`: never).
    pub threshold: usize,
    /// Where the plan came from (`stored`, `tuned`, `FASTMSG_COPY`, …).
    pub source: String,
    /// The measurements behind a tuned plan.
    pub samples: Vec<ProbeResult>,
}

impl CopyPlan {
    /// Plain copies only.
    pub fn plain(source: &str) -> CopyPlan {
        CopyPlan {
            strategy: Strategy::Plain,
            threshold: usize::MAX,
            source: source.to_owned(),
            samples: Vec::new(),
        }
    }
}

/// One candidate measured by [`tune`]: pipeline throughput through a ring
/// of frames with copies of `chunk` bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProbeResult {
    /// Bytes per copy.
    pub chunk: usize,
    /// Median GB/s (1e9 B/s) with plain copies.
    pub plain_gb_s: f64,
    /// Median GB/s with streaming stores.
    pub stream_gb_s: f64,
}

/// `FASTMSG_COPY` or the stored plan could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CopyPlanError {
    /// `FASTMSG_COPY` has a value this build does not know.
    #[error("FASTMSG_COPY={0:?}: expected auto, plain, stream, stream:BYTES or tune")]
    BadEnv(String),
    /// The plan file could not be read or written.
    #[error("copy plan {path}: {source}")]
    Io {
        /// The plan file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The plan file is not one this build wrote, or is for another CPU.
    #[error("copy plan {path}: {what}; delete it to measure again")]
    BadFile {
        /// The plan file.
        path: PathBuf,
        /// What was wrong.
        what: String,
    },
    /// Neither `XDG_CACHE_HOME` nor `HOME` is set.
    #[error("no cache directory: neither XDG_CACHE_HOME nor HOME is set")]
    NoCacheDir,
}

// ---------------------------------------------------------------------------
// The hot path.

/// Copies of at least this many bytes take the slow path; 0 until the plan
/// is settled (so the first call settles it), `usize::MAX` for plain only.
/// Relaxed everywhere: it is a hint read on its own; the plan it stands for
/// is published by the `OnceLock`.
static STREAM_FROM: AtomicUsize = AtomicUsize::new(0);
/// Which streaming kernel the CPU supports (see `Kernel`), set with the plan.
static KERNEL: AtomicU8 = AtomicU8::new(KERNEL_NONE);
static PLAN: OnceLock<CopyPlan> = OnceLock::new();

const KERNEL_NONE: u8 = 0;
const KERNEL_SSE2: u8 = 1;
const KERNEL_AVX2: u8 = 2;

/// Copy `n` bytes from `src` to `dst` (a frame in shared or ring memory),
/// with the machine's [`CopyPlan`].
///
/// # Safety
/// `src` valid for `n` reads, `dst` valid for `n` writes, no overlap.
#[inline(always)]
pub unsafe fn copy_to_frame(dst: *mut u8, src: *const u8, n: usize) {
    if n < STREAM_FROM.load(Ordering::Relaxed) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { core::ptr::copy_nonoverlapping(src, dst, n) }
    } else {
        // SAFETY: forwarded from the caller's contract.
        unsafe { copy_planned(dst, src, n) }
    }
}

/// The slow path: settle the plan if needed, then copy by it.
///
/// # Safety
/// As [`copy_to_frame`].
#[cold]
#[inline(never)]
unsafe fn copy_planned(dst: *mut u8, src: *const u8, n: usize) {
    let p = plan();
    if p.strategy == Strategy::Stream && n >= p.threshold {
        // SAFETY: forwarded from the caller's contract.
        unsafe { copy_stream(dst, src, n, KERNEL.load(Ordering::Relaxed)) }
    } else {
        // SAFETY: forwarded from the caller's contract.
        unsafe { core::ptr::copy_nonoverlapping(src, dst, n) }
    }
}

/// The plan in force, settling it on first use from `FASTMSG_COPY`, the
/// stored plan, or a measurement (see the module docs). Problems are
/// reported once on stderr and fall back to plain copies, which are always
/// correct.
pub fn plan() -> &'static CopyPlan {
    PLAN.get_or_init(|| {
        let p = settle().unwrap_or_else(|e| {
            eprintln!("fastmsg: {e}; using plain copies");
            CopyPlan::plain("fallback")
        });
        install(&p);
        p
    })
}

fn install(p: &CopyPlan) {
    KERNEL.store(detect_kernel(), Ordering::Relaxed);
    let from = if p.strategy == Strategy::Stream && detect_kernel() != KERNEL_NONE {
        p.threshold.max(1)
    } else {
        usize::MAX
    };
    STREAM_FROM.store(from, Ordering::Relaxed);
}

fn settle() -> Result<CopyPlan, CopyPlanError> {
    let env = std::env::var("FASTMSG_COPY").unwrap_or_default();
    match parse_env(&env)? {
        EnvChoice::Fixed(p) => Ok(p),
        EnvChoice::Auto => load_or_tune(false),
        EnvChoice::Tune => load_or_tune(true),
    }
}

enum EnvChoice {
    Auto,
    Tune,
    Fixed(CopyPlan),
}

fn parse_env(v: &str) -> Result<EnvChoice, CopyPlanError> {
    let bad = || CopyPlanError::BadEnv(v.to_owned());
    Ok(match v.trim() {
        "" | "auto" => EnvChoice::Auto,
        "tune" => EnvChoice::Tune,
        "plain" => EnvChoice::Fixed(CopyPlan::plain("FASTMSG_COPY")),
        s if s == "stream" || s.starts_with("stream:") => {
            let threshold = match s.strip_prefix("stream:") {
                Some(b) => b.parse::<usize>().map_err(|_| bad())?,
                None => 4096,
            };
            EnvChoice::Fixed(CopyPlan {
                strategy: Strategy::Stream,
                threshold,
                source: "FASTMSG_COPY".to_owned(),
                samples: Vec::new(),
            })
        }
        _ => return Err(bad()),
    })
}

// ---------------------------------------------------------------------------
// Streaming copy kernels.

fn detect_kernel() -> u8 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            KERNEL_AVX2
        } else {
            // SSE2 is part of the x86_64 baseline.
            KERNEL_SSE2
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        KERNEL_NONE
    }
}

/// Copy with streaming stores if `kernel` names one, else plainly.
///
/// # Safety
/// As [`copy_to_frame`]; `kernel` must come from `detect_kernel` on this CPU.
unsafe fn copy_stream(dst: *mut u8, src: *const u8, n: usize, kernel: u8) {
    #[cfg(target_arch = "x86_64")]
    {
        if kernel == KERNEL_AVX2 {
            // SAFETY: the caller's contract, and AVX2 was detected at run time.
            return unsafe { x86::stream_avx2(dst, src, n) };
        }
        if kernel == KERNEL_SSE2 {
            // SAFETY: the caller's contract; SSE2 is baseline on x86_64.
            return unsafe { x86::stream_sse2(dst, src, n) };
        }
    }
    let _ = kernel;
    // SAFETY: the caller's contract.
    unsafe { core::ptr::copy_nonoverlapping(src, dst, n) }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::{
        __m128i, __m256i, _mm256_loadu_si256, _mm256_stream_si256, _mm_loadu_si128, _mm_sfence,
        _mm_stream_si128,
    };
    use core::ptr::copy_nonoverlapping;

    /// Streaming copy with 32-byte AVX2 stores, 128 bytes per step.
    ///
    /// # Safety
    /// `src` valid for `n` reads, `dst` for `n` writes, no overlap; the CPU
    /// supports AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn stream_avx2(dst: *mut u8, src: *const u8, n: usize) {
        let head = dst.align_offset(32).min(n);
        // SAFETY: (1) the head, body and tail ranges below partition
        // `0..n`, so every read is inside `src[..n]` and every write inside
        // `dst[..n]`; (2) body stores go to `dst + head + 32k`, 32-byte
        // aligned as `_mm256_stream_si256` requires; loads are unaligned
        // (`loadu`); (3) AVX2 is available per the caller's contract.
        unsafe {
            copy_nonoverlapping(src, dst, head);
            let (mut d, mut s, mut left) = (dst.add(head), src.add(head), n - head);
            while left >= 128 {
                let a = _mm256_loadu_si256(s as *const __m256i);
                let b = _mm256_loadu_si256(s.add(32) as *const __m256i);
                let c = _mm256_loadu_si256(s.add(64) as *const __m256i);
                let e = _mm256_loadu_si256(s.add(96) as *const __m256i);
                _mm256_stream_si256(d as *mut __m256i, a);
                _mm256_stream_si256(d.add(32) as *mut __m256i, b);
                _mm256_stream_si256(d.add(64) as *mut __m256i, c);
                _mm256_stream_si256(d.add(96) as *mut __m256i, e);
                (d, s, left) = (d.add(128), s.add(128), left - 128);
            }
            while left >= 32 {
                let a = _mm256_loadu_si256(s as *const __m256i);
                _mm256_stream_si256(d as *mut __m256i, a);
                (d, s, left) = (d.add(32), s.add(32), left - 32);
            }
            copy_nonoverlapping(s, d, left);
        }
        // Streaming stores are weakly ordered: fence them before the
        // caller's Release store publishes the frame (SYNC POINT rq-publish
        // relies on plain x86 store order, which they do not follow).
        _mm_sfence();
    }

    /// Streaming copy with 16-byte SSE2 stores, 64 bytes per step.
    ///
    /// # Safety
    /// `src` valid for `n` reads, `dst` for `n` writes, no overlap.
    pub(super) unsafe fn stream_sse2(dst: *mut u8, src: *const u8, n: usize) {
        let head = dst.align_offset(16).min(n);
        // SAFETY: as in `stream_avx2`, with 16-byte aligned stores; SSE2 is
        // part of the x86_64 baseline.
        unsafe {
            copy_nonoverlapping(src, dst, head);
            let (mut d, mut s, mut left) = (dst.add(head), src.add(head), n - head);
            while left >= 64 {
                for k in 0..4 {
                    let a = _mm_loadu_si128(s.add(16 * k) as *const __m128i);
                    _mm_stream_si128(d.add(16 * k) as *mut __m128i, a);
                }
                (d, s, left) = (d.add(64), s.add(64), left - 64);
            }
            while left >= 16 {
                let a = _mm_loadu_si128(s as *const __m128i);
                _mm_stream_si128(d as *mut __m128i, a);
                (d, s, left) = (d.add(16), s.add(16), left - 16);
            }
            copy_nonoverlapping(s, d, left);
            // Fence the streaming stores before the caller publishes.
            _mm_sfence();
        }
    }
}

// ---------------------------------------------------------------------------
// Measuring.

/// Chunk sizes [`tune`] measures (bytes per copy into a frame).
pub const PROBE_CHUNKS: [usize; 4] = [1024, 4096, 8192, 65536];
/// Bytes of the frame ring the probe cycles through (32 × 8 KiB).
const RING_BYTES: usize = 256 * 1024;
/// Bytes moved per probe.
const PROBE_BYTES: usize = 24 << 20;

/// Measure both strategies at each of [`PROBE_CHUNKS`] and pick a plan
/// (rule in the module docs). Takes about 0.1–0.3 s on an idle machine.
pub fn tune() -> CopyPlan {
    let kernel = detect_kernel();
    let mut samples = Vec::new();
    for &chunk in &PROBE_CHUNKS {
        let (mut p, mut s) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            p.push(probe(Strategy::Plain, chunk, PROBE_BYTES, kernel));
            s.push(probe(Strategy::Stream, chunk, PROBE_BYTES, kernel));
        }
        samples.push(ProbeResult {
            chunk,
            plain_gb_s: median(&mut p),
            stream_gb_s: median(&mut s),
        });
    }
    choose(samples, kernel != KERNEL_NONE)
}

/// The decision rule, apart from the measuring (so it can be tested).
fn choose(samples: Vec<ProbeResult>, can_stream: bool) -> CopyPlan {
    let mut threshold = usize::MAX;
    if can_stream {
        for r in samples.iter().rev() {
            if r.stream_gb_s > 1.05 * r.plain_gb_s {
                threshold = r.chunk;
            } else {
                break;
            }
        }
    }
    CopyPlan {
        strategy: if threshold == usize::MAX {
            Strategy::Plain
        } else {
            Strategy::Stream
        },
        threshold,
        source: "tuned".to_owned(),
        samples,
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Pipeline throughput in GB/s: a producer copies `chunk`-byte pieces of a
/// 1 MiB source into a [`RING_BYTES`] ring of frames with `strategy`; a
/// consumer thread copies each frame out into its own 1 MiB buffer and
/// hands the frame back — the shape of a streamed send and its receive.
pub fn probe(strategy: Strategy, chunk: usize, total: usize, kernel: u8) -> f64 {
    use std::sync::atomic::AtomicU64;
    const SRC: usize = 1 << 20;
    let chunk = chunk.clamp(64, RING_BYTES);
    let frames = (RING_BYTES / chunk).max(2);
    let steps = (total / chunk).max(frames) as u64;
    let src = vec![0x5au8; SRC.max(chunk)];
    let mut ring = vec![0u8; frames * chunk];
    let ring_addr = ring.as_mut_ptr() as usize;
    let produced = AtomicU64::new(0);
    let consumed = AtomicU64::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut dst = vec![0u8; SRC.max(chunk)];
            let mut at = 0;
            for i in 0..steps {
                // SYNC POINT probe-produce (acquire side).
                wait_for(&produced, i + 1, Ordering::Acquire);
                let f = (i % frames as u64) as usize;
                if at + chunk > dst.len() {
                    at = 0;
                }
                // SAFETY: frame `f` lies inside `ring` (f < frames), the
                // producer published it (probe-produce) and will not write
                // it again before we hand it back (probe-consume); `dst`
                // is ours and `at + chunk <= dst.len()`.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        (ring_addr as *const u8).add(f * chunk),
                        dst.as_mut_ptr().add(at),
                        chunk,
                    );
                }
                at += chunk;
                // SYNC POINT probe-consume (release side).
                consumed.store(i + 1, Ordering::Release);
            }
            std::hint::black_box(&dst);
        });
        let mut at = 0;
        for i in 0..steps {
            // A frame is free once the consumer has taken its last lap.
            // SYNC POINT probe-consume (acquire side).
            wait_for(
                &consumed,
                (i + 1).saturating_sub(frames as u64),
                Ordering::Acquire,
            );
            let f = (i % frames as u64) as usize;
            if at + chunk > src.len() {
                at = 0;
            }
            // SAFETY: frame `f` lies inside `ring`; the consumer finished
            // reading it (probe-consume) and reads it again only after we
            // publish (probe-produce); `src[at..at + chunk]` is in bounds.
            unsafe {
                let d = (ring_addr as *mut u8).add(f * chunk);
                let sp = src.as_ptr().add(at);
                match strategy {
                    Strategy::Plain => core::ptr::copy_nonoverlapping(sp, d, chunk),
                    Strategy::Stream => copy_stream(d, sp, chunk, kernel),
                }
            }
            at += chunk;
            // SYNC POINT probe-produce (release side).
            produced.store(i + 1, Ordering::Release);
        }
    });
    let secs = t0.elapsed().as_secs_f64();
    drop(ring);
    (steps as f64 * chunk as f64) / secs / 1e9
}

/// Spin (yielding now and then, so a shared core still makes progress)
/// until `at` reaches `want`.
fn wait_for(at: &std::sync::atomic::AtomicU64, want: u64, order: Ordering) {
    let mut spins = 0u32;
    while at.load(order) < want {
        spins += 1;
        if spins % 256 == 0 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

// ---------------------------------------------------------------------------
// Storing the plan.

/// Where the plan is stored.
///
/// # Errors
/// [`CopyPlanError::NoCacheDir`] when neither `XDG_CACHE_HOME` nor `HOME`
/// is set.
pub fn plan_path() -> Result<PathBuf, CopyPlanError> {
    let base = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(x) => PathBuf::from(x),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h).join(".cache"),
            None => return Err(CopyPlanError::NoCacheDir),
        },
    };
    Ok(base.join("fastmsg").join("copy-plan"))
}

/// This machine, as the plan file records it: CPU model and count.
pub fn machine_key() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{model} / {n} cpus")
}

/// The stored plan, or a fresh measurement (stored) when there is none,
/// it is for another machine, or `retune` is set. One process measures
/// while the others wait on the file lock.
fn load_or_tune(retune: bool) -> Result<CopyPlan, CopyPlanError> {
    let path = plan_path()?;
    if !retune {
        if let Ok(p) = load(&path) {
            return Ok(p);
        }
    }
    let io = |source| CopyPlanError::Io {
        path: path.clone(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path.with_extension("lock"))
        .map_err(io)?;
    let _held = FileLock::take(&lock);
    // Someone may have measured while we waited for the lock.
    if !retune {
        if let Ok(p) = load(&path) {
            return Ok(p);
        }
    }
    let p = tune();
    store(&path, &p)?;
    Ok(p)
}

/// An `flock` held until dropped (advisory; released at close anyway).
struct FileLock<'a>(&'a std::fs::File);

impl<'a> FileLock<'a> {
    fn take(f: &'a std::fs::File) -> FileLock<'a> {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a file descriptor we own and keep open for the
        // guard's life; no memory is passed. A failure (e.g. a file system
        // without locks) only means two processes may measure at once.
        let _ = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        FileLock(f)
    }
}

impl Drop for FileLock<'_> {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: as in `take`.
        let _ = unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Write `p` to `path` (through a temporary file and a rename, so readers
/// never see half a plan).
///
/// # Errors
/// [`CopyPlanError::Io`] naming the file.
pub fn store(path: &Path, p: &CopyPlan) -> Result<(), CopyPlanError> {
    let io = |source| CopyPlanError::Io {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    writeln!(f, "{}", render(p)).map_err(io)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io)
}

fn render(p: &CopyPlan) -> String {
    let mut s = String::from("# fastmsg copy plan (seed 004 §6); delete to measure again\n");
    s += "version=1\n";
    s += &format!("machine={}\n", machine_key());
    s += &format!("strategy={}\n", p.strategy.name());
    let t = if p.threshold == usize::MAX {
        "never".to_owned()
    } else {
        p.threshold.to_string()
    };
    s += &format!("threshold={t}\n");
    for r in &p.samples {
        s += &format!(
            "sample={} {:.3} {:.3}\n",
            r.chunk, r.plain_gb_s, r.stream_gb_s
        );
    }
    s
}

/// Read a stored plan; it must be version 1 and for this machine.
///
/// # Errors
/// [`CopyPlanError::Io`] if unreadable, [`CopyPlanError::BadFile`] naming
/// the first thing wrong.
pub fn load(path: &Path) -> Result<CopyPlan, CopyPlanError> {
    let text = std::fs::read_to_string(path).map_err(|source| CopyPlanError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse(&text, &machine_key()).map_err(|what| CopyPlanError::BadFile {
        path: path.to_owned(),
        what,
    })
}

fn parse(text: &str, machine: &str) -> Result<CopyPlan, String> {
    let (mut version, mut mach, mut strategy, mut threshold) = (None, None, None, None);
    let mut samples = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| format!("line {line:?} is not key=value"))?;
        match k {
            "version" => version = Some(v),
            "machine" => mach = Some(v),
            "strategy" => {
                strategy = Some(match v {
                    "plain" => Strategy::Plain,
                    "stream" => Strategy::Stream,
                    _ => return Err(format!("unknown strategy {v:?}")),
                })
            }
            "threshold" => {
                threshold = Some(match v {
                    "never" => usize::MAX,
                    n => n.parse().map_err(|_| format!("bad threshold {n:?}"))?,
                })
            }
            "sample" => {
                let f: Vec<&str> = v.split_whitespace().collect();
                let bad = || format!("bad sample {v:?}");
                if f.len() != 3 {
                    return Err(bad());
                }
                samples.push(ProbeResult {
                    chunk: f[0].parse().map_err(|_| bad())?,
                    plain_gb_s: f[1].parse().map_err(|_| bad())?,
                    stream_gb_s: f[2].parse().map_err(|_| bad())?,
                });
            }
            _ => return Err(format!("unknown key {k:?}")),
        }
    }
    if version != Some("1") {
        return Err(format!("version {version:?}, this build reads 1"));
    }
    if mach != Some(machine) {
        return Err(format!("made on {mach:?}, this is {machine:?}"));
    }
    Ok(CopyPlan {
        strategy: strategy.ok_or("no strategy")?,
        threshold: threshold.ok_or("no threshold")?,
        source: "stored".to_owned(),
        samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length 0..600 at every dst/src misalignment 0..64 copies
    /// exactly, and the bytes around the destination stay untouched.
    #[test]
    fn stream_copy_is_exact_at_any_alignment() {
        let kernel = detect_kernel();
        let src: Vec<u8> = (0..800u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut dst = vec![0u8; 800];
        for kern in [kernel, KERNEL_SSE2.min(kernel), KERNEL_NONE] {
            for n in (0..600).step_by(7).chain([32, 64, 127, 128, 129, 256]) {
                for (da, sa) in [(0, 0), (1, 0), (0, 3), (13, 31), (31, 1), (63, 17)] {
                    dst.fill(0xee);
                    // SAFETY: da + n <= 663 < 800 and sa + n <= 663 < 800;
                    // distinct vectors; `kern` is this CPU's kernel or a
                    // lesser one.
                    unsafe { copy_stream(dst.as_mut_ptr().add(da), src.as_ptr().add(sa), n, kern) };
                    assert_eq!(&dst[da..da + n], &src[sa..sa + n], "n={n} da={da} sa={sa}");
                    assert!(dst[..da].iter().all(|&b| b == 0xee), "wrote before dst");
                    assert!(dst[da + n..].iter().all(|&b| b == 0xee), "wrote past dst");
                }
            }
        }
    }

    #[test]
    fn plan_file_round_trips_and_rejects_others() {
        let p = choose(
            vec![
                ProbeResult {
                    chunk: 1024,
                    plain_gb_s: 5.0,
                    stream_gb_s: 4.0,
                },
                ProbeResult {
                    chunk: 4096,
                    plain_gb_s: 5.0,
                    stream_gb_s: 6.0,
                },
            ],
            true,
        );
        assert_eq!((p.strategy, p.threshold), (Strategy::Stream, 4096));
        let text = render(&p);
        let back = parse(&text, &machine_key()).unwrap();
        assert_eq!((back.strategy, back.threshold), (p.strategy, p.threshold));
        assert_eq!(back.samples, p.samples);
        let e = parse(&text, "another cpu").unwrap_err();
        assert!(e.contains("made on"), "{e}");
        let e = parse(&text.replace("version=1", "version=9"), &machine_key()).unwrap_err();
        assert!(e.contains("version"), "{e}");
        let e = parse(&text.replace("stream\n", "warp\n"), &machine_key()).unwrap_err();
        assert!(e.contains("warp"), "{e}");
        assert!(parse("garbage", &machine_key()).is_err());
    }

    #[test]
    fn choose_needs_a_clear_win_up_to_the_largest_chunk() {
        let r = |chunk, p, s| ProbeResult {
            chunk,
            plain_gb_s: p,
            stream_gb_s: s,
        };
        // Stream wins only at the small size: not a threshold.
        let p = choose(vec![r(1024, 5.0, 9.0), r(4096, 5.0, 5.1)], true);
        assert_eq!(p.strategy, Strategy::Plain);
        // Wins from 4096 on.
        let p = choose(
            vec![r(1024, 5.0, 5.0), r(4096, 5.0, 6.0), r(8192, 5.0, 7.0)],
            true,
        );
        assert_eq!((p.strategy, p.threshold), (Strategy::Stream, 4096));
        // No streaming kernel: plain whatever the numbers.
        let p = choose(vec![r(4096, 1.0, 9.0)], false);
        assert_eq!(p.strategy, Strategy::Plain);
    }

    #[test]
    fn env_values_parse_or_name_the_bad_one() {
        assert!(matches!(parse_env("").unwrap(), EnvChoice::Auto));
        assert!(matches!(parse_env("tune").unwrap(), EnvChoice::Tune));
        match parse_env("stream:2048").unwrap() {
            EnvChoice::Fixed(p) => assert_eq!((p.strategy, p.threshold), (Strategy::Stream, 2048)),
            _ => panic!("stream:2048 is a fixed plan"),
        }
        let e = parse_env("stream:lots").err().unwrap();
        assert!(e.to_string().contains("stream:lots"), "{e}");
        assert!(parse_env("fast").is_err());
    }

    #[test]
    fn probe_moves_data_and_reports_a_rate() {
        let g = probe(Strategy::Stream, 4096, 1 << 20, detect_kernel());
        assert!(g.is_finite() && g > 0.0, "{g}");
    }
}
