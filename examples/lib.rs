//! Helpers shared by the example and benchmark programs: a cheap clock for
//! per-iteration timestamps, percentiles, and one-shot flags set by handlers.

use std::time::Instant;

pub mod memory;

/// A fast clock: the TSC on x86_64 (calibrated against `Instant`), else
/// `Instant`. Reads cost a few ns, so per-iteration timing barely perturbs
/// a sub-microsecond measurement.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    ns_per_tick: f64,
    origin: Instant,
}

impl Clock {
    /// Calibrate (takes ~20 ms).
    pub fn new() -> Clock {
        let origin = Instant::now();
        #[cfg(target_arch = "x86_64")]
        {
            let t0 = Instant::now();
            let c0 = Self::tsc();
            while t0.elapsed().as_millis() < 20 {}
            let (t1, c1) = (Instant::now(), Self::tsc());
            let ns = (t1 - t0).as_nanos() as f64;
            Clock {
                ns_per_tick: ns / (c1 - c0) as f64,
                origin,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Clock {
            ns_per_tick: 1.0,
            origin,
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn tsc() -> u64 {
        // SAFETY: rdtsc has no preconditions on x86_64.
        #[allow(unsafe_code)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }

    /// A timestamp in clock ticks.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            Self::tsc()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self.origin.elapsed().as_nanos() as u64
        }
    }

    /// Ticks to nanoseconds.
    #[inline]
    pub fn ns(&self, ticks: u64) -> f64 {
        let _ = self.origin;
        ticks as f64 * self.ns_per_tick
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// The `p`-th percentile (0..=100) of `v` (sorted in place).
pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
    v[i.min(v.len() - 1)]
}

/// Median of `v`.
pub fn median(v: &mut [f64]) -> f64 {
    percentile(v, 50.0)
}

/// `main`'s exit for the example programs: on error, print the error as a
/// person reads it (its `Display` text with the hint, then each cause not
/// already in that text) on one stderr line tagged with the rank, and exit
/// with status 1. `fn main() -> Result<..>` would print `Debug` instead.
pub fn exit_report(result: Result<(), Box<dyn std::error::Error>>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            use std::io::Write;
            let line = format!("{}: error: {}\n", fastmsg::log::tag(), error_text(&*e));
            let _ = std::io::stderr().write_all(line.as_bytes());
            std::process::ExitCode::FAILURE
        }
    }
}

/// An error and its causes as one line, each cause once.
pub fn error_text(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let s = c.to_string();
        if !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
        cause = c.source();
    }
    text
}

/// This process's peak resident memory (`VmHWM` of `/proc/self/status`),
/// MiB; 0 where it cannot be read.
pub fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The Bale kernels' shared parts, identical to the MPI anchors'
/// (`../shared/anchors/common.h`): splitmix64 streams, the value table of
/// index-gather, and the block distribution of the table.
pub mod bale {
    /// Golden-ratio increment of splitmix64.
    pub const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

    /// The seed of `rank`'s stream `salt` (1: histogram, 2: index-gather).
    pub fn seed(rank: u32, salt: u64) -> u64 {
        0x1234_5678_9abc_def0 ^ salt.wrapping_mul(GOLDEN) ^ (u64::from(rank) << 32)
    }

    /// The next value of a splitmix64 stream.
    #[inline(always)]
    pub fn next(s: &mut u64) -> u64 {
        *s = s.wrapping_add(GOLDEN);
        let mut z = *s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Table entry `g`'s value in index-gather (and the histogram hash's
    /// weight).
    #[inline(always)]
    pub fn value(g: u64) -> u64 {
        let x = g.wrapping_mul(GOLDEN) ^ 0x00AB_CDEF_0123_4567;
        x.rotate_left(17)
    }

    /// A table of `t` entries split in blocks over `n` ranks: entries per
    /// rank, and `rank`'s block `[lo, hi)`.
    pub fn block(t: u64, n: u32, rank: u32) -> (u64, u64, u64) {
        let per = t.div_ceil(u64::from(n));
        let lo = (per * u64::from(rank)).min(t);
        let hi = (per * (u64::from(rank) + 1)).min(t);
        (per, lo, hi)
    }

    #[cfg(test)]
    mod tests {
        /// Values computed by `common.h`'s C functions (compiled with gcc):
        /// rank 3's index-gather stream, its first draw and that entry's
        /// value.
        #[test]
        fn streams_match_common_h() {
            let mut s = super::seed(3, 2);
            let a = super::next(&mut s);
            assert_eq!(a, 9_062_082_224_769_321_921);
            assert_eq!(super::value(a & ((1 << 20) - 1)), 2_592_108_579_282_845_555);
            assert_eq!(super::block(1 << 20, 3, 2), (349_526, 699_052, 1 << 20));
        }
    }
}
