//! [`MessageWriter`]: the main thread's streamed gather send
//! (`FM_begin_message` → `FM_send_piece`… → `FM_end_message`).

use super::core::Core;
use super::net::OutStream;
use super::wait::Waiter;
use crate::error::SendError;
use std::rc::Rc;

/// A message being sent, piece by piece, straight into transport frames.
///
/// Created by [`Endpoint::begin_message`](super::Endpoint::begin_message).
/// When out of credit, `send_piece` and `end` make progress (run handlers)
/// until credit returns, so two ranks sending head-to-head never deadlock.
/// Dropping a writer before [`end`](MessageWriter::end) completes the
/// message with zero bytes, so the receiver stays in step.
#[derive(Debug)]
pub struct MessageWriter<'a> {
    core: &'a Rc<Core>,
    s: OutStream,
    ended: bool,
}

impl<'a> MessageWriter<'a> {
    pub(crate) fn new(core: &'a Rc<Core>, s: OutStream) -> Self {
        MessageWriter {
            core,
            s,
            ended: false,
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
    /// [`SendError::Overflow`] if the piece passes the declared length
    /// (nothing of it is sent); [`SendError::PeerGone`] if the destination
    /// died while we waited for credit.
    pub fn send_piece(&mut self, data: &[u8]) -> Result<(), SendError> {
        let attempted = self.s.written + data.len() as u64;
        if attempted > self.s.total {
            return Err(SendError::Overflow {
                declared: self.s.total,
                attempted,
            });
        }
        self.write_all(data)
    }

    fn write_all(&mut self, data: &[u8]) -> Result<(), SendError> {
        let mut off = 0;
        let mut waiter = Waiter::new();
        loop {
            off += self.s.write(&mut self.core.net.borrow_mut(), &data[off..]);
            if off == data.len() {
                return Ok(());
            }
            self.core.wait_for_credit(self.s.dest, &mut waiter)?;
        }
    }

    /// Finish the message.
    ///
    /// # Errors
    /// [`SendError::Short`] if fewer bytes than declared were sent (the rest
    /// is sent as zeros); [`SendError::PeerGone`].
    pub fn end(mut self) -> Result<(), SendError> {
        self.complete()
    }

    fn complete(&mut self) -> Result<(), SendError> {
        self.ended = true;
        let short = self.s.total - self.s.written;
        if short > 0 {
            let zeros = vec![0u8; short.min(1 << 16) as usize];
            while self.s.written < self.s.total {
                let n = (self.s.total - self.s.written).min(zeros.len() as u64) as usize;
                if let Err(e) = self.write_all(&zeros[..n]) {
                    self.core.net.borrow_mut().open = None;
                    return Err(e);
                }
            }
        }
        let mut waiter = Waiter::new();
        while !self.s.finish(&mut self.core.net.borrow_mut()) {
            if let Err(e) = self.core.wait_for_credit(self.s.dest, &mut waiter) {
                self.core.net.borrow_mut().open = None;
                return Err(e);
            }
        }
        self.core.net.borrow_mut().open = None;
        if short > 0 {
            return Err(SendError::Short {
                declared: self.s.total,
                written: self.s.total - short,
            });
        }
        Ok(())
    }
}

impl Drop for MessageWriter<'_> {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.complete();
        }
    }
}
