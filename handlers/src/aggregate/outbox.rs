//! The per-destination buffers of one channel, and how they leave.
//!
//! A buffer is taken out of its slot (a spare takes its place) before it
//! is sent, and no borrow is held across the send: the send may make
//! progress, which runs handlers that add items to these very buffers.
//! Items added meanwhile go into the spare and leave after the buffer
//! being sent, so order per destination holds.

use super::AggError;
use fastmsg::{Ctx, HandlerId, Rank};
use std::cell::RefCell;

pub(crate) struct Outbox {
    pub(crate) name: String,
    /// The channel's handler (declared with the channel).
    pub(crate) handler: HandlerId,
    pub(crate) cap: usize,
    bufs: RefCell<Vec<Vec<u8>>>,
    spare: RefCell<Vec<Vec<u8>>>,
}

impl Outbox {
    pub(crate) fn new(name: &str, handler: HandlerId, cap: usize) -> Self {
        Outbox {
            name: name.to_owned(),
            handler,
            cap,
            bufs: RefCell::new(Vec::new()),
            spare: RefCell::new(Vec::new()),
        }
    }

    /// Append `item` to `dest`'s buffer: the common case (the buffer has
    /// items and room to spare) inline, the rest in [`push`](Self::push).
    #[inline(always)]
    pub(crate) fn push_one(&self, ctx: &Ctx, dest: Rank, item: &[u8]) -> Result<(), AggError> {
        {
            let mut bufs = self.bufs.borrow_mut();
            if let Some(b) = bufs.get_mut(dest.index()) {
                if !b.is_empty() && b.len() + item.len() < self.cap {
                    b.extend_from_slice(item);
                    return Ok(());
                }
            }
        }
        self.push(ctx, dest, &[item])
    }

    /// Append `parts` (one item) to `dest`'s buffer; send the buffer first
    /// if the item would not fit, or after if it is full.
    #[inline(never)]
    pub(crate) fn push(&self, ctx: &Ctx, dest: Rank, parts: &[&[u8]]) -> Result<(), AggError> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let d = dest.index();
        let room = {
            let mut bufs = self.bufs.borrow_mut();
            if d >= bufs.len() {
                let size = ctx.size();
                if dest.0 >= size {
                    return Err(AggError::BadDestination { dest, size });
                }
                bufs.resize_with(size as usize, Vec::new);
            }
            let b = &mut bufs[d];
            if b.len() + len > self.cap && !b.is_empty() {
                false
            } else {
                if b.is_empty() {
                    // The idle hook sends it if nothing else does.
                    ctx.note_idle_work();
                    if b.capacity() == 0 {
                        b.reserve_exact(self.cap.max(len));
                    }
                }
                for p in parts {
                    b.extend_from_slice(p);
                }
                if b.len() < self.cap {
                    return Ok(());
                }
                true
            }
        };
        if room {
            // Full: it leaves now.
            return self.flush(ctx, d);
        }
        self.flush(ctx, d)?;
        self.push(ctx, dest, parts)
    }

    /// Send `dest`'s buffer if it holds anything.
    pub(crate) fn flush(&self, ctx: &Ctx, d: usize) -> Result<(), AggError> {
        let out = {
            let mut bufs = self.bufs.borrow_mut();
            match bufs.get_mut(d) {
                Some(b) if !b.is_empty() => {
                    let spare = self.spare.borrow_mut().pop().unwrap_or_default();
                    std::mem::replace(b, spare)
                }
                _ => return Ok(()),
            }
        };
        // From the main loop this waits for credit (making progress)
        // rather than copying the buffer into the pending queue; from a
        // handler or the idle hook it never blocks.
        let r = ctx.post(Rank(d as u32), self.handler, &[&out]);
        let mut out = out;
        out.clear();
        self.spare.borrow_mut().push(out);
        r.map_err(AggError::Send)
    }

    /// Send every non-empty buffer; the first error is returned, the
    /// other buffers are still sent.
    pub(crate) fn flush_all(&self, ctx: &Ctx) -> Result<(), AggError> {
        let n = self.bufs.borrow().len();
        let mut first = Ok(());
        for d in 0..n {
            if let Err(e) = self.flush(ctx, d) {
                first = first.and(Err(e));
            }
        }
        first
    }

    /// Bytes held now.
    pub(crate) fn buffered(&self) -> usize {
        self.bufs.borrow().iter().map(Vec::len).sum()
    }
}
