//! The shared-memory transport's lock-free queues (HPVM §5, HPVM 1.9 SMT).
//!
//! Each receiver owns `M` receive queues; each queue is
//! - a **receive queue** ([`RecvQueue`]): a power-of-two ring of one-cache-line
//!   [`Slot`]s, each holding a fragment descriptor (header, frame index and up
//!   to [`INLINE_BYTES`] of inline payload) behind a stamped sequence word;
//! - a **free list** ([`FreeList`]): a power-of-two ring of frames, claimed by
//!   fetch-and-increment of its head and a test-and-set of the frame's in-use
//!   flag, released by the receiver clearing that flag.
//!
//! Two modes, fixed per queue when the segment is laid out:
//! - *shared* (several senders map onto the queue, `M < N`): the seed's
//!   protocol — fetch-and-increment on the free-list head and the receive
//!   tail, test-and-set on the frame, and a Vyukov-style recycle stamp so a
//!   producer never overwrites a slot the consumer has not finished reading;
//! - *dedicated* (one sender, `M = N`): single producer / single consumer.
//!   The sender's own fragment count is the queue position and frame `pos &
//!   mask` goes with slot `pos & mask`; the credit protocol
//!   ([`crate::flow`]) alone orders reuse, so no atomic read-modify-write is
//!   on the path and the consumer never writes to the slot line.
//!
//! Departure from the seed, measured in `BENCHMARKS.md`: the receive-queue
//! entry is a whole cache line carrying the fragment header, and payloads of
//! at most [`INLINE_BYTES`] travel inline in it, so a small message costs one
//! cache-line transfer instead of two (slot, then frame).
//!
//! The code is generic over its storage (slices of slots, a [`FrameStore`])
//! so that `loom-tests/` runs this very logic on ordinary memory.

mod frames;
mod free_list;
mod recv;

pub use frames::FrameStore;
pub use free_list::{ClaimStalled, FreeList};
pub use recv::{PublishStalled, RecvQueue, Slot, SlotBody, Watch, INLINE_BYTES, NO_FRAME};
