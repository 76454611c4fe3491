//! Test hooks of the shared-memory transport: what a buggy or hostile
//! process sharing the segment would do (craft a descriptor, scribble on
//! stamps and frame flags), for the engine's tests of its typed errors.

use super::*;

impl ShmTransport {
    /// Publish a crafted descriptor towards `dest`, bypassing every check of
    /// the send path (as a buggy or hostile peer would), taking one credit.
    pub(crate) fn publish_raw(&mut self, dest: Rank, body: SlotBody) {
        let peer = self.tx[dest.index()].as_mut().expect("local peer");
        assert!(matches!(peer.take_credit(), Ok(true)));
        let peer = self.tx[dest.index()].as_ref().expect("local peer");
        if peer.q.is_shared() {
            let mut own = shared_send::OwnLook::new(self);
            peer.publish_shared(|b| *b = body, &mut own)
                .expect("a sound queue");
        } else {
            peer.q.publish_dedicated(peer.window.sent() - 1, &body);
        }
    }

    /// Claim a position on the shared queue we write on `dest` and never
    /// write it, as a sender killed between the two steps would.
    pub(crate) fn claim_raw(&mut self, dest: Rank) {
        let peer = self.tx[dest.index()].as_mut().expect("local peer");
        assert!(peer.q.is_shared(), "a shared queue");
        assert!(matches!(peer.take_credit(), Ok(true)));
        peer.q.claim();
    }

    /// Overwrite the stamp of every slot of the queue we write on `dest`
    /// with `value` (as another process scribbling on the segment would).
    pub(crate) fn scribble_stamps(&mut self, dest: Rank, value: u64) {
        let peer = self.tx[dest.index()].as_ref().expect("local peer");
        for pos in 0..peer.q.capacity() {
            // Relaxed: garbage, ordered with nothing.
            peer.q
                .watch(pos)
                .stamp_ref()
                .store(value, crate::sync::Ordering::Relaxed);
        }
    }

    /// Set the stamp of the slot the next claim on the queue we write on
    /// `dest` will take back one lap (`pos - capacity`: "recycled for the
    /// earlier position", a value the protocol itself writes there), as
    /// another process of the same user could. Needs a queue past its
    /// first lap.
    pub(crate) fn set_back_next_stamp(&mut self, dest: Rank) {
        let peer = self.tx[dest.index()].as_ref().expect("local peer");
        let pos = peer.q.claimed();
        let cap = peer.q.capacity();
        assert!(pos >= cap, "the queue is in its first lap");
        // Relaxed: a scribble, ordered with nothing.
        peer.q
            .watch(pos)
            .stamp_ref()
            .store(pos - cap, crate::sync::Ordering::Relaxed);
    }

    /// Set back one lap the stamps of the positions published on our
    /// shared queue 0 and not yet taken — "published a lap earlier", a
    /// value the protocol writes there, which the poll reads as "not yet
    /// published" — as another process of the same user could; how many.
    pub(crate) fn set_back_published(&mut self) -> usize {
        let rq = &self.rx[0];
        assert!(rq.q.is_shared(), "a shared queue");
        let cap = rq.q.capacity();
        let mut n = 0;
        for pos in rq.head..rq.q.claimed() {
            if rq.q.stamp(pos) == pos + 1 && pos >= cap {
                // Relaxed: a scribble, ordered with nothing.
                rq.q.watch(pos)
                    .stamp_ref()
                    .store(pos + 1 - cap, crate::sync::Ordering::Relaxed);
                n += 1;
            }
        }
        n
    }

    /// Set the stamp of every slot we filled on `dest`'s dedicated queue
    /// and have not had credited back one lap back — "not yet published"
    /// to the receiver, a value the protocol writes there — as another
    /// process of the same user could.
    pub(crate) fn set_back_sent_stamps(&mut self, dest: Rank) {
        let peer = self.tx[dest.index()].as_ref().expect("local peer");
        assert!(!peer.q.is_shared(), "a dedicated queue");
        let cap = peer.q.capacity();
        for pos in peer.window.returned()..peer.window.sent() {
            let back = (pos + 1).checked_sub(cap).unwrap_or(pos);
            // Relaxed: a scribble, ordered with nothing.
            peer.q
                .watch(pos)
                .stamp_ref()
                .store(back, crate::sync::Ordering::Relaxed);
        }
    }

    /// Overwrite the in-use flag of every frame of the queue we write on
    /// `dest` with `value` (as another process scribbling would).
    pub(crate) fn scribble_frames(&mut self, dest: Rank, value: u32) {
        let peer = self.tx[dest.index()].as_ref().expect("local peer");
        for frame in 0..peer.frames.count() {
            // Relaxed: garbage, ordered with nothing.
            peer.frames
                .in_use(frame)
                .store(value, crate::sync::Ordering::Relaxed);
        }
    }

    /// Overwrite the stamp of the next slot `dest` will poll from us.
    pub(crate) fn corrupt_next_stamp(&mut self, dest: Rank, value: u64) {
        let peer = self.tx[dest.index()].as_ref().expect("local peer");
        let pos = peer.window.sent();
        // SYNC POINT rq-publish (release side): a stamp as a broken peer
        // would publish it.
        peer.q
            .watch(pos)
            .stamp_ref()
            .store(value, crate::sync::Ordering::Release);
    }
}
