//! [`ByteChannel`]: variable-size items, length-prefixed in the buffers.

use super::outbox::Outbox;
use super::{AggError, Aggregator};
use fastmsg::{Ctx, EndpointBuilder, HandlerResult, Rank};
use std::rc::Rc;

/// Bytes of an item's length prefix (u32 little-endian).
const PREFIX: usize = 4;

/// A channel of byte strings of any length up to
/// [`AggConfig::max_item_bytes`](super::AggConfig::max_item_bytes). An
/// item longer than a buffer leaves in a message of its own (after the
/// buffer, so order holds). Cheap to clone.
#[derive(Clone)]
pub struct ByteChannel {
    out: Rc<Outbox<u8>>,
    max_item: usize,
}

impl std::fmt::Debug for ByteChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ByteChannel")
            .field("name", &self.out.name)
            .finish()
    }
}

impl ByteChannel {
    /// The handler id carrying this channel's buffers.
    pub fn handler(&self) -> fastmsg::HandlerId {
        self.out.handler
    }

    /// Send `item` to this channel's handler on `dest` (see
    /// [`Channel::send`](super::Channel::send)).
    ///
    /// # Errors
    /// [`AggError::ItemTooLong`], [`AggError::BadDestination`],
    /// [`AggError::Send`].
    pub fn send(&self, ctx: &Ctx, dest: Rank, item: &[u8]) -> Result<(), AggError> {
        if item.len() > self.max_item {
            return Err(AggError::ItemTooLong {
                channel: self.out.name.clone(),
                len: item.len(),
                max: self.max_item,
            });
        }
        let len = (item.len() as u32).to_le_bytes();
        self.out.push(ctx, dest, &[&len, item])
    }
}

impl Aggregator {
    /// A channel of byte strings named `name`; `handler` runs once per
    /// item on the receiver, in the order the sender sent them.
    pub fn byte_channel<F>(
        &self,
        b: &mut EndpointBuilder,
        name: &str,
        mut handler: F,
    ) -> ByteChannel
    where
        F: FnMut(&Ctx, Rank, &[u8]) -> HandlerResult + 'static,
    {
        let out = self.outbox(b, name);
        let max_item = self.config().max_item_bytes.min(u32::MAX as usize);
        let max = out.cap.max(max_item + PREFIX);
        let channel = name.to_owned();
        b.define_whole(out.handler, max, move |ctx, src, mut bytes| {
            while !bytes.is_empty() {
                let bad = |why: String| AggError::malformed(src, &channel, why);
                let Some((len, rest)) = bytes.split_first_chunk::<PREFIX>() else {
                    return Err(
                        bad(format!("{} bytes left, too few for a length", bytes.len())).into(),
                    );
                };
                let len = u32::from_le_bytes(*len) as usize;
                if len > rest.len() || len > max_item {
                    return Err(bad(format!(
                        "an item of {len} bytes with {} left in the buffer (limit {max_item})",
                        rest.len()
                    ))
                    .into());
                }
                let (item, rest) = rest.split_at(len);
                handler(ctx, src, item)?;
                bytes = rest;
            }
            Ok(())
        });
        ByteChannel { out, max_item }
    }
}
