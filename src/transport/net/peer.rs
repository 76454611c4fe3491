//! One remote peer of [`super::RmaTransport`]: what a connected peer
//! holds (its ring positions, credit, where our areas lie on it, its
//! set-up connection) and the slot that holds it or says why not.
//!
//! Memory per remote peer (see `docs/scale.md`): a [`Slot`] (one word, an
//! address entry in the connector) while not connected; once connected a
//! boxed [`Peer`] (a few hundred bytes), its ring and words in the rings
//! area and the mirror of its ring in staging (both anonymous memory that
//! costs only what has been written: at most `slots × slot size` each),
//! and the wire's state for it (TCP: a socket and a 64 KiB parse buffer).

use super::wire::PeerArea;
use crate::id::Rank;
use crate::ring::{RingGeometry, RingRx, RingTx};
use std::cell::Cell;
use std::net::TcpStream;

/// A connected peer.
#[derive(Debug)]
pub(crate) struct Peer {
    pub(crate) rank: Rank,
    pub(crate) tx: RingTx,
    pub(crate) rx: RingRx,
    /// Where this peer's areas for us lie in its rings area.
    pub(crate) remote: PeerArea,
    pub(crate) gone: bool,
    /// Why its host was taken as dead, when it fell silent (kept for the
    /// sends that find it gone).
    pub(crate) silent: Option<String>,
    /// The set-up connection, kept to tell a peer's end.
    pub(crate) side: TcpStream,
    /// Safe mode: per slot, whether the write of the slot's next fragment
    /// was reported landed.
    pub(crate) landed: Box<[Cell<bool>]>,
}

impl Peer {
    /// Peer `rank`, connected over `side`, our areas at `remote` on it.
    pub(crate) fn new(
        rank: Rank,
        geometry: RingGeometry,
        remote: PeerArea,
        side: TcpStream,
    ) -> Peer {
        Peer {
            rank,
            tx: RingTx::new(geometry),
            rx: RingRx::new(geometry, rank.0),
            remote,
            gone: false,
            silent: None,
            side,
            landed: (0..geometry.slots).map(|_| Cell::new(false)).collect(),
        }
    }
}

/// A remote peer's place in the transport.
#[derive(Debug)]
pub(crate) enum Slot {
    /// Not connected yet (lazy set-up): connected on first use.
    Idle,
    /// Connected.
    Up(Box<Peer>),
    /// Its lazy connection failed (why): gone, reported once by
    /// `check_peers`, and named by every send or put to it.
    Down(String),
}

impl Slot {
    /// The peer, if connected.
    #[inline]
    pub(crate) fn up(&self) -> Option<&Peer> {
        match self {
            Slot::Up(p) => Some(p),
            _ => None,
        }
    }

    /// The peer, if connected.
    #[inline]
    pub(crate) fn up_mut(&mut self) -> Option<&mut Peer> {
        match self {
            Slot::Up(p) => Some(p),
            _ => None,
        }
    }
}
