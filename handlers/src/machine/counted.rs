//! The message of a collective with varying counts that carries several
//! members' blocks (`gatherv`, `scatterv` through a tree): each block's
//! element count, then the blocks back to back.
//!
//! ```text
//!  0 .. 8d      d counts   (u64 LE; d = the blocks the message covers,
//!                           known to both ends from the tree)
//!  8d ..        the blocks (native elements)
//! ```
//!
//! The receiver checks that the counts add up to the bytes that follow
//! before it uses either, so a peer's counts never size an allocation.

use super::Io;
use crate::error::CollError;

/// Bytes of one count.
const COUNT: usize = 8;

/// The counts header for `counts`, to be followed by their blocks.
pub(crate) fn header(counts: &[usize]) -> Vec<u8> {
    counts
        .iter()
        .flat_map(|&c| (c as u64).to_le_bytes())
        .collect()
}

/// Split a message from member `from` that covers `blocks` blocks of
/// `size`-byte elements into the blocks' element counts and their bytes.
///
/// # Errors
/// [`CollError::Unexpected`] if the message is shorter than its counts or
/// they do not add up to the bytes after them.
pub(crate) fn split<'d>(
    io: &Io<'_>,
    from: u32,
    step: u16,
    blocks: usize,
    size: usize,
    data: &'d [u8],
) -> Result<(Vec<usize>, &'d [u8]), CollError> {
    let bad = |why| io.unexpected(from, step, why);
    let head = blocks * COUNT;
    if data.len() < head {
        return Err(bad("shorter than its block counts"));
    }
    let (h, rest) = data.split_at(head);
    let mut counts = Vec::with_capacity(blocks);
    let mut total = 0usize;
    for c in h.chunks_exact(COUNT) {
        let c = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        let c = usize::try_from(c).map_err(|_| bad("a block count out of range"))?;
        total = total
            .checked_add(c)
            .filter(|&t| t.checked_mul(size).is_some_and(|b| b <= rest.len()))
            .ok_or_else(|| bad("block counts exceed the message"))?;
        counts.push(c);
    }
    if total * size != rest.len() {
        return Err(bad("block counts do not add up to the message"));
    }
    Ok((counts, rest))
}
