//! Peers set up on first use (`lazy`): connecting a peer a send needs,
//! installing the links the accepting thread hands over, and the watch the
//! poll keeps on each connected peer's ring. A peer that cannot be
//! reached is marked down and reported once by `check_peers`.

use super::*;

impl<W: RmaWire> RmaTransport<W> {
    /// Whether peer `k` is connected, connecting it now if it is not yet
    /// (lazy set-up: waits for the set-up, bounded by the connect timeout;
    /// a failure marks it gone and `check_peers` reports it).
    pub(super) fn ensure(&mut self, k: usize) -> bool {
        match self.peers[k] {
            Slot::Up(_) => return true,
            Slot::Down(_) => return false,
            Slot::Idle => {}
        }
        let Some(lazy) = &self.lazy else {
            return false;
        };
        let timeout = lazy.timeout();
        match lazy.dial(k) {
            Ok(Dialed::Link(stream, theirs)) => self.install(Incoming { k, stream, theirs }),
            Ok(Dialed::Crossed) => {
                // The pair's accepted connection comes through the channel.
                let start = Instant::now();
                while matches!(self.peers[k], Slot::Idle) && start.elapsed() < timeout {
                    let got = self
                        .lazy
                        .as_ref()
                        .and_then(|l| l.wait(Duration::from_millis(10)));
                    if let Some(i) = got {
                        self.install(i);
                    }
                }
                if matches!(self.peers[k], Slot::Idle) {
                    self.unreach(k, format!("its connection was not set up in {timeout:?}"));
                }
            }
            Err(e) => self.unreach(k, e.to_string()),
        }
        matches!(self.peers[k], Slot::Up(_))
    }

    pub(super) fn unreach(&mut self, k: usize, why: String) {
        self.peers[k] = Slot::Down(why.clone());
        self.unreachable.push((k, why));
    }

    /// Install the links the accepting thread handed over.
    #[cold]
    pub(super) fn install_arrived(&mut self) {
        let links = self.lazy.as_ref().map(Connector::take).unwrap_or_default();
        for i in links {
            self.install(i);
        }
    }

    /// Connect peer `i.k` over the set-up link `i` (lazy set-up).
    pub(super) fn install(&mut self, i: Incoming) {
        let k = i.k;
        if !matches!(self.peers[k], Slot::Idle) {
            return;
        }
        let rank = self.ranks[k];
        if i.theirs.len() < PeerArea::BYTES {
            let why = format!("a {}-byte area description, too short", i.theirs.len());
            return self.unreach(k, why);
        }
        let (area, desc) = i.theirs.split_at(PeerArea::BYTES);
        let remote = PeerArea::decode(area.try_into().expect("checked length"));
        if let Err(e) = self.wire.arm(&i.stream, self.dead_after) {
            return self.unreach(k, format!("watching for a lost host on the link: {e}"));
        }
        if let Err(e) = self.wire.connect(k, rank.0, &remote, desc, &i.stream) {
            return self.unreach(k, format!("connecting the wire: {e}"));
        }
        let peer = Peer::new(rank, self.geometry, remote, i.stream);
        self.activate(k, peer);
    }

    /// Peer `k` is connected: poll it from now on.
    pub(super) fn activate(&mut self, k: usize, peer: Peer) {
        self.peers[k] = Slot::Up(Box::new(peer));
        self.active.push(k);
        self.watch.push(self.watch_of(k));
        // Its ring may hold what was placed before it joined.
        self.scan.reset();
    }

    /// Peer `k`'s watch as its reader stands.
    pub(super) fn watch_of(&self, k: usize) -> Watch {
        let g = self.geometry;
        let rx = &self.p(k).rx;
        let slot = g.slot_of(rx.head()) as usize;
        Watch {
            at: self.ring_off(k) + (slot + 1) * g.slot_bytes as usize - 8,
            want: rx.head() + 1,
            live: rx.in_service(),
        }
    }

    /// Reset the watch of `active[i]` after its reader's head or service
    /// changed.
    pub(super) fn rewatch(&mut self, i: usize) {
        self.watch[i] = self.watch_of(self.active[i]);
        // Its ring may be back in service with a fragment waiting.
        self.scan.reset();
    }

    #[inline]
    pub(super) fn lazy_arrived(&self) -> bool {
        self.lazy.as_ref().is_some_and(Connector::arrived)
    }
}
