//! [`Channel`]: items of one plain fixed-size type.

use super::outbox::Outbox;
use super::{AggError, Aggregator};
use bytemuck::Pod;
use fastmsg::{Ctx, EndpointBuilder, HandlerResult, Rank};
use std::marker::PhantomData;
use std::rc::Rc;

/// A channel of items of type `T` (plain old data: `#[derive(Pod,
/// Zeroable, Clone, Copy)]` with `#[repr(C)]`), each handled by the
/// channel's handler on the receiving rank. Cheap to clone: clones share
/// the buffers (a handler may capture one to send from inside).
pub struct Channel<T: Pod> {
    out: Rc<Outbox<T>>,
    _t: PhantomData<fn(T)>,
}

impl<T: Pod> Clone for Channel<T> {
    fn clone(&self) -> Self {
        Channel {
            out: Rc::clone(&self.out),
            _t: PhantomData,
        }
    }
}

impl<T: Pod> std::fmt::Debug for Channel<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("name", &self.out.name)
            .field("item_bytes", &std::mem::size_of::<T>())
            .finish()
    }
}

impl<T: Pod> Channel<T> {
    /// Send `item` to this channel's handler on `dest`: appended to
    /// `dest`'s buffer, which leaves as one message when full, on a flush,
    /// or when this rank is idle. From a handler, never blocks.
    ///
    /// # Errors
    /// [`AggError::BadDestination`]; [`AggError::Send`] if a buffer that
    /// left could not be sent (its destination is gone).
    #[inline]
    pub fn send(&self, ctx: &Ctx, dest: Rank, item: T) -> Result<(), AggError> {
        // In place (a zero-sized item still counts: one byte on the wire).
        self.out.push_item(ctx, dest, item)
    }

    /// The handler id carrying this channel's buffers (for tools and
    /// tests that talk to it directly).
    pub fn handler(&self) -> fastmsg::HandlerId {
        self.out.handler
    }

    /// Send `dest`'s partly filled buffer now.
    ///
    /// # Errors
    /// [`AggError::Send`].
    pub fn flush_to(&self, ctx: &Ctx, dest: Rank) -> Result<(), AggError> {
        self.out.flush(ctx, dest.index())
    }
}

impl Aggregator {
    /// A channel of `T` named `name` (every rank makes the same channels in
    /// the same order); `handler` runs once per item on the receiver, with
    /// the sender's rank, in the order the sender sent them.
    pub fn channel<T, F>(&self, b: &mut EndpointBuilder, name: &str, handler: F) -> Channel<T>
    where
        T: Pod,
        F: FnMut(&Ctx, Rank, T) -> HandlerResult + 'static,
    {
        let ch = self.declare(b, name);
        self.define(b, &ch, handler);
        ch
    }

    /// A channel whose handler is given later with
    /// [`define`](Self::define): channels whose handlers send to each other
    /// (a request channel and its reply channel) can each hold the other.
    pub fn declare<T: Pod>(&self, b: &mut EndpointBuilder, name: &str) -> Channel<T> {
        Channel {
            out: self.outbox(b, name),
            _t: PhantomData,
        }
    }

    /// Give declared channel `ch` its handler (`start` fails with
    /// `StartError::UndefinedHandler` if a declared channel never gets
    /// one).
    pub fn define<T, F>(&self, b: &mut EndpointBuilder, ch: &Channel<T>, mut handler: F)
    where
        T: Pod,
        F: FnMut(&Ctx, Rank, T) -> HandlerResult + 'static,
    {
        let name = ch.out.name.clone();
        let item = std::mem::size_of::<T>().max(1);
        let max = ch.out.cap.max(item);
        b.define_whole(ch.out.handler, max, move |ctx, src, bytes| {
            if bytes.len() % item != 0 {
                return Err(AggError::malformed(
                    src,
                    &name,
                    format!(
                        "{} bytes are not a whole number of {item}-byte items",
                        bytes.len()
                    ),
                )
                .into());
            }
            for c in bytes.chunks_exact(item) {
                let v = if std::mem::size_of::<T>() == 0 {
                    T::zeroed()
                } else {
                    bytemuck::pod_read_unaligned(c)
                };
                handler(ctx, src, v)?;
            }
            Ok(())
        });
    }
}
