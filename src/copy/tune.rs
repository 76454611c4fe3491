//! Measuring the strategies (HPVM §6's start-up test, in today's
//! terms): a producer/consumer pipeline through a ring of frames, and the
//! rule that turns the measurements into a [`CopyPlan`].

#![allow(unsafe_code)]

use super::kernel::{detect_kernel, KERNEL_NONE};
use super::{copy_with, CopyPlan, ProbeResult, Strategy};
use crate::sync::{AtomicU64, Ordering};
use std::time::Instant;

/// Chunk sizes [`tune`] measures (bytes per copy into a frame; a copy is
/// never longer than a frame, 8 KiB by default).
pub const PROBE_CHUNKS: [usize; 5] = [256, 1024, 2048, 4096, 8192];
/// Bytes of the frame ring the probe cycles through (32 × 8 KiB).
const RING_BYTES: usize = 256 * 1024;
/// Bytes moved per probe.
const PROBE_BYTES: usize = 16 << 20;

/// Measure the three strategies at each of [`PROBE_CHUNKS`] and pick a
/// plan (rule in the module docs). Takes about half a second on an idle
/// machine.
pub fn tune() -> CopyPlan {
    let kernel = detect_kernel();
    let mut samples = Vec::new();
    for &chunk in &PROBE_CHUNKS {
        let mut v: [Vec<f64>; 3] = Default::default();
        for _ in 0..3 {
            for (i, s) in [Strategy::Plain, Strategy::Vector, Strategy::Stream]
                .into_iter()
                .enumerate()
            {
                v[i].push(probe(s, chunk, PROBE_BYTES, kernel));
            }
        }
        samples.push(ProbeResult {
            chunk,
            plain_gb_s: median(&mut v[0]),
            vector_gb_s: median(&mut v[1]),
            stream_gb_s: median(&mut v[2]),
        });
    }
    choose(samples, kernel != KERNEL_NONE)
}

/// The decision rule, apart from the measuring (so it can be tested).
pub(super) fn choose(samples: Vec<ProbeResult>, can_vector: bool) -> CopyPlan {
    // Score of "strategy s from chunk samples[from] on": sum of log
    // throughputs (log of the geometric mean, times the count).
    let score = |s: Strategy, from: usize| -> f64 {
        samples
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let g = if i >= from { r.gb_s(s) } else { r.plain_gb_s };
                g.max(1e-9).ln()
            })
            .sum()
    };
    let plain = score(Strategy::Plain, 0);
    let mut best = (plain, Strategy::Plain, usize::MAX);
    if can_vector {
        for s in [Strategy::Vector, Strategy::Stream] {
            for (from, r) in samples.iter().enumerate() {
                let sc = score(s, from);
                if sc > best.0 {
                    best = (sc, s, r.chunk);
                }
            }
        }
    }
    // Leave plain only for a clear win: 5 % on the geometric mean.
    let n = samples.len().max(1) as f64;
    if ((best.0 - plain) / n).exp() < 1.05 {
        best = (plain, Strategy::Plain, usize::MAX);
    }
    CopyPlan {
        strategy: best.1,
        threshold: best.2,
        source: "tuned".to_owned(),
        samples,
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Pipeline throughput in GB/s: a producer copies `chunk`-byte pieces of a
/// 1 MiB source into a `RING_BYTES` ring of frames with `strategy`; a
/// consumer thread copies each frame out into its own 1 MiB buffer and
/// hands the frame back — the shape of a streamed send and its receive.
pub fn probe(strategy: Strategy, chunk: usize, total: usize, kernel: u8) -> f64 {
    const SRC: usize = 1 << 20;
    let chunk = chunk.clamp(64, RING_BYTES);
    let frames = (RING_BYTES / chunk).max(2);
    let steps = (total / chunk).max(frames) as u64;
    let src = vec![0x5au8; SRC.max(2 * chunk)];
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
                copy_with(strategy, d, src.as_ptr().add(at), chunk, kernel);
            }
            // Step the source by a little more than a chunk, so the
            // distance between source and frame sweeps the page offsets
            // as user buffers do (some copy routines are much slower at
            // some distances: see BENCHMARKS.md).
            at += chunk + 48;
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
fn wait_for(at: &AtomicU64, want: u64, order: Ordering) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn r(chunk: usize, plain: f64, vector: f64, stream: f64) -> ProbeResult {
        ProbeResult {
            chunk,
            plain_gb_s: plain,
            vector_gb_s: vector,
            stream_gb_s: stream,
        }
    }

    #[test]
    fn choose_takes_the_best_plan_only_for_a_clear_win() {
        // Streaming wins from 4 KiB on.
        let p = choose(
            vec![
                r(1024, 5.0, 5.0, 2.0),
                r(4096, 2.0, 2.0, 4.0),
                r(8192, 2.0, 2.0, 5.0),
            ],
            true,
        );
        assert_eq!((p.strategy, p.threshold), (Strategy::Stream, 4096));
        // The vector loop wins everywhere.
        let p = choose(vec![r(256, 5.0, 6.0, 1.0), r(4096, 2.0, 5.0, 4.0)], true);
        assert_eq!((p.strategy, p.threshold), (Strategy::Vector, 256));
        // 2 % better is noise: stay plain.
        let p = choose(vec![r(1024, 5.0, 5.1, 1.0), r(4096, 5.0, 5.1, 1.0)], true);
        assert_eq!((p.strategy, p.threshold), (Strategy::Plain, usize::MAX));
        // No vector kernel: plain whatever the numbers.
        let p = choose(vec![r(4096, 1.0, 9.0, 9.0)], false);
        assert_eq!(p.strategy, Strategy::Plain);
    }

    #[test]
    fn probe_moves_data_and_reports_a_rate() {
        for s in [Strategy::Plain, Strategy::Vector, Strategy::Stream] {
            let g = probe(s, 4096, 1 << 20, detect_kernel());
            assert!(g.is_finite() && g > 0.0, "{s:?}: {g}");
        }
    }
}
