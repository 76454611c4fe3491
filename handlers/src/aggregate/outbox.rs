//! The per-destination buffers of one channel, and how they leave.
//!
//! Buffers are typed ([`Buf<E>`]): a [`Channel<T>`](super::Channel) stores
//! its `T` into the next element, and a [`ByteChannel`](super::ByteChannel)
//! appends bytes. The wire form is the filled elements' bytes (a
//! zero-sized item is one zero byte). A buffer's elements are allocated
//! once, so appending an item is one indexed store: nothing that could
//! reallocate lies between building the item and storing it, and the item
//! goes to the buffer from registers, not through a copy on the stack.
//!
//! A buffer is taken out of its slot (a spare takes its place) before it
//! is sent, and no borrow is held across the send: the send may make
//! progress, which runs handlers that add items to these very buffers.
//! Items added meanwhile go into the spare and leave after the buffer
//! being sent, so order per destination holds: a buffer flushed from
//! inside that progress (a handler's, while the main loop's send waits
//! for credit) is sent after the outer one, because the endpoint keeps
//! per-destination order across nested sends ([`Ctx::post`] from the
//! main loop takes its place in the destination's order before it waits,
//! and what handlers send meanwhile parks behind it). Request/response
//! matches answers by that order.

use super::AggError;
use bytemuck::Pod;
use fastmsg::{Ctx, HandlerId, Rank};
use std::cell::RefCell;

/// What the aggregator does with every channel's buffers, whatever their
/// item type.
pub(crate) trait Buffers {
    /// Send every non-empty buffer; the first error is returned, the
    /// other buffers are still sent.
    fn flush_all(&self, ctx: &Ctx) -> Result<(), AggError>;
    /// Bytes held now.
    fn buffered(&self) -> usize;
}

/// One destination's buffer: `items[..n]` are filled; `items` is
/// allocated at the first item and then keeps its length.
struct Buf<E> {
    items: Vec<E>,
    n: usize,
}

impl<E> Default for Buf<E> {
    fn default() -> Self {
        Buf {
            items: Vec::new(),
            n: 0,
        }
    }
}

pub(crate) struct Outbox<E: Pod> {
    pub(crate) name: String,
    /// The channel's handler (declared with the channel).
    pub(crate) handler: HandlerId,
    /// Bytes per buffer.
    pub(crate) cap: usize,
    bufs: RefCell<Vec<Buf<E>>>,
    spare: RefCell<Vec<Buf<E>>>,
}

impl<E: Pod> Outbox<E> {
    /// Bytes one element takes on the wire.
    const WIRE: usize = if std::mem::size_of::<E>() == 0 {
        1
    } else {
        std::mem::size_of::<E>()
    };

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
    /// items and room to spare) inline; otherwise [`make_room`]
    /// (Self::make_room) first, out of line. The item is never passed to
    /// an out-of-line call, so it goes from registers to the buffer.
    #[inline(always)]
    pub(crate) fn push_item(&self, ctx: &Ctx, dest: Rank, item: E) -> Result<(), AggError> {
        {
            let mut bufs = self.bufs.borrow_mut();
            if let Some(b) = bufs.get_mut(dest.index()) {
                if b.n != 0 && (b.n + 1) * Self::WIRE < self.cap {
                    b.items[b.n] = item;
                    b.n += 1;
                    return Ok(());
                }
            }
        }
        self.make_room(ctx, dest, 1)?;
        self.fill(ctx, dest.index(), 1, |room| room[0] = item)
    }

    /// Append `parts` (one item) to `dest`'s buffer; send the buffer first
    /// if the item would not fit, or after if it is full.
    #[inline(never)]
    pub(crate) fn push(&self, ctx: &Ctx, dest: Rank, parts: &[&[E]]) -> Result<(), AggError> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        self.make_room(ctx, dest, len)?;
        self.fill(ctx, dest.index(), len, |mut room| {
            for p in parts {
                let (to, rest) = room.split_at_mut(p.len());
                to.copy_from_slice(p);
                room = rest;
            }
        })
    }

    /// Append `run`, whole items of `item` elements each, to `dest`'s
    /// buffer: as many items per buffer as fit, never an item split
    /// between two buffers; a buffer leaves when full, as with
    /// [`push`](Self::push) per item.
    #[inline(never)]
    pub(crate) fn push_run(
        &self,
        ctx: &Ctx,
        dest: Rank,
        mut run: &[E],
        item: usize,
    ) -> Result<(), AggError> {
        debug_assert!(item != 0 && run.len() % item == 0);
        let d = dest.index();
        while !run.is_empty() {
            self.make_room(ctx, dest, item)?;
            let free = {
                let bufs = self.bufs.borrow();
                (self.cap / Self::WIRE).saturating_sub(bufs[d].n)
            };
            // At least one item (alone in an empty buffer if it is
            // larger than one), at most what is left.
            let k = (free / item).max(1).min(run.len() / item) * item;
            let (now, rest) = run.split_at(k);
            self.fill(ctx, d, k, |room| room.copy_from_slice(now))?;
            run = rest;
        }
        Ok(())
    }

    /// Make `dest`'s buffer ready for an item of `len` elements: check
    /// `dest`, send the buffer if the item would not fit, allocate it at
    /// its first item (an item longer than a buffer goes alone).
    #[inline(never)]
    fn make_room(&self, ctx: &Ctx, dest: Rank, len: usize) -> Result<(), AggError> {
        let d = dest.index();
        loop {
            {
                let mut bufs = self.bufs.borrow_mut();
                if d >= bufs.len() {
                    let size = ctx.size();
                    if dest.0 >= size {
                        return Err(AggError::BadDestination { dest, size });
                    }
                    bufs.resize_with(size as usize, Buf::default);
                }
                let b = &mut bufs[d];
                if b.n == 0 || (b.n + len) * Self::WIRE <= self.cap {
                    if b.n == 0 {
                        // The idle hook sends it if nothing else does.
                        ctx.note_idle_work();
                    }
                    let need = b.n + len;
                    if b.items.len() < need {
                        let full = (self.cap / Self::WIRE).max(need);
                        b.items.resize(full, E::zeroed());
                    }
                    return Ok(());
                }
            }
            // Handlers that run while it leaves may fill the spare that
            // takes its place: look again.
            self.flush(ctx, d)?;
        }
    }

    /// After [`make_room`](Self::make_room) (nothing ran since, so the room
    /// is still there): `write` the item into the room after the filled
    /// elements (`len` of them), and send the buffer if it is now full.
    #[inline(always)]
    fn fill(
        &self,
        ctx: &Ctx,
        d: usize,
        len: usize,
        write: impl FnOnce(&mut [E]),
    ) -> Result<(), AggError> {
        let full = {
            let mut bufs = self.bufs.borrow_mut();
            let b = &mut bufs[d];
            write(&mut b.items[b.n..b.n + len]);
            b.n += len;
            b.n * Self::WIRE >= self.cap
        };
        if full {
            // Full: it leaves now.
            return self.flush(ctx, d);
        }
        Ok(())
    }

    /// Send `dest`'s buffer if it holds anything, then keep it as a
    /// spare.
    pub(crate) fn flush(&self, ctx: &Ctx, d: usize) -> Result<(), AggError> {
        let out = {
            let mut bufs = self.bufs.borrow_mut();
            match bufs.get_mut(d) {
                Some(b) if b.n != 0 => {
                    let spare = self.spare.borrow_mut().pop().unwrap_or_default();
                    std::mem::replace(b, spare)
                }
                _ => return Ok(()),
            }
        };
        // From the main loop this waits for its turn and for credit
        // (making progress) rather than copying the buffer into the
        // pending queue; from a handler or the idle hook it never blocks.
        let filled = &out.items[..out.n];
        let r = if std::mem::size_of::<E>() == 0 {
            ctx.post(Rank(d as u32), self.handler, &[&vec![0u8; out.n]])
        } else {
            ctx.post(
                Rank(d as u32),
                self.handler,
                &[bytemuck::cast_slice(filled)],
            )
        };
        let mut out = out;
        out.n = 0;
        self.spare.borrow_mut().push(out);
        r.map_err(AggError::Send)
    }
}

impl<E: Pod> Buffers for Outbox<E> {
    fn flush_all(&self, ctx: &Ctx) -> Result<(), AggError> {
        let n = self.bufs.borrow().len();
        let mut first = Ok(());
        for d in 0..n {
            if let Err(e) = self.flush(ctx, d) {
                first = first.and(Err(e));
            }
        }
        first
    }

    fn buffered(&self) -> usize {
        self.bufs.borrow().iter().map(|b| b.n).sum::<usize>() * Self::WIRE
    }
}
