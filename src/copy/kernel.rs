//! The copy kernels: a vector loop with ordinary stores and a streaming
//! (non-temporal) one, AVX2 when the CPU has it (checked at run time),
//! else SSE2; plain copies elsewhere.

#![allow(unsafe_code)]

/// No vector kernel (not x86_64): strategies fall back to plain copies.
pub const KERNEL_NONE: u8 = 0;
/// SSE2 kernels (x86_64 baseline).
pub const KERNEL_SSE2: u8 = 1;
/// AVX2 kernels.
pub const KERNEL_AVX2: u8 = 2;

/// The best kernel this CPU runs.
pub fn detect_kernel() -> u8 {
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
/// As [`super::copy_to_frame`]; `kernel` must come from `detect_kernel` on this CPU.
pub unsafe fn copy_stream(dst: *mut u8, src: *const u8, n: usize, kernel: u8) {
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

/// Copy with a vector loop and ordinary stores if `kernel` names one,
/// else plainly.
///
/// # Safety
/// As [`super::copy_to_frame`]; `kernel` must come from `detect_kernel` on this CPU.
pub unsafe fn copy_vector(dst: *mut u8, src: *const u8, n: usize, kernel: u8) {
    #[cfg(target_arch = "x86_64")]
    {
        if kernel == KERNEL_AVX2 {
            // SAFETY: the caller's contract, and AVX2 was detected at run time.
            return unsafe { x86::vector_avx2(dst, src, n) };
        }
        if kernel == KERNEL_SSE2 {
            // SAFETY: the caller's contract; SSE2 is baseline on x86_64.
            return unsafe { x86::vector_sse2(dst, src, n) };
        }
    }
    let _ = kernel;
    // SAFETY: the caller's contract.
    unsafe { core::ptr::copy_nonoverlapping(src, dst, n) }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::{
        __m128i, __m256i, _mm256_loadu_si256, _mm256_storeu_si256, _mm256_stream_si256,
        _mm_loadu_si128, _mm_sfence, _mm_storeu_si128, _mm_stream_si128,
    };
    use core::ptr::copy_nonoverlapping;

    /// Vector copy with 32-byte AVX2 loads and ordinary stores, 128 bytes
    /// per step; the last partial step is one overlapping 32-byte copy or
    /// a plain copy below 32 bytes.
    ///
    /// # Safety
    /// `src` valid for `n` reads, `dst` for `n` writes, no overlap; the CPU
    /// supports AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn vector_avx2(dst: *mut u8, src: *const u8, n: usize) {
        // SAFETY: every access is at offset `o..o + 32` with `o + 32 <= n`
        // (loop conditions and `n - 32` for the tail), so inside `src[..n]`
        // and `dst[..n]`; loads and stores are unaligned (`loadu`,
        // `storeu`); AVX2 is available per the caller's contract.
        unsafe {
            if n < 32 {
                copy_nonoverlapping(src, dst, n);
                return;
            }
            let mut o = 0;
            while o + 128 <= n {
                let a = _mm256_loadu_si256(src.add(o) as *const __m256i);
                let b = _mm256_loadu_si256(src.add(o + 32) as *const __m256i);
                let c = _mm256_loadu_si256(src.add(o + 64) as *const __m256i);
                let e = _mm256_loadu_si256(src.add(o + 96) as *const __m256i);
                _mm256_storeu_si256(dst.add(o) as *mut __m256i, a);
                _mm256_storeu_si256(dst.add(o + 32) as *mut __m256i, b);
                _mm256_storeu_si256(dst.add(o + 64) as *mut __m256i, c);
                _mm256_storeu_si256(dst.add(o + 96) as *mut __m256i, e);
                o += 128;
            }
            while o + 32 <= n {
                let a = _mm256_loadu_si256(src.add(o) as *const __m256i);
                _mm256_storeu_si256(dst.add(o) as *mut __m256i, a);
                o += 32;
            }
            if o < n {
                let a = _mm256_loadu_si256(src.add(n - 32) as *const __m256i);
                _mm256_storeu_si256(dst.add(n - 32) as *mut __m256i, a);
            }
        }
    }

    /// Vector copy with 16-byte SSE2 loads and stores, 64 bytes per step.
    ///
    /// # Safety
    /// `src` valid for `n` reads, `dst` for `n` writes, no overlap.
    pub(super) unsafe fn vector_sse2(dst: *mut u8, src: *const u8, n: usize) {
        // SAFETY: as in `vector_avx2`, with 16-byte accesses; SSE2 is part
        // of the x86_64 baseline.
        unsafe {
            if n < 16 {
                copy_nonoverlapping(src, dst, n);
                return;
            }
            let mut o = 0;
            while o + 16 <= n {
                let a = _mm_loadu_si128(src.add(o) as *const __m128i);
                _mm_storeu_si128(dst.add(o) as *mut __m128i, a);
                o += 16;
            }
            if o < n {
                let a = _mm_loadu_si128(src.add(n - 16) as *const __m128i);
                _mm_storeu_si128(dst.add(n - 16) as *mut __m128i, a);
            }
        }
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Lengths 0..600 at dst/src misalignments up to 63 copy exactly with
    /// every kernel this CPU runs, and the bytes around the destination
    /// stay untouched.
    #[test]
    fn kernels_copy_exactly_at_any_alignment() {
        let best = detect_kernel();
        let src: Vec<u8> = (0..800u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut dst = vec![0u8; 800];
        for kern in [best, KERNEL_SSE2.min(best), KERNEL_NONE] {
            for n in (0..600).step_by(7).chain([16, 32, 64, 127, 128, 129, 256]) {
                for (da, sa) in [(0, 0), (1, 0), (0, 3), (13, 31), (31, 1), (63, 17)] {
                    for stream in [false, true] {
                        dst.fill(0xee);
                        // SAFETY: da + n <= 663 < 800 and sa + n <= 663 <
                        // 800; distinct vectors; `kern` is this CPU's
                        // kernel or a lesser one.
                        unsafe {
                            let (d, s) = (dst.as_mut_ptr().add(da), src.as_ptr().add(sa));
                            if stream {
                                copy_stream(d, s, n, kern)
                            } else {
                                copy_vector(d, s, n, kern)
                            }
                        };
                        let what = format!("n={n} da={da} sa={sa} kernel={kern} stream={stream}");
                        assert_eq!(&dst[da..da + n], &src[sa..sa + n], "{what}");
                        assert!(dst[..da].iter().all(|&b| b == 0xee), "wrote before: {what}");
                        assert!(
                            dst[da + n..].iter().all(|&b| b == 0xee),
                            "wrote past: {what}"
                        );
                    }
                }
            }
        }
    }
}
