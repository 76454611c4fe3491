//! What a peer's set-up connection says after start-up: its goodbye byte
//! (closed in order, or dropped without `close`), or its end (a failure).
//! Wires that carry their data on those connections report the same as
//! `Event::Ended`.

use super::*;

impl<W: RmaWire> RmaTransport<W> {
    /// Read what peer `k`'s set-up connection says without blocking: its
    /// goodbye byte, its end, or nothing.
    pub(super) fn side_news(&mut self, k: usize) -> Result<(), ExtractError> {
        let p = self.p_mut(k);
        let mut b = [0u8; 1];
        // SAFETY: reading one byte from our own socket, non-blocking.
        let r = unsafe {
            libc::recv(
                p.side.as_raw_fd(),
                b.as_mut_ptr() as *mut libc::c_void,
                1,
                libc::MSG_DONTWAIT,
            )
        };
        let how = match r {
            1 if b[0] == BYE_CLOSED => Ok(true),
            1 if b[0] == BYE_LEFT => Ok(false),
            0 | 1 => Err(NetError::Disconnected {
                rank: p.rank,
                mid_record: r == 1,
            }),
            _ => {
                let e = std::io::Error::last_os_error();
                match e.kind() {
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => {
                        return Ok(())
                    }
                    // The kernel gave up on a silent host (a connection
                    // armed by `crate::netio::alive`), or it was reset.
                    _ => Err(crate::netio::alive::receive_failed(p.rank, &e)),
                }
            }
        };
        self.departed(k, how)
    }

    /// Peer `k`'s connection ended `how` (see [`Event::Ended`]): it is
    /// gone, and a goodbye without close or a failure is the error.
    pub(super) fn departed(
        &mut self,
        k: usize,
        how: Result<bool, NetError>,
    ) -> Result<(), ExtractError> {
        let p = self.p_mut(k);
        p.gone = true;
        match how {
            Ok(true) => Ok(()),
            Ok(false) => Err(ExtractError::PeerLeft { rank: p.rank }),
            Err(e) => Err(ExtractError::Network(e)),
        }
    }

    /// What peer `k`'s connection says: its end, once, or nothing.
    pub(super) fn peer_news(&mut self, k: usize) -> Result<(), ExtractError> {
        if !self.carries_ends {
            return self.side_news(k);
        }
        let found = {
            let mut ended = self.ended.borrow_mut();
            let i = ended.iter().position(|e| e.0 == k);
            i.map(|i| ended.remove(i).1)
        };
        match found {
            Some(how) => self.departed(k, how),
            None => Ok(()),
        }
    }
}
