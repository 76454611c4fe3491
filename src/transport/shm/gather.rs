//! What a send writes into shared memory: a slot's body, in place, and
//! the payload gathered from the caller's pieces into the slot's inline
//! bytes or into a frame. The queue protocol around these writes (who owns
//! the slot, the stamp that publishes it) is `crate::queue`'s.

#![allow(unsafe_code)] // the copy into a frame of the mapping

use super::ShmFrames;
use crate::frame::FragHeader;
use crate::queue::{SlotBody, INLINE_BYTES};

/// Copy `pieces` (`len` bytes together, at most the frame capacity) into
/// `frame`, which the caller owns until it publishes the slot naming it.
#[inline(always)]
pub(super) fn gather_into_frame(frames: &ShmFrames, frame: u32, pieces: &[&[u8]], len: usize) {
    assert!(frame < frames.count && len <= frames.cap);
    let mut dst = frames.payload(frame);
    let mut left = len;
    for p in pieces {
        let n = p.len().min(left);
        // SAFETY: `frame < count`, and the pieces together are at most
        // `len <= cap` bytes (`n` never exceeds what is left), so every
        // write stays inside the frame's payload; the caller owns the
        // frame (dedicated: its position's credit; shared: the in-use
        // flag), and a caller's slice cannot overlap the mapping's frame.
        unsafe {
            crate::copy::copy_to_frame(dst, p.as_ptr(), n);
            dst = dst.add(n);
        }
        left -= n;
    }
}

/// Copy `pieces` (at most [`INLINE_BYTES`] together) into a slot's inline
/// bytes.
#[inline(always)]
fn gather_into_slot(inline: &mut [u8; INLINE_BYTES], pieces: &[&[u8]]) {
    let mut off = 0;
    for p in pieces {
        inline[off..off + p.len()].copy_from_slice(p);
        off += p.len();
    }
}

/// Write a slot's body in place (`RecvQueue::publish_dedicated_with`): the
/// header, the frame index ([`NO_FRAME`] when `pieces` ride in the slot),
/// and the payload's bytes. Field by field, and nothing more: the slot's
/// line is usually still in the receiver's cache, each store waits in the
/// store buffer until the line comes over, and a copy of a header built on
/// the stack would read it back wider than it was written (docs/engine.md,
/// "Store forwarding and placement"). The bytes past the payload are left
/// as they are (the receiver reads `header.len` of them).
#[inline(always)]
pub(super) fn fill_slot(b: &mut SlotBody, header: FragHeader, frame: u32, pieces: &[&[u8]]) {
    // Destructured, so that a field added to the header cannot be left
    // out here (it would keep an earlier lap's value).
    let FragHeader {
        src,
        handler,
        len,
        flags,
        total,
    } = header;
    let h = &mut b.header;
    h.src = src;
    h.handler = handler;
    h.len = len;
    h.flags = flags;
    h.total = total;
    b.frame = frame;
    gather_into_slot(&mut b.inline, pieces);
}
