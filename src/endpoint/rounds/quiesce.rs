//! [`Endpoint::quiesce`]: a reusable termination round (see
//! [`crate::endpoint::engine::termination`] for the protocol), and the loop that `close`
//! shares with it.

use crate::endpoint::engine::core::Core;
use crate::endpoint::engine::health::Scope;
use crate::endpoint::engine::termination::RoundKind;
use crate::endpoint::wait::Waiter;
use crate::endpoint::Endpoint;
use crate::error::ExtractError;
use crate::id::Rank;
use std::rc::Rc;

impl Endpoint {
    /// Wait until every message sent anywhere before every rank called
    /// `quiesce` — and every message that handlers sent in response,
    /// transitively, and every item idle hooks still held (aggregation
    /// buffers) — has been handled everywhere. A collective: every rank
    /// calls it; it returns on each once the job is quiet. Reusable any
    /// number of times (a BFS calls it once per level), mixed in any order
    /// with direct messages and collectives; costs at least one round to
    /// rank 0 and back (two when messages were sent since the last round).
    ///
    /// Every rank must make the same sequence of `quiesce` and
    /// [`close`](Self::close) calls: the n-th on one rank is matched with
    /// the n-th on every other.
    ///
    /// ```no_run
    /// # fn f(mut ep: fastmsg::Endpoint, h: fastmsg::HandlerId) -> Result<(), fastmsg::Error> {
    /// let me = ep.rank().0;
    /// ep.send(fastmsg::Rank((me + 1) % ep.size()), h, &[b"work"])?;
    /// ep.quiesce()?; // that message, and whatever its handler sent, are handled
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`wait_until`](Self::wait_until) (errors deferred earlier, a
    /// failed peer: never a hang); [`ExtractError::CloseQuiesceMismatch`]
    /// if another rank called `close` for this round.
    pub fn quiesce(&mut self) -> Result<(), ExtractError> {
        if let Some(e) = self.core.take_deferred() {
            return Err(e);
        }
        self.core
            .termination_round(RoundKind::Quiesce, &mut |_: &Core| {})?;
        // A handler's error while the round ran (the round itself went on
        // to its end, so every rank stays in step).
        match self.core.take_deferred() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Core {
    /// Enter this rank's next termination round of `kind` and make
    /// progress until rank 0 releases it. `tick` runs after each round
    /// of progress (close's straggler watch).
    pub(in crate::endpoint) fn termination_round(
        self: &Rc<Self>,
        kind: RoundKind,
        tick: &mut dyn FnMut(&Core),
    ) -> Result<(), ExtractError> {
        self.check_failures(Scope::Any)?;
        if let Some(e) = self.control().borrow().mismatch() {
            return Err(e);
        }
        // What hooks hold leaves now (it may still be parked: that counts
        // as sent). An error is reported once the round is over.
        if let Err(e) = self.idle_hooks() {
            self.defer(e);
        }
        let round = self.counting().next_round();
        let busy = self.hooks().has_work();
        let report =
            self.control()
                .borrow_mut()
                .enter_round(round, kind, self.close_counts(), busy);
        self.send_control(
            Rank(0),
            crate::endpoint::engine::control::OP_REPORT,
            &report.encode(),
        );
        let mut waiter = Waiter::new();
        let over = |c: &Core| {
            let ctl = c.control().borrow();
            ctl.released(round) || ctl.mismatch().is_some()
        };
        while !over(self) {
            // Hooks with work run every round, not only when idle: the
            // round's own control traffic can keep this rank busy (alone
            // in a job, rank 0 probes itself back to back), and a rank
            // whose hooks have work reports busy, so waiting for an idle
            // moment could go on for ever.
            if self.hooks().has_work() {
                if let Err(e) = self.idle_hooks() {
                    self.defer(e);
                }
            }
            self.progress_round(&mut waiter, &mut || over(self))?;
            tick(self);
        }
        match self.control().borrow().mismatch() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
