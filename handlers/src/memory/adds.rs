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
//! The owner takes a compact buffer whole and applies it through
//! `Ctx::update_own_words`, which checks every item's index first, in one
//! pass (a buffer with a bad one is refused whole, nothing applied, as
//! [`AggError::Malformed`]), then applies the items, prefetching the
//! words of the items ahead. A locked add is a full
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
use fastmsg::error::PutError;
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
/// `channel`: items of `width` `u32`s (1: a +1, its word index; 3: the
/// index with the f64 flag, then the value). `Ctx::update_own_words`
/// checks every index (one pass) before any item is applied; a bad one
/// refuses the buffer whole as [`AggError::Malformed`], naming the word.
fn apply_buffer(
    ctx: &Ctx,
    src: Rank,
    (channel, win, unshared): (&str, WindowId, bool),
    width: usize,
    bytes: &[u8],
) -> HandlerResult {
    let item = 4 * width;
    if bytes.len() % item != 0 {
        return Err(AggError::malformed(
            src,
            channel,
            format!(
                "{} bytes are not a whole number of {item}-byte items",
                bytes.len()
            ),
        )
        .into());
    }
    let n = bytes.len() / item;
    // One small closure per width: inlined into the loops of
    // `update_own_words`, which call it up to three times per item.
    let inc = |k: usize| (u64::from(u32_at(bytes, k)), WordOp::FetchAdd(1));
    let add = |k: usize| {
        let first = u32_at(bytes, 3 * k);
        let value = u64::from(u32_at(bytes, 3 * k + 1)) | u64::from(u32_at(bytes, 3 * k + 2)) << 32;
        (u64::from(first & !FLOAT), op_of(value, first & FLOAT != 0))
    };
    let applied = match (width, unshared) {
        (1, false) => ctx.update_own_words(win, n, inc),
        (1, true) => ctx.update_own_words_unshared(win, n, inc),
        (_, false) => ctx.update_own_words(win, n, add),
        (_, true) => ctx.update_own_words_unshared(win, n, add),
    };
    match applied {
        Ok(()) => Ok(()),
        Err(e @ PutError::OutOfBounds { offset, .. }) => Err(AggError::malformed(
            src,
            channel,
            format!(
                "an add to word {} in a buffer of {n} is past the window (none applied): {e}",
                offset / 8
            ),
        )
        .into()),
        Err(e) => Err(e.into()),
    }
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
    /// start. `unshared`: this rank's handler is the only writer of its
    /// words (`RemoteWords::owner_only`), so compact adds are applied
    /// without locked atomics.
    pub(super) fn new(
        agg: &Aggregator,
        b: &mut EndpointBuilder,
        name: &str,
        win: WindowId,
        words: u64,
        unshared: bool,
    ) -> Adds {
        // The compact channels take their buffers whole (`apply_buffer`).
        let buffer = agg.config().buffer_bytes;
        let inc_name = format!("fastmsg-mem/{name}/inc");
        let inc: Channel<u32> = agg.declare(b, &inc_name);
        b.define_whole(inc.handler(), buffer.max(4), move |ctx, src, bytes| {
            apply_buffer(ctx, src, (&inc_name, win, unshared), 1, bytes)
        });
        let add_name = format!("fastmsg-mem/{name}/add");
        let add: Channel<[u32; 3]> = agg.declare(b, &add_name);
        b.define_whole(add.handler(), buffer.max(12), move |ctx, src, bytes| {
            apply_buffer(ctx, src, (&add_name, win, unshared), 3, bytes)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::AggConfig;
    use crate::memory::RemoteWords;

    /// A compact buffer with one index past the window is refused whole
    /// with a typed error that names the sender, the channel and the
    /// word; a good one is applied (the f64 flag is not part of the index).
    #[test]
    fn a_buffer_with_an_add_past_the_window_is_a_typed_error_and_applies_nothing() {
        let out = fastmsg::threads::run(
            1,
            |_| {},
            |mut b| {
                let agg = Aggregator::new(&mut b, AggConfig::default());
                let words = RemoteWords::new(&agg, &mut b, "t", 8);
                let win = words.window();
                let ep = b.start()?;
                let ctx = ep.ctx();
                let src = Rank(0);
                let le =
                    |v: &[u32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_ne_bytes()).collect() };
                let refused = |r: HandlerResult| match r {
                    Err(e) => match e.downcast_ref::<AggError>() {
                        Some(AggError::Malformed { src, channel, why }) => {
                            *src == Rank(0)
                                && channel == "c"
                                && why.contains("none applied")
                                && why.contains("word 9 ")
                        }
                        _ => false,
                    },
                    Ok(()) => false,
                };
                // +1 items: words 3, 9 (past the 8), 2.
                let inc = apply_buffer(&ctx, src, ("c", win, false), 1, &le(&[3, 9, 2]));
                // Adds: word 1 += 5, word 9 += 1, word 2 += 0.5 (f64).
                let half = 0.5f64.to_bits();
                let add = apply_buffer(
                    &ctx,
                    src,
                    ("c", win, false),
                    3,
                    &le(&[
                        1,
                        5,
                        0,
                        9,
                        1,
                        0,
                        2 | FLOAT,
                        half as u32,
                        (half >> 32) as u32,
                    ]),
                );
                let untouched = (0..8)
                    .map(|i| words.local(&ctx, i))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(fastmsg::Error::from)?;
                // The same buffers without the bad items.
                apply_buffer(&ctx, src, ("c", win, false), 1, &le(&[3, 2]))
                    .map_err(fastmsg::Error::other)?;
                apply_buffer(
                    &ctx,
                    src,
                    ("c", win, false),
                    3,
                    &le(&[1, 5, 0, 4 | FLOAT, half as u32, (half >> 32) as u32]),
                )
                .map_err(fastmsg::Error::other)?;
                let applied = (0..8)
                    .map(|i| words.local(&ctx, i))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(fastmsg::Error::from)?;
                ep.close()?;
                Ok((refused(inc), refused(add), untouched, applied))
            },
        )
        .expect("one rank runs");
        let (inc, add, untouched, applied) = &out[0];
        assert!(inc, "a +1 buffer with a bad index is AggError::Malformed");
        assert!(add, "an add buffer with a bad index is AggError::Malformed");
        assert_eq!(untouched, &vec![0; 8], "nothing applied");
        let h = 0.5f64.to_bits();
        assert_eq!(applied, &vec![0, 5, 1, 1, h, 0, 0, 0]);
    }
}
