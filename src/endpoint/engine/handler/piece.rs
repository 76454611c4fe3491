//! A piece of an arriving message, as a plain-function handler gets it:
//! pure data (where the piece lies in its message, its bytes borrowed from
//! the transport's frame, whether the message ends here aborted), built by
//! the receive room and read by the handler.

use crate::error::ReceiveError;
use crate::id::{HandlerId, Rank};

/// A piece of an arriving message, as given to a plain-function handler
/// (see [`EndpointBuilder::register_fn`](crate::EndpointBuilder::register_fn)).
///
/// The bytes are borrowed straight from the transport's frame and released
/// when the handler returns. A message that fits one frame comes as one
/// piece; a longer one as several, in order, with increasing
/// [`offset`](Piece::offset).
///
/// A message that ends short — its sender aborted it, or failed while
/// sending it — ends with a last piece flagged [`is_aborted`]
/// (possibly empty): the bytes before are what was sent, nothing is
/// padded. [`check`](Piece::check) turns the flag into an error.
///
/// [`is_aborted`]: Piece::is_aborted
#[derive(Debug, Clone, Copy)]
pub struct Piece<'a> {
    pub(in crate::endpoint) source: Rank,
    pub(in crate::endpoint) offset: u64,
    pub(in crate::endpoint) total: u64,
    pub(in crate::endpoint) handler: HandlerId,
    pub(in crate::endpoint) data: &'a [u8],
    pub(in crate::endpoint) aborted: bool,
}

impl<'a> Piece<'a> {
    /// The sending rank.
    #[inline]
    pub fn source(&self) -> Rank {
        self.source
    }

    /// The bytes of this piece.
    #[inline]
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// Where this piece starts in the message.
    #[inline]
    pub fn offset(&self) -> usize {
        self.offset as usize
    }

    /// The whole message's length.
    #[inline]
    pub fn message_len(&self) -> usize {
        self.total as usize
    }

    /// Whether this is the message's first piece.
    #[inline]
    pub fn is_first(&self) -> bool {
        self.offset == 0
    }

    /// Whether this is the message's last piece (also when it ends
    /// aborted).
    #[inline]
    pub fn is_last(&self) -> bool {
        self.aborted || self.offset + self.data.len() as u64 == self.total
    }

    /// Whether the message ends here, aborted: fewer bytes arrived than
    /// [`message_len`](Self::message_len) declared (the sender aborted the
    /// message or failed while sending it).
    #[inline]
    pub fn is_aborted(&self) -> bool {
        self.aborted
    }

    /// `Ok` unless the message ends here aborted.
    ///
    /// # Errors
    /// [`ReceiveError::Aborted`] on an aborted message's last piece.
    #[inline]
    pub fn check(&self) -> Result<(), ReceiveError> {
        if self.aborted {
            Err(ReceiveError::Aborted {
                src: self.source,
                declared: self.total,
                received: self.offset + self.data.len() as u64,
            })
        } else {
            Ok(())
        }
    }

    /// The handler this message names.
    #[inline]
    pub fn handler(&self) -> HandlerId {
        self.handler
    }
}
