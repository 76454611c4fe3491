//! What a peer's set-up connection says after start-up: its goodbye byte
//! (closed in order, or dropped without `close`), or its end (a failure).
//! Wires that carry their data on those connections report the same as
//! `Event::Ended`.

use super::wire::{look_at_link, LinkNews};
use super::*;

impl<W: RmaWire> RmaTransport<W> {
    /// Read what peer `k`'s set-up connection says without blocking: its
    /// goodbye byte, its end, or nothing.
    pub(super) fn side_news(&mut self, k: usize) -> Result<(), ExtractError> {
        let p = self.p_mut(k);
        let how = match look_at_link(p.side.as_raw_fd(), false) {
            LinkNews::Quiet => return Ok(()),
            LinkNews::Byte(BYE_CLOSED) => Ok(true),
            LinkNews::Byte(BYE_LEFT) => Ok(false),
            LinkNews::Byte(_) => Err(NetError::Disconnected {
                rank: p.rank,
                mid_record: true,
            }),
            LinkNews::Ended => Err(NetError::Disconnected {
                rank: p.rank,
                mid_record: false,
            }),
            LinkNews::Failed(e) => Err(crate::netio::alive::receive_failed(p.rank, &e)),
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
        if let Err(NetError::HostSilent { why, .. }) = &how {
            p.silent = Some(why.clone());
        }
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
