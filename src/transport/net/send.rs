//! The send side of the ring protocol: a reserved slot's position against
//! the peer's returned credit, posting a fragment (payload and trailer in
//! one write) from the mirror or straight from the caller's pieces, the
//! credit and flush words, and a failed write marking its peer gone.

use super::*;

impl<W: RmaWire> RmaTransport<W> {
    /// Post fragment `pos` (payload at the start of its mirror slot).
    pub(super) fn send_fragment(&mut self, k: usize, pos: u64, header: FragHeader) {
        let g = self.geometry;
        let len = header.len as usize;
        let credit = self.p_mut(k).rx.piggyback();
        let trailer = self.p_mut(k).tx.trailer(pos, header, credit).to_bytes();
        let slot_start = self.ring_off(k) + (g.slot_of(pos) * g.slot_bytes) as usize;
        // SAFETY: the mirror slot is ours until its credit returns; the
        // payload lies at its start and `len + TRAILER_BYTES <= slot`.
        unsafe {
            core::ptr::copy_nonoverlapping(
                trailer.as_ptr(),
                self.staging.base().add(slot_start + len),
                TRAILER_BYTES,
            )
        };
        let remote = self.p(k).remote.ring + g.write_start(pos, len);
        let notify = self.notify.then_some(pos);
        if let Err(why) = self
            .wire
            .write(k, slot_start, len + TRAILER_BYTES, remote, notify)
        {
            self.fail(k, why);
        }
    }

    /// Write flush round `round` to peer `k`'s flush word (`quiesce`).
    pub(super) fn send_flush(&mut self, k: usize, round: u64) {
        let local = self.flush_src_off(k);
        // SAFETY: peer k's flush source word in staging is ours; the
        // previous round's write from it completed (fenced, or ordered
        // and answered by the peer's flush of that round).
        unsafe {
            core::ptr::copy_nonoverlapping(
                round.to_le_bytes().as_ptr(),
                self.staging.base().add(local),
                8,
            )
        };
        let at = self.p(k).remote.flush;
        // SYNC POINT ring-flush (release side): the flush word goes
        // after every earlier write to this peer, and the wire places
        // writes in order (or, in safe mode, issues it only after their
        // completions), so the peer that reads the round sees them all.
        if let Err(why) = self.wire.write(k, local, 8, at, None) {
            self.fail(k, why);
        }
    }

    pub(super) fn fail(&mut self, k: usize, why: String) {
        // A write that found the peer's host silent: that is the cause
        // every later error about the peer names.
        let silent = self.wire.silence(k);
        let p = self.p_mut(k);
        p.gone = true;
        if p.silent.is_none() {
            p.silent = silent;
        }
        self.failed.borrow_mut().push((k, why));
    }

    /// Return credit with an 8-byte write to the peer's credit word.
    pub(super) fn send_credit(&mut self, k: usize, count: u64) {
        if self.p(k).gone || self.quiet {
            return;
        }
        let at = self.p(k).remote.credit;
        if let Err(why) = self.wire.write_word(k, at, count) {
            self.fail(k, why);
        }
    }

    /// The position of peer `k`'s next fragment, if it has credit.
    pub(super) fn reserve(&mut self, k: usize) -> Option<u64> {
        let g = self.geometry;
        let credit_at = self.credit_off(k);
        let RmaTransport {
            peers,
            rings,
            wire,
            lands_alone,
            failed,
            ended,
            idle,
            reports,
            ..
        } = self;
        // SYNC POINT credit-return (acquire side): the peer's write of its
        // released count.
        let word = || rings.word(credit_at).load(Ordering::Acquire);
        let (mine, others) = split_at_peer(peers, k);
        // Read the sockets only when the count already landed does not
        // give credit (each read is a system call).
        let short = !mine.tx.has_credit(word());
        mine.tx.try_reserve(|| {
            if short && !*lands_alone {
                // Out of credit: the returned count lands through progress.
                idle.set(0);
                wire.progress();
                wire.take_events(&mut |e| match e {
                    Event::Landed { peer, pos } => {
                        let slot = g.slot_of(pos) as usize;
                        let l = if peer == k {
                            mine.landed.get(slot)
                        } else {
                            others(peer).and_then(|p| p.landed.get(slot))
                        };
                        if let Some(c) = l {
                            mark(c, reports);
                        }
                    }
                    Event::Failed { peer, why } => failed.borrow_mut().push((peer, why)),
                    Event::Ended { peer, how } => ended.borrow_mut().push((peer, how)),
                });
            }
            word()
        })
    }

    /// A whole message straight from the caller's `pieces` (a wire that
    /// [gathers](RmaWire::gathers)): the trailer goes behind them in the
    /// same write, no staging copy.
    pub(super) fn send_gathered(
        &mut self,
        dest: Rank,
        header: FragHeader,
        pieces: &[&[u8]],
    ) -> bool {
        const MAX_PIECES: usize = 14;
        let len = header.len as usize;
        if pieces.len() > MAX_PIECES || len > self.geometry.capacity() {
            return false;
        }
        let Some(k) = self.peer_index(dest) else {
            return false;
        };
        if !self.ensure(k) || self.p(k).gone {
            return false;
        }
        let Some(pos) = self.reserve(k) else {
            return false;
        };
        let credit = self.p_mut(k).rx.piggyback();
        let trailer = self.p_mut(k).tx.trailer(pos, header, credit).to_bytes();
        let mut parts: [&[u8]; MAX_PIECES + 1] = [&[]; MAX_PIECES + 1];
        parts[..pieces.len()].copy_from_slice(pieces);
        parts[pieces.len()] = &trailer;
        let at = self.p(k).remote.ring + self.geometry.write_start(pos, len);
        // Sent or not, the credit is spent: a failed write marks the peer
        // gone and `check_peers` reports it.
        if let Err(why) = self
            .wire
            .write_gather(k, Area::Rings, at, &parts[..=pieces.len()])
        {
            self.fail(k, why);
        }
        true
    }
}
