//! Moving pieces into frames: the one place payload bytes are copied on the
//! send side, and its self-tuning — HPVM §6 ("PCI chipset pacing") in
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
//! - [`Strategy::Vector`]: an explicit vector loop (AVX2 or SSE2, checked
//!   at run time) with ordinary stores. The C library switches to `rep
//!   movsb` for copies past a couple of KiB; on some CPUs and hypervisors
//!   that is much slower than a plain vector loop (measured here: see
//!   `BENCHMARKS.md`).
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
//! the strategies interleaved, medians of three. Every plan "strategy S
//! from chunk size T on" is scored by the product of its throughputs over
//! the measured chunk sizes (a geometric mean: each size counts alike);
//! the best plan is taken if it beats all-plain by more than 5 %, else the
//! plan is plain.
//!
//! The plan is stored in `$XDG_CACHE_HOME/fastmsg/copy-plan` (else
//! `$HOME/.cache/fastmsg/copy-plan`), keyed by CPU model and count, only by
//! an explicit step: `fmbench tune-copy`, or `FASTMSG_COPY=tune` (measure
//! now and store; processes that find no valid plan take an `flock` on the
//! file so only one of them measures). The library never measures or
//! writes a file by itself. `FASTMSG_COPY` chooses: `auto` (default: the
//! stored plan for this machine if there is one, else plain copies, which
//! are always correct and the measured best below a few KiB), `plain`,
//! `vector[:BYTES]` or `stream[:BYTES]` (from BYTES on, default 4096),
//! `tune`.
//!
//! The hot path ([`copy_to_frame`]) costs one relaxed load and one compare
//! more than a plain copy; the plan is settled on the first call (or by
//! [`plan`]).

#![allow(unsafe_code)]

pub mod kernel;
pub mod store;
pub mod tune;

use self::kernel::{copy_stream, copy_vector, detect_kernel, KERNEL_NONE};
use crate::sync::{AtomicU8, AtomicUsize, Ordering};
use std::path::PathBuf;
use std::sync::OnceLock;

/// How a copy into a frame is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// `copy_nonoverlapping` (the C library's `memcpy`).
    Plain,
    /// A vector loop with ordinary stores (no `rep movsb`).
    Vector,
    /// Non-temporal stores for the aligned body, then `sfence`.
    Stream,
}

impl Strategy {
    /// The name used in `FASTMSG_COPY` and the plan file.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Plain => "plain",
            Strategy::Vector => "vector",
            Strategy::Stream => "stream",
        }
    }

    /// The strategy called `name`.
    pub fn from_name(name: &str) -> Option<Strategy> {
        [Strategy::Plain, Strategy::Vector, Strategy::Stream]
            .into_iter()
            .find(|s| s.name() == name)
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

/// One chunk size measured by [`tune`]: pipeline throughput through a
/// ring of frames with copies of `chunk` bytes, per strategy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProbeResult {
    /// Bytes per copy.
    pub chunk: usize,
    /// Median GB/s (1e9 B/s) with plain copies.
    pub plain_gb_s: f64,
    /// Median GB/s with the vector loop.
    pub vector_gb_s: f64,
    /// Median GB/s with streaming stores.
    pub stream_gb_s: f64,
}

impl ProbeResult {
    /// The throughput measured for `s`.
    pub fn gb_s(&self, s: Strategy) -> f64 {
        match s {
            Strategy::Plain => self.plain_gb_s,
            Strategy::Vector => self.vector_gb_s,
            Strategy::Stream => self.stream_gb_s,
        }
    }
}

/// What `FASTMSG_COPY` may say.
pub(crate) const EXPECTED: &str = "expected auto, plain, vector[:BYTES], stream[:BYTES] or tune";

/// `FASTMSG_COPY` or the stored plan could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CopyPlanError {
    /// `FASTMSG_COPY` has a value this build does not know.
    #[error("FASTMSG_COPY={0:?}: {EXPECTED}")]
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

/// Copies of at least this many bytes take the planned path; 0 until the
/// plan is settled (so the first call settles it), `usize::MAX` for plain
/// only.
/// Relaxed everywhere: it is a hint read on its own; the plan it stands for
/// is published by the `OnceLock`.
static STREAM_FROM: AtomicUsize = AtomicUsize::new(0);
/// Which vector kernel the CPU supports (`KERNEL_*`), set with the plan.
static KERNEL: AtomicU8 = AtomicU8::new(KERNEL_NONE);
static PLAN: OnceLock<CopyPlan> = OnceLock::new();

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

/// The planned path: settle the plan if needed, then copy by it.
///
/// # Safety
/// As [`copy_to_frame`].
#[inline(never)]
unsafe fn copy_planned(dst: *mut u8, src: *const u8, n: usize) {
    let p = plan();
    let s = if n >= p.threshold {
        p.strategy
    } else {
        Strategy::Plain
    };
    // SAFETY: forwarded from the caller's contract; the kernel was detected
    // on this CPU by `install`.
    unsafe { copy_with(s, dst, src, n, KERNEL.load(Ordering::Relaxed)) }
}

/// Copy with strategy `s`.
///
/// # Safety
/// As [`copy_to_frame`]; `kernel` must come from `detect_kernel` on this
/// CPU (or be a lesser one).
pub unsafe fn copy_with(s: Strategy, dst: *mut u8, src: *const u8, n: usize, kernel: u8) {
    match s {
        // SAFETY: forwarded from the caller's contract.
        Strategy::Plain => unsafe { core::ptr::copy_nonoverlapping(src, dst, n) },
        // SAFETY: forwarded from the caller's contract.
        Strategy::Vector => unsafe { copy_vector(dst, src, n, kernel) },
        // SAFETY: forwarded from the caller's contract.
        Strategy::Stream => unsafe { copy_stream(dst, src, n, kernel) },
    }
}

/// The plan in force, settling it on first use from `FASTMSG_COPY`, the
/// stored plan, or a measurement (see the module docs). Problems are
/// reported once on stderr and fall back to plain copies, which are always
/// correct.
pub fn plan() -> &'static CopyPlan {
    PLAN.get_or_init(|| {
        let p = settle().unwrap_or_else(|e| {
            tracing::warn!("{e}; using plain copies");
            CopyPlan::plain("fallback")
        });
        install(&p);
        p
    })
}

fn install(p: &CopyPlan) {
    KERNEL.store(detect_kernel(), Ordering::Relaxed);
    let from = if p.strategy != Strategy::Plain && detect_kernel() != KERNEL_NONE {
        p.threshold.max(1)
    } else {
        usize::MAX
    };
    STREAM_FROM.store(from, Ordering::Relaxed);
}

fn settle() -> Result<CopyPlan, CopyPlanError> {
    let env = crate::settings::var("FASTMSG_COPY").unwrap_or_default();
    if let Some(p) = parse_choice(&env) {
        return Ok(p);
    }
    match parse_env(&env)? {
        EnvChoice::Tune => store::tune_and_store(),
        // No measurement and no file written behind the user's back: the
        // stored plan if `fmbench tune-copy` (or `tune`) made one for this
        // machine, else plain copies.
        EnvChoice::Auto | EnvChoice::Fixed(_) => Ok(stored_or_plain(store::plan_path())),
    }
}

/// The plan stored at `path`, else plain copies. A plan that exists but
/// cannot be used (unreadable, corrupt, from another build or CPU) is said
/// once, as a warning: the user tuned, and would otherwise not learn that
/// the tuning is ignored.
fn stored_or_plain(path: Result<std::path::PathBuf, CopyPlanError>) -> CopyPlan {
    match path.and_then(|path| store::load(&path)) {
        Ok(p) => p,
        Err(CopyPlanError::NoCacheDir) => CopyPlan::plain("default (no stored plan)"),
        Err(CopyPlanError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            CopyPlan::plain("default (no stored plan)")
        }
        Err(e) => {
            tracing::warn!("{e}; using plain copies");
            CopyPlan::plain("default (stored plan unusable)")
        }
    }
}

/// The fixed plan a `FASTMSG_COPY` value such as `plain` or `vector:4096`
/// names (`None` for `auto`, `tune` or a bad value).
pub fn parse_choice(v: &str) -> Option<CopyPlan> {
    match parse_env(v) {
        Ok(EnvChoice::Fixed(p)) => Some(p),
        _ => None,
    }
}

/// Whether `v` is a `FASTMSG_COPY` value this build knows (the
/// configuration checks it at start).
///
/// # Errors
/// [`CopyPlanError::BadEnv`].
pub(crate) fn check_env(v: &str) -> Result<(), CopyPlanError> {
    parse_env(v).map(|_| ())
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
        s => {
            let (name, bytes) = s.split_once(':').unwrap_or((s, "4096"));
            let strategy = Strategy::from_name(name)
                .filter(|&s| s != Strategy::Plain)
                .ok_or_else(bad)?;
            EnvChoice::Fixed(CopyPlan {
                strategy,
                threshold: bytes.parse::<usize>().map_err(|_| bad())?,
                source: "FASTMSG_COPY".to_owned(),
                samples: Vec::new(),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_plan_and_an_unusable_one_are_told_apart() {
        let dir = std::env::temp_dir().join(format!("fastmsg-plan-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = stored_or_plain(Ok(dir.join("none")));
        assert_eq!(missing.source, "default (no stored plan)");
        assert_eq!(
            stored_or_plain(Err(CopyPlanError::NoCacheDir)).source,
            "default (no stored plan)"
        );
        let bad = dir.join("bad");
        std::fs::write(&bad, "this is not a copy plan\n").unwrap();
        let unusable = stored_or_plain(Ok(bad));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(unusable.source, "default (stored plan unusable)");
        assert_eq!(unusable.strategy, Strategy::Plain);
    }

    #[test]
    fn env_values_parse_or_name_the_bad_one() {
        assert!(matches!(parse_env("").unwrap(), EnvChoice::Auto));
        assert!(matches!(parse_env("auto").unwrap(), EnvChoice::Auto));
        assert!(matches!(parse_env("tune").unwrap(), EnvChoice::Tune));
        let fixed = |v| match parse_env(v).unwrap() {
            EnvChoice::Fixed(p) => (p.strategy, p.threshold),
            _ => panic!("{v} is a fixed plan"),
        };
        assert_eq!(fixed("plain"), (Strategy::Plain, usize::MAX));
        assert_eq!(fixed("stream:2048"), (Strategy::Stream, 2048));
        assert_eq!(fixed("vector"), (Strategy::Vector, 4096));
        let e = parse_env("stream:lots").err().unwrap();
        assert!(e.to_string().contains("stream:lots"), "{e}");
        assert!(parse_env("fast").is_err());
        assert!(parse_env("plain:64").is_err());
    }

    /// Whatever plan is in force, `copy_to_frame` copies exactly, small
    /// and large.
    #[test]
    fn copy_to_frame_is_exact() {
        let src: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let mut dst = vec![0u8; 100_000];
        for n in [0, 1, 28, 29, 1000, 4096, 8192, 65_537, 99_999] {
            dst.fill(0);
            // SAFETY: n <= 99_999 < both lengths; distinct vectors.
            unsafe { copy_to_frame(dst.as_mut_ptr().add(1), src.as_ptr(), n) };
            assert_eq!(&dst[1..1 + n], &src[..n], "n={n}");
        }
    }
}
