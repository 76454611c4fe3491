//! Byte layout of the shared segment: pure arithmetic, no memory access.
//!
//! ```text
//! [Header          4096 B]
//! [SMT map         64 B × local]      pid + global rank per SMT id
//! [Lifelines       64 B × local]      liveness word + robust mutex per SMT id
//! [Doorbells       64 B × local]      sleep/wake, one line per SMT id
//! [Credit lines    64 B × local²]     returned[receiver][sender]
//! [Windows         window_bytes × local]  one-sided put targets, per SMT id
//! [Queues          per receiver × M]  each: control (2 lines: tail, free head)
//!                                     + slots (64 B × cap)
//!                                     + frames ((64 + frame_size) × cap)
//! ```
//!
//! Everything is an offset from the mapping's base: no pointers are ever
//! stored in shared memory (HPVM §5).

use crate::error::SegmentError;

/// Bytes reserved for the header.
pub const HEADER_BYTES: u64 = 4096;

/// The most ranks one host's segment serves.
pub const MAX_LOCAL_RANKS: u32 = 4096;
/// A cache line.
pub const LINE: u64 = 64;

/// The parameters every rank on a host must agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Ranks (SMT ids) on this host.
    pub local: u32,
    /// Receive queues per receiver (1 ..= local).
    pub queues: u32,
    /// Credit window per (sender, receiver) pair, in fragments.
    pub credits: u32,
    /// Payload bytes per frame (multiple of 64).
    pub frame_size: u32,
    /// Whether senders ring receivers' doorbells (a sleeping wait policy).
    pub doorbells: bool,
    /// Bytes of every rank's one-sided windows together (multiple of 64).
    pub window_bytes: u64,
}

/// Offsets and sizes derived from [`Params`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The inputs.
    pub params: Params,
    /// Senders that share one queue: `ceil(local / queues)`.
    pub senders_per_queue: u32,
    /// Slots (and frames) per queue: `next_pow2(window × senders_per_queue)`.
    pub slots: u32,
    /// Offset of the SMT map.
    pub map_off: u64,
    /// Offset of the lifelines (one line per SMT id, see
    /// `super::liveness`).
    pub life_off: u64,
    /// Offset of the doorbells.
    pub doorbell_off: u64,
    /// Offset of the credit lines.
    pub credit_off: u64,
    /// Offset of SMT id 0's window area (`window_bytes` per SMT id).
    pub window_off: u64,
    /// Offset of the first queue.
    pub queue_off: u64,
    /// Bytes from one queue to the next.
    pub queue_stride: u64,
    /// Offset of the slots inside a queue.
    pub slots_rel: u64,
    /// Offset of the frames inside a queue.
    pub frames_rel: u64,
    /// Bytes from one frame to the next (in-use line + payload).
    pub frame_stride: u64,
    /// Total segment length.
    pub total: u64,
}

impl Layout {
    /// Compute the layout, checking ranges.
    ///
    /// # Errors
    /// [`SegmentError::TooLarge`] if a parameter is out of range or the
    /// segment would not fit in 64-bit arithmetic / a sane size.
    pub fn new(params: Params) -> Result<Layout, SegmentError> {
        let too = |what: String| Err(SegmentError::TooLarge { what });
        if params.local == 0 || params.local > MAX_LOCAL_RANKS {
            return too(format!(
                "{} ranks on one host (1 ..= {MAX_LOCAL_RANKS})",
                params.local
            ));
        }
        if params.queues == 0 || params.queues > params.local {
            return too(format!(
                "{} queues per rank (1 ..= {} ranks)",
                params.queues, params.local
            ));
        }
        if params.credits == 0 || params.credits > 1 << 16 {
            return too(format!(
                "{} credits per pair (frames, 1 ..= 65536)",
                params.credits
            ));
        }
        if params.frame_size < 64 || params.frame_size % 64 != 0 || params.frame_size > 1 << 24 {
            return too(format!(
                "frame size {} (a multiple of 64 in 64 ..= 16 MiB)",
                params.frame_size
            ));
        }
        if params.window_bytes % LINE != 0 || params.window_bytes > 1 << 36 {
            return too(format!(
                "{} bytes of windows per rank (a multiple of 64, at most 64 GiB)",
                params.window_bytes
            ));
        }
        let senders_per_queue = params.local.div_ceil(params.queues);
        let slots = (u64::from(params.credits) * u64::from(senders_per_queue))
            .max(2)
            .next_power_of_two();
        if slots > 1 << 20 {
            return too(format!("{slots} slots per queue"));
        }
        let slots = slots as u32;
        let local = u64::from(params.local);
        let map_off = HEADER_BYTES;
        let life_off = map_off + LINE * local;
        let doorbell_off = life_off + LINE * local;
        let credit_off = doorbell_off + LINE * local;
        let window_off = credit_off + LINE * local * local;
        let queue_off = window_off + params.window_bytes * local;
        let slots_rel = 2 * LINE;
        let frames_rel = slots_rel + LINE * u64::from(slots);
        let frame_stride = LINE + u64::from(params.frame_size);
        let queue_stride = frames_rel + frame_stride * u64::from(slots);
        let nqueues = local * u64::from(params.queues);
        let total = queue_stride
            .checked_mul(nqueues)
            .and_then(|q| q.checked_add(queue_off))
            .filter(|&t| t <= 1 << 40);
        let Some(total) = total else {
            return too(format!(
                "{nqueues} queues of {queue_stride} bytes (over 1 TiB); lower FASTMSG_CREDITS or FASTMSG_FRAME_SIZE"
            ));
        };
        Ok(Layout {
            params,
            senders_per_queue,
            slots,
            map_off,
            life_off,
            doorbell_off,
            credit_off,
            window_off,
            queue_off,
            queue_stride,
            slots_rel,
            frames_rel,
            frame_stride,
            total,
        })
    }

    /// Offset of queue `q` of receiver `smt`.
    #[inline]
    pub fn queue(&self, smt: u32, q: u32) -> u64 {
        self.queue_off
            + self.queue_stride * (u64::from(smt) * u64::from(self.params.queues) + u64::from(q))
    }

    /// Offset of SMT id `smt`'s lifeline.
    #[inline]
    pub fn life(&self, smt: u32) -> u64 {
        self.life_off + LINE * u64::from(smt)
    }

    /// Offset of the credit line `returned[receiver][sender]`.
    #[inline]
    pub fn credit(&self, receiver: u32, sender: u32) -> u64 {
        self.credit_off
            + LINE * (u64::from(receiver) * u64::from(self.params.local) + u64::from(sender))
    }

    /// Offset of SMT id `smt`'s window area.
    #[inline]
    pub fn window(&self, smt: u32) -> u64 {
        self.window_off + self.params.window_bytes * u64::from(smt)
    }

    /// Which of a receiver's queues sender `smt` uses (seed: `i mod M`).
    #[inline]
    pub fn queue_of_sender(&self, smt: u32) -> u32 {
        smt % self.params.queues
    }

    /// Whether the queue `q` has more than one sender.
    #[inline]
    pub fn is_shared(&self, q: u32) -> bool {
        let m = self.params.queues;
        // Senders of queue q are q, q+m, q+2m, … below `local`.
        q + m < self.params.local
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(local: u32, queues: u32) -> Params {
        Params {
            local,
            queues,
            credits: 8,
            frame_size: 1024,
            doorbells: false,
            window_bytes: 128,
        }
    }

    #[test]
    fn dedicated_and_shared_queues() {
        let l = Layout::new(p(4, 4)).unwrap();
        assert_eq!(l.senders_per_queue, 1);
        assert_eq!(l.slots, 8);
        assert!((0..4).all(|q| !l.is_shared(q)));
        let l = Layout::new(p(5, 2)).unwrap();
        assert_eq!(l.senders_per_queue, 3);
        assert_eq!(l.slots, 32);
        assert!(l.is_shared(0) && l.is_shared(1));
        let l = Layout::new(p(3, 2)).unwrap();
        assert!(l.is_shared(0), "senders 0 and 2");
        assert!(!l.is_shared(1), "sender 1 alone");
    }

    #[test]
    fn offsets_do_not_overlap() {
        let l = Layout::new(p(3, 2)).unwrap();
        assert!(l.life_off >= l.map_off + 3 * LINE);
        assert!(l.doorbell_off >= l.life(2) + LINE);
        assert_eq!(l.window(2) + 128, l.queue_off);
        assert_eq!(l.slots, 16, "2 senders per queue x window 8");
        assert!(
            l.queue(0, 1) >= l.queue(0, 0) + l.frames_rel + l.frame_stride * u64::from(l.slots)
        );
        assert_eq!(l.total, l.queue(2, 1) + l.queue_stride);
        assert_eq!(l.queue_off % LINE, 0);
        assert_eq!(l.queue_stride % LINE, 0);
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(Layout::new(p(0, 1)).is_err());
        assert!(Layout::new(p(2, 3)).is_err());
        let mut q = p(2, 2);
        q.frame_size = 100;
        assert!(Layout::new(q).is_err());
    }
}
