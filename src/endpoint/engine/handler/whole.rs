//! Whole-message handlers: the handler gets one contiguous slice however
//! many frames the message spanned.
//!
//! Built on the plain-function kind: a message that fits one frame is
//! handed over in place (no copy); a longer one is gathered into a buffer
//! kept per source (at most one message of a source is in progress at a
//! time: pieces of a source arrive in order), which keeps its capacity
//! for the next long message. A message longer than the bound given at
//! registration is refused before anything is buffered
//! ([`ReceiveError::TooLong`]); an aborted one is dropped with
//! [`ReceiveError::Aborted`].

use super::piece::Piece;
use super::{FnHandler, HandlerResult};
use crate::error::ReceiveError;
use crate::id::Rank;

/// The per-source reassembly state of one whole-message handler.
#[derive(Default)]
struct Gather {
    /// Per source rank: the bytes gathered so far of its message.
    bufs: Vec<Vec<u8>>,
    /// Per source rank: its message in progress is refused (too long).
    refused: Vec<bool>,
}

/// A plain-function handler that gathers each message and calls `f` once
/// with all of it. Messages longer than `max_len` bytes are an error.
pub(crate) fn whole<C, F>(max_len: usize, mut f: F) -> FnHandler<C>
where
    F: FnMut(&C, Rank, &[u8]) -> HandlerResult + 'static,
{
    let mut g = Gather::default();
    Box::new(move |ctx: &C, p: &Piece<'_>| {
        let src = p.source();
        if p.is_first() && p.is_last() && !p.is_aborted() {
            if p.data().len() > max_len {
                return Err(too_long(p, max_len).into());
            }
            return f(ctx, src, p.data());
        }
        let i = src.index();
        if g.bufs.len() <= i {
            g.bufs.resize_with(i + 1, Vec::new);
            g.refused.resize(i + 1, false);
        }
        if p.is_first() {
            g.bufs[i].clear();
            g.refused[i] = p.message_len() > max_len;
            if g.refused[i] {
                // Said once, at the first piece; the rest is skipped.
                return Err(too_long(p, max_len).into());
            }
            g.bufs[i].reserve(p.message_len());
        }
        if g.refused[i] {
            return Ok(());
        }
        g.bufs[i].extend_from_slice(p.data());
        if p.is_aborted() {
            g.bufs[i].clear();
            return p.check().map_err(Into::into);
        }
        if !p.is_last() {
            return Ok(());
        }
        let buf = std::mem::take(&mut g.bufs[i]);
        let r = f(ctx, src, &buf);
        // Keep the capacity for this source's next long message.
        let mut buf = buf;
        buf.clear();
        g.bufs[i] = buf;
        r
    })
}

fn too_long(p: &Piece<'_>, max_len: usize) -> ReceiveError {
    ReceiveError::TooLong {
        src: p.source(),
        len: p.message_len() as u64,
        max: max_len as u64,
    }
}
