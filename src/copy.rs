//! Moving pieces into frames: the one place payload bytes are copied on the
//! send side, so the copy strategy can be tuned in one spot (seed 004 §6).

#![allow(unsafe_code)]

/// Copy `n` bytes from `src` to `dst` (a frame in shared or ring memory).
///
/// # Safety
/// `src` valid for `n` reads, `dst` valid for `n` writes, no overlap.
#[inline(always)]
pub unsafe fn copy_to_frame(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY: forwarded from the caller's contract.
    unsafe { core::ptr::copy_nonoverlapping(src, dst, n) }
}
