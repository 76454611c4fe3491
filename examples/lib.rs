//! Helpers shared by the example and benchmark programs: a cheap clock for
//! per-iteration timestamps, percentiles, one-shot flags set by handlers,
//! and the Bale kernels' streams and report lines.

use std::time::Instant;

pub mod memory;
pub mod report;

/// A fast clock: the TSC on x86_64 (calibrated against `Instant`), else
/// `Instant`. Reads cost a few ns on bare metal, so per-iteration timing
/// barely perturbs a sub-microsecond measurement.
///
/// Some virtual machines trap or coarsen the TSC: the value then moves in
/// steps of many ticks (26 ticks, 9.6 ns, on the VM the figures in
/// BENCHMARKS.md come from), and a percentile of per-iteration samples can
/// only take values on that grid. [`Clock::step_ns`] says how coarse the
/// clock is, and [`grouped_median`] reads a median between the steps.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    ns_per_tick: f64,
    origin: Instant,
    /// The clock's step, in ticks (1 where it counts every tick).
    step_ticks: u64,
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
                step_ticks: Self::measure_step(),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Clock {
            ns_per_tick: 1.0,
            origin,
            step_ticks: 1,
        }
    }

    /// The clock's step in ticks: the largest `d` in 4..=64 such that at
    /// least 90 % of 20,000 differences between two reads (with 0 to 49
    /// short loop turns between them, so that the differences spread) lie
    /// within one tick of a multiple of `d`; 1 if there is none. A clock
    /// that counts every tick spreads its differences over all residues
    /// (for `d` = 4 only 3 of 4 residues are within a tick: 75 %).
    #[cfg(target_arch = "x86_64")]
    fn measure_step() -> u64 {
        let deltas: Vec<u64> = (0..20_000u64)
            .map(|i| {
                let a = Self::tsc();
                for k in 0..i % 50 {
                    std::hint::black_box(k);
                }
                Self::tsc() - a
            })
            .collect();
        (4..=64u64)
            .rev()
            .find(|&d| {
                let near = deltas
                    .iter()
                    .filter(|&&x| matches!(x % d, 0 | 1) || x % d == d - 1)
                    .count();
                near * 10 >= deltas.len() * 9
            })
            .unwrap_or(1)
    }

    /// The clock's step in nanoseconds: the grid a single timed interval
    /// falls on (about 0.4 ns on a TSC that counts every tick).
    pub fn step_ns(&self) -> f64 {
        self.ns(self.step_ticks)
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

/// The median of samples that a clock quantised to a grid `step` wide
/// (sorted in place): each sample stands for a bin `step` wide around its
/// value, and the median is read inside its bin by the share of samples
/// below it (the grouped median of binned data). Two distributions whose
/// plain medians land on the same or neighbouring grid points are then
/// told apart by how their samples fill the bins; on a fine clock the
/// bins hold single values and this is the plain median to within `step`.
pub fn grouped_median(v: &mut [f64], step: f64) -> f64 {
    let m = percentile(v, 50.0);
    if !m.is_finite() || step <= 0.0 {
        return m;
    }
    let low = m - step / 2.0;
    let below = v.iter().filter(|&&x| x < low).count();
    let inside = v.iter().filter(|&&x| x >= low && x < low + step).count();
    if inside == 0 {
        return m;
    }
    low + (v.len() as f64 / 2.0 - below as f64) / inside as f64 * step
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

/// The Bale kernels' shared parts, identical to those of the MPI
/// versions `fmbench` compares with: splitmix64 streams, the value table of
/// index-gather, and the block distribution of the table.
pub mod bale {
    /// Golden-ratio increment of splitmix64.
    pub const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

    /// The seed of `rank`'s stream `salt` (1: histogram, 2: index-gather,
    /// 3: random permutation, 4: sparse-matrix transpose).
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

#[cfg(test)]
mod tests {
    use super::grouped_median;

    /// Samples on a 10-wide grid: the plain median of both sets is 100,
    /// the grouped one tells that the second has more of its mass above.
    #[test]
    fn grouped_median_reads_between_grid_points() {
        let mut a = [90.0, 100.0, 100.0, 100.0, 110.0];
        // 1 below the bin [95, 105), 3 in it: 95 + (2.5 - 1) / 3 * 10.
        assert!((grouped_median(&mut a, 10.0) - 100.0).abs() < 1e-9);
        let mut b = [90.0, 100.0, 100.0, 110.0, 110.0, 110.0];
        let m = grouped_median(&mut b, 10.0);
        // Plain median lands on 110; 3 samples below its bin [105, 115),
        // 3 in it: 105 + (3 - 3) / 3 * 10 = 105.
        assert!((m - 105.0).abs() < 1e-9, "{m}");
        // A step of 0 gives the plain median.
        assert_eq!(grouped_median(&mut b, 0.0), 110.0);
        assert!(grouped_median(&mut [], 10.0).is_nan());
    }
}
