//! One-way adds through the owner: `add` and `add_f64` as compact items
//! in the aggregation buffers, applied by the owner's handler, no answer.
//!
//! ```text
//!  +1, index < 2^31          4 bytes   u32 index
//!  add / f64 add, index < 2^31  12 bytes  [index | f64 flag << 31, value lo, value hi]
//!  any add, larger windows   24 bytes  index, value, f64 flag (u64 each)
//! ```
//!
//! A window of at most 2^31 words per rank uses the two compact forms;
//! a larger one the wide form. The owner applies each item with the same
//! CPU atomic an on-host caller would use, so adds through the owner and
//! direct updates of the same word by other ranks (fetching operations,
//! `direct_adds`) add up exactly.
//!
//! The owner takes a compact buffer whole: it checks every item's index
//! first (a buffer with a bad one is refused whole, nothing applied),
//! then applies the items through `Ctx::update_own_words`, which
//! prefetches the words of the items ahead. A locked add is a full
//! barrier, so one that misses the cache stalls until its line arrives
//! and the next cannot start; prefetches are not held back by it, so
//! the misses of the items ahead overlap.
//!
//! When an add is visible: it waits in the caller's buffer for its owner
//! until the buffer fills, is flushed, or the caller is idle, and is
//! applied when the owner handles the buffer. Every add sent before an
//! [`Aggregator::quiesce`](crate::aggregate::Aggregator::quiesce) has been
//! applied when that quiesce returns on every rank; read the words after
//! it (or after a barrier that follows it), not before. An add to an owner
//! that is gone fails the send that carries its buffer
//! ([`AggError::Send`](crate::aggregate::AggError::Send)) or, at the
//! latest, that quiesce.

use crate::aggregate::{AggError, Aggregator, Channel};
use bytemuck::{Pod, Zeroable};
use fastmsg::{Ctx, EndpointBuilder, HandlerResult, Rank, WindowId, WordOp};

/// Largest word count per rank that the compact forms address.
const COMPACT_WORDS: u64 = 1 << 31;
/// The f64 flag in a compact add's first element.
const FLOAT: u32 = 1 << 31;

/// An add to a word of a larger window (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct WideAdd {
    index: u64,
    /// `u64` to add, or the bits of an `f64` when `float` is 1.
    value: u64,
    float: u64,
}

/// The add channels of one window.
#[derive(Clone)]
pub(super) struct Adds {
    /// +1 to a word: its index.
    inc: Channel<u32>,
    /// An add: `[index | FLOAT, value lo, value hi]`.
    add: Channel<[u32; 3]>,
    /// Any add to a word of a window of more than 2^31 words.
    wide: Channel<WideAdd>,
    /// Whether the compact forms address every word.
    compact: bool,
}

/// Apply one add to this rank's word `index` of `win` (`words` words).
fn apply(ctx: &Ctx, win: WindowId, words: u64, index: u64, op: WordOp) -> fastmsg::HandlerResult {
    if index >= words {
        return Err(format!("add to word {index} out of range ({words} words)").into());
    }
    ctx.update_u64(win, ctx.rank(), (index * 8) as usize, op)?;
    Ok(())
}

/// The `k`-th native-endian `u32` of `bytes` (in bounds: checked by the
/// caller).
#[inline(always)]
fn u32_at(bytes: &[u8], k: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[4 * k..4 * k + 4]);
    u32::from_ne_bytes(b)
}

/// Apply a whole compact buffer of `bytes` from `src` on channel
/// `channel`: items of `width` `u32`s, the first holding the word index
/// (and, for 3-wide items, the f64 flag), the others the value. Every
/// index is checked before any item is applied.
fn apply_buffer(
    ctx: &Ctx,
    src: Rank,
    (channel, win, words): (&str, WindowId, u64),
    width: usize,
    bytes: &[u8],
) -> HandlerResult {
    let item = 4 * width;
    if bytes.len() % item != 0 {
        return Err(AggError::Malformed {
            src,
            channel: channel.to_owned(),
            why: format!(
                "{} bytes are not a whole number of {item}-byte items",
                bytes.len()
            ),
        }
        .into());
    }
    let n = bytes.len() / item;
    // A +1 item is a bare index; an add's first element carries the flag.
    let mask = if width == 1 { u32::MAX } else { !FLOAT };
    let index = |k: usize| u64::from(u32_at(bytes, k * width) & mask);
    // One pass for the bounds; the first bad item named.
    let highest = (0..n).map(index).max().unwrap_or(0);
    if n > 0 && highest >= words {
        let k = (0..n).find(|&k| index(k) >= words).unwrap_or(0);
        return Err(format!(
            "add to word {} out of range ({words} words; item {k} of a buffer of {n} from rank {}, none applied)",
            index(k),
            src.0
        )
        .into());
    }
    let op = |k: usize| {
        if width == 1 {
            WordOp::FetchAdd(1)
        } else {
            let first = u32_at(bytes, k * width);
            let value = u64::from(u32_at(bytes, k * width + 1))
                | u64::from(u32_at(bytes, k * width + 2)) << 32;
            op_of(value, first & FLOAT != 0)
        }
    };
    ctx.update_own_words(win, n, |k| (index(k), op(k)))?;
    Ok(())
}

fn op_of(value: u64, float: bool) -> WordOp {
    if float {
        WordOp::AddF64(f64::from_bits(value))
    } else {
        WordOp::FetchAdd(value)
    }
}

impl Adds {
    /// The add channels of window `win` (`words` words per rank), named
    /// after `name`; every rank makes them in the same order, before
    /// start.
    pub(super) fn new(
        agg: &Aggregator,
        b: &mut EndpointBuilder,
        name: &str,
        win: WindowId,
        words: u64,
    ) -> Adds {
        // The compact channels take their buffers whole (`apply_buffer`).
        let buffer = agg.config().buffer_bytes;
        let inc_name = format!("fastmsg-mem/{name}/inc");
        let inc: Channel<u32> = agg.declare(b, &inc_name);
        b.define_whole(inc.handler(), buffer.max(4), move |ctx, src, bytes| {
            apply_buffer(ctx, src, (&inc_name, win, words), 1, bytes)
        });
        let add_name = format!("fastmsg-mem/{name}/add");
        let add: Channel<[u32; 3]> = agg.declare(b, &add_name);
        b.define_whole(add.handler(), buffer.max(12), move |ctx, src, bytes| {
            apply_buffer(ctx, src, (&add_name, win, words), 3, bytes)
        });
        let wide = agg.channel(
            b,
            &format!("fastmsg-mem/{name}/add-wide"),
            move |ctx, _src, a: WideAdd| {
                if a.float > 1 {
                    return Err(
                        format!("add to word {}: bad float flag {}", a.index, a.float).into(),
                    );
                }
                apply(ctx, win, words, a.index, op_of(a.value, a.float == 1))
            },
        );
        Adds {
            inc,
            add,
            wide,
            compact: words <= COMPACT_WORDS,
        }
    }

    /// Send an add of `value` (an `f64`'s bits when `float`) to word
    /// `index` (checked by the caller) of `owner`.
    ///
    /// # Errors
    /// As [`Channel::send`].
    #[inline]
    pub(super) fn send(
        &self,
        ctx: &Ctx,
        owner: Rank,
        index: u64,
        value: u64,
        float: bool,
    ) -> Result<(), AggError> {
        if !self.compact {
            let float = u64::from(float);
            return self.wide.send(
                ctx,
                owner,
                WideAdd {
                    index,
                    value,
                    float,
                },
            );
        }
        // `index < 2^31`: the window has at most 2^31 words.
        let i = index as u32;
        if value == 1 && !float {
            return self.inc.send(ctx, owner, i);
        }
        let i = if float { i | FLOAT } else { i };
        self.add
            .send(ctx, owner, [i, value as u32, (value >> 32) as u32])
    }
}
