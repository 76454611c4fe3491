//! [`MessageWriter`]: the main thread's streamed gather send
//! (`FM_begin_message` → `FM_send_piece`… → `FM_end_message`).

use crate::endpoint::engine::core::Core;
use crate::endpoint::engine::net::OutStream;
use crate::endpoint::wait::Waiter;
use crate::error::SendError;
use std::rc::Rc;

/// A message being sent, piece by piece, straight into transport frames.
///
/// Created by [`Endpoint::begin_message`](crate::endpoint::Endpoint::begin_message).
/// When out of credit, `send_piece` and `end` make progress (run handlers)
/// until credit returns, so two ranks sending head-to-head never deadlock.
///
/// A message that does not carry exactly the declared bytes is *aborted*:
/// a piece that would pass the declared length, `end` before it is
/// reached, or dropping the writer (an early `?`, a panic) end the message
/// where it is, and its handler learns that it was aborted
/// ([`ReceiveError::Aborted`](crate::error::ReceiveError::Aborted), or a
/// piece flagged [`is_aborted`](crate::endpoint::Piece::is_aborted)) — it is never
/// padded into a valid-looking message.
#[derive(Debug)]
pub struct MessageWriter<'a> {
    core: &'a Rc<Core>,
    s: OutStream,
    ended: bool,
    /// Aborted by an earlier error: later calls fail.
    aborted: bool,
}

impl<'a> MessageWriter<'a> {
    /// Open the main thread's stream `s` in the place it reserved
    /// (`Core::begin_message`: its turn has come, nothing parked is ahead
    /// of it). The place stays taken until the writer ends
    /// ([`close`](Self::close)).
    pub(in crate::endpoint) fn open(core: &'a Rc<Core>, s: OutStream) -> Self {
        debug_assert!(core.net().borrow().main_turn());
        MessageWriter {
            core,
            s,
            ended: false,
            aborted: false,
        }
    }

    /// Bytes still to send.
    pub fn remaining(&self) -> usize {
        (self.s.total - self.s.written) as usize
    }

    /// Append a piece (gather). Pieces go straight into frames; a full frame
    /// is sent at once.
    ///
    /// # Errors
    /// [`SendError::Overflow`] if the piece passes the declared length:
    /// nothing of it is sent and the message is aborted;
    /// [`SendError::PeerGone`] if the destination failed (also while we
    /// waited for credit); [`SendError::MessageAborted`] after an earlier
    /// error aborted the message.
    pub fn send_piece(&mut self, data: &[u8]) -> Result<(), SendError> {
        if self.aborted || self.ended {
            return Err(SendError::MessageAborted { dest: self.s.dest });
        }
        let attempted = self.s.written + data.len() as u64;
        if attempted > self.s.total {
            return self.abort(SendError::Overflow {
                declared: self.s.total,
                attempted,
            });
        }
        self.write_all(data)
    }

    fn write_all(&mut self, data: &[u8]) -> Result<(), SendError> {
        let mut off = 0;
        let mut waiter = Waiter::for_peer(self.s.dest);
        loop {
            off += self
                .s
                .write(&mut self.core.net().borrow_mut(), &data[off..]);
            if off == data.len() {
                return Ok(());
            }
            self.core.wait_for_credit(self.s.dest, &mut waiter)?;
        }
    }

    /// Finish the message.
    ///
    /// # Errors
    /// [`SendError::Short`] if fewer bytes than declared were sent: the
    /// message is aborted (its handler is told); [`SendError::PeerGone`];
    /// [`SendError::MessageAborted`] after an earlier error aborted it.
    pub fn end(mut self) -> Result<(), SendError> {
        self.complete()
    }

    fn complete(&mut self) -> Result<(), SendError> {
        if self.aborted || self.ended {
            return Err(SendError::MessageAborted { dest: self.s.dest });
        }
        if self.s.written < self.s.total {
            return self.abort(SendError::Short {
                declared: self.s.total,
                written: self.s.written,
            });
        }
        self.close(false)
    }

    /// End the message here, aborted, and return `why`.
    fn abort(&mut self, why: SendError) -> Result<(), SendError> {
        self.aborted = true;
        self.close(true)?;
        Err(why)
    }

    /// Commit the last fragment (flagged aborted if `aborted`), waiting
    /// for credit, and close the main thread's stream whatever happens.
    fn close(&mut self, aborted: bool) -> Result<(), SendError> {
        self.ended = true;
        let mut waiter = Waiter::for_peer(self.s.dest);
        let result = loop {
            let done = {
                let mut net = self.core.net().borrow_mut();
                if aborted {
                    self.s.finish_aborted(&mut net)
                } else {
                    self.s.finish(&mut net)
                }
            };
            if done {
                break Ok(());
            }
            if let Err(e) = self.core.wait_for_credit(self.s.dest, &mut waiter) {
                break Err(e);
            }
        };
        self.core.net().borrow_mut().close_main();
        result
    }
}

impl Drop for MessageWriter<'_> {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.complete();
        }
    }
}
