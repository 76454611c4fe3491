//! Waiting for progress: the waiter every blocking call runs (spin, spin
//! then yield, spin then sleep), the run-queue evidence the `auto` policy
//! decides by, and when idle hooks run. The policy itself, as resolved at
//! start, is the engine's (`crate::endpoint::engine::wait_policy`).
//!
//! Spinning is right when each rank has a core to itself and wrong when
//! anything else wants the core. [`WaitPolicy::Auto`] (the default)
//! decides from what the kernel reports, not from what it assumes (see
//! [`pressure`]). Every wait first spins about as long as this rank's
//! waits usually last (twice the running average, in rounds); a wait that
//! outlives that looks at whether the core is wanted: the run queue holds
//! more runnable threads than the machine has CPUs, or — over a
//! millisecond or more of the wait's spinning — the rank itself lost more
//! than a fifth of its time waiting for a CPU (the scheduler's run
//! delay). Either marks the rank contended for
//! [`pressure::CONTENDED_FOR`]. A contended wait, and every wait where the
//! host has fewer CPUs than busy ranks, backs off after its short spin in
//! one of two ways: yielding the core each round while this rank's
//! yields come back sooner than a wake-up would, else sleeping on its
//! doorbell at once (the doorbell that both a local sender and the TCP
//! transport's NIC thread ring), measuring a yield again now and then
//! ([`pressure::Backoff`]). A rank nobody
//! competes with spins, as fast as [`WaitPolicy::Spin`]; after a long idle
//! spell it yields, and sleeps after [`AUTO_SLEEP_AFTER`]
//! ([`YIELDING_SLEEP_AFTER`] when it backs off by yielding). Auto keeps
//! doorbells on only where the kernel offers the asymmetric barrier
//! (`membarrier`, see [`crate::wake`]), which makes a ring one load on a
//! quiet machine; elsewhere a contended rank yields instead of sleeping.
//! [`WaitPolicy::Sleep`] sleeps after a short spin whether or not the core
//! is wanted.
//!
//! Promises: once past spinning, every idle round checks what the
//! watchdog found about peers (see [`crate::endpoint::engine::health`]):
//! a failed peer stops the wait with its error — never a hang; and every
//! [`HEALTH_EVERY`] the transports' own checks run. A wait on a live peer
//! that returns no credit — a send's, or any wait with sends parked for
//! it — is not ended, but warned about after `close_warn` and at each
//! doubling ([`stall`]).
//!
//! [`WaitPolicy::Auto`]: crate::WaitPolicy::Auto
//! [`WaitPolicy::Spin`]: crate::WaitPolicy::Spin
//! [`WaitPolicy::Sleep`]: crate::WaitPolicy::Sleep
//! [`AUTO_SLEEP_AFTER`]: crate::endpoint::engine::wait_policy::AUTO_SLEEP_AFTER
//!
//! Its files import only down this table (`scripts/layers.py check`):
//!
//! ```text
//! layers:begin
//! hook pressure stall | running idle hooks; the run-queue evidence;
//!                     | the clock of credit stall warnings
//! layers:end
//! ```

pub(in crate::endpoint) mod hook;
pub(in crate::endpoint) mod pressure;
pub(in crate::endpoint) mod stall;

use self::pressure::Way;
use self::stall::CreditStall;
use crate::endpoint::engine::core::Core;
use crate::endpoint::engine::health::Scope;
use crate::endpoint::engine::wait_policy::WaitConfig;
use crate::error::ExtractError;
use crate::id::Rank;
use std::time::{Duration, Instant};

/// How often an idle waiter runs the transports' checks.
pub const HEALTH_EVERY: Duration = Duration::from_millis(100);

/// Idle rounds a wait for credit (or for parked sends to drain) spins
/// before it yields, when the policy yields at all: the peer has to run to
/// return credit, and on a busy host a sender spinning 65,536 rounds keeps
/// it off the core.
pub const DRAIN_SPIN_ROUNDS: u32 = 1024;

/// Longest single sleep: bounds the cost of a wake-up lost to a dead peer.
pub const SLEEP_TIMEOUT: Duration = Duration::from_millis(10);

/// Idle time after which a contended `auto` rank that backs off by
/// yielding sleeps all the same (doorbells on): long, because a rank that
/// yields where its peers yield too keeps the ring of them fast (a
/// sleeper's TCP sockets go to its NIC thread, and its wake-up is a
/// context switch away), and falling asleep after 2 ms made the ranks of
/// a crowded ring all sleep.
pub const YIELDING_SLEEP_AFTER: Duration = Duration::from_millis(20);

/// Idle rounds between two looks at the scheduler's verdict while an
/// `auto` rank spins (each look is a system call: a read of the thread's
/// schedstat file).
const PRESSURE_EVERY: u32 = 1024;

/// The state of one blocking wait.
#[derive(Debug)]
pub(in crate::endpoint) struct Waiter {
    idle_rounds: u32,
    /// `auto`: this wait backs off (the core is wanted).
    backing_off: bool,
    /// `auto`: rounds this wait spins before it first asks whether the
    /// core is wanted (read from [`pressure`] at its first idle round).
    short: u32,
    /// `auto`: the span of this wait's spinning being judged.
    window: pressure::Window,
    /// `auto`: how this wait backs off.
    way: Option<Way>,

    idle_since: Option<Instant>,
    last_health: Option<Instant>,
    /// Whose failure stops this wait.
    scope: Scope,
    /// Whether idle rounds run the idle hooks: yes when the rank waits for
    /// something to happen (`wait_until`, quiescence, close, start); no
    /// when it waits for the network to drain (credit, the parked-send
    /// bound) — the rank is not idle then, and flushing half-empty
    /// aggregation buffers would spend a frame of credit per few items.
    hooks: bool,
    /// A credit wait ([`Scope::Peer`]): the clock of its warnings.
    credit: Option<CreditStall>,
    /// Any other wait: the clock of the warnings about sends parked for a
    /// destination that gives no credit ([`stall`]).
    parked: Option<CreditStall>,
}

impl Waiter {
    /// A wait that any peer's failure stops.
    pub(in crate::endpoint) fn new() -> Self {
        Waiter {
            idle_rounds: 0,
            backing_off: false,
            short: 0,
            window: None,
            way: None,
            idle_since: None,
            last_health: None,
            scope: Scope::Any,
            hooks: true,
            credit: None,
            parked: None,
        }
    }

    /// A wait for the network to drain (the parked-send bound): any
    /// peer's failure stops it; idle hooks do not run.
    pub(in crate::endpoint) fn draining() -> Self {
        Waiter {
            hooks: false,
            ..Waiter::new()
        }
    }

    /// A wait for `dest` (its credit): only its failure stops it.
    pub(in crate::endpoint) fn for_peer(dest: Rank) -> Self {
        Waiter {
            scope: Scope::Peer(dest),
            hooks: false,
            ..Waiter::new()
        }
    }

    /// A credit wait towards `dest` is about to wait (`has_credit`: the
    /// peer returned some since the last look, which restarts the clock):
    /// how long it has waited without credit, once that passes `warn` and
    /// again past each doubling ([`stall`]).
    pub(in crate::endpoint) fn credit_overdue(
        &mut self,
        dest: Rank,
        has_credit: bool,
        warn: Duration,
    ) -> Option<Duration> {
        let clock = self.credit.get_or_insert_with(|| CreditStall::new(warn));
        if has_credit {
            clock.moved();
            return None;
        }
        clock.stalled(dest, 0)
    }

    /// The periodic look of a wait that is not a credit wait: warn when
    /// sends parked for a destination that gives no credit have made no
    /// progress for `close_warn`, and at each doubling ([`stall`]).
    fn watch_parked(&mut self, core: &std::rc::Rc<Core>) {
        let stall = core.net().borrow().parked_stall();
        let clock = self
            .parked
            .get_or_insert_with(|| CreditStall::new(core.close_warn()));
        let Some(s) = stall else {
            clock.moved();
            return;
        };
        if let Some(waited) = clock.stalled(s.dest, s.progress) {
            tracing::warn!(
                "rank {} has waited {waited:?} for credit towards rank {}, for {} parked message(s) ({} bytes not sent): rank {} has taken none of them for that long (busy without polling, stopped or hung); still waiting",
                core.rank(),
                s.dest,
                s.messages,
                s.bytes,
                s.dest
            );
        }
    }

    /// Something happened: start spinning again.
    #[inline]
    pub(in crate::endpoint) fn busy(&mut self) {
        if self.idle_rounds != 0 {
            pressure::waited(
                self.idle_rounds,
                self.backing_off && self.idle_rounds > self.short,
            );
        }
        self.way = None;
        self.idle_rounds = 0;
        self.idle_since = None;
        self.backing_off = false;
        self.window = None;
    }

    /// Nothing happened in the last round: wait a little, per policy.
    ///
    /// # Errors
    /// A failed peer (in this wait's scope) or an abort.
    /// `ready` re-checks the condition being waited for (besides arrivals
    /// and parked sends that could go) after a sleeper has announced
    /// itself, so no wake-up is lost (the doorbell's Dekker handshake needs
    /// the sleeper to look at everything a waker may have changed).
    pub(in crate::endpoint) fn idle(
        &mut self,
        core: &std::rc::Rc<Core>,
        ready: &mut dyn FnMut() -> bool,
    ) -> Result<(), ExtractError> {
        // Idle: what idle hooks left for this moment (aggregation buffers),
        // unless this wait is for the network to drain.
        // A hook's error is reported by the caller's next `extract` (or
        // by `wait_until` at once), like a handler's.
        if self.hooks {
            if let Err(e) = core.idle_hooks() {
                core.defer(e);
            }
        }
        let mut cfg = core.wait();
        if !self.hooks && cfg.yield_ {
            // Waiting for the network to drain (credit, the parked bound):
            // the peer must run to return credit, so spin only briefly.
            cfg.spin_rounds = cfg.spin_rounds.min(DRAIN_SPIN_ROUNDS);
        }
        self.idle_rounds = self.idle_rounds.saturating_add(1);
        if cfg.adaptive && !self.backing_off {
            self.watch_pressure(&cfg);
        }
        if self.backing_off {
            // The core is wanted: past the short spin, yield each round or
            // sleep at once, whichever this rank measured to be faster.
            let way = *self
                .way
                .get_or_insert_with(|| pressure::choose_backoff(cfg.bells));
            cfg.spin_rounds = self.short;
            cfg.yield_ = true;
            cfg.sleep_after = match way {
                Way::Sleep => Some(Duration::ZERO),
                Way::Yield => cfg.bells.then_some(YIELDING_SLEEP_AFTER),
            };
        }
        if self.idle_rounds < cfg.spin_rounds {
            crate::sync::spin_loop();
            if self.idle_rounds % 4096 != 0 {
                return Ok(());
            }
        }
        core.check_failures(self.scope)?;
        let now = Instant::now();
        let since = *self.idle_since.get_or_insert(now);
        if self.last_health.is_none_or(|t| now - t >= HEALTH_EVERY) {
            if self.last_health.is_some() {
                core.check_transports()?;
                core.check_failures(self.scope)?;
                if self.scope == Scope::Any {
                    self.watch_parked(core);
                }
            }
            self.last_health = Some(now);
        }
        if self.idle_rounds < cfg.spin_rounds {
            return Ok(());
        }
        if let Some(after) = cfg.sleep_after {
            if now - since >= after {
                if let Some(bell) = core.bell() {
                    // The net borrow is dropped before `ready` runs: the
                    // caller's condition may use the endpoint.
                    let has_work = || core.net().borrow().has_work() || ready();
                    if bell.sleep(SLEEP_TIMEOUT, has_work) {
                        // A woken sleeper's wait for a CPU is the wake-up's
                        // cost, not a sign that the core is wanted: judge
                        // from a fresh window.
                        self.window = None;
                        return Ok(());
                    }
                    // Not slept (work came, or the kernel refused the
                    // barrier): go round again, yielding below.
                }
            }
        }
        if cfg.yield_ {
            if cfg.adaptive {
                // What the yield costs decides how backed-off waits wait.
                let start = Instant::now();
                crate::sync::yield_now();
                pressure::yielded(start);
            } else {
                crate::sync::yield_now();
            }
        } else {
            crate::sync::spin_loop();
        }
        Ok(())
    }
}

impl Waiter {
    /// `auto`: decide whether this wait backs off. Costs nothing in the
    /// first rounds (most waits end there on a quiet machine); at the end
    /// of the short spin, one look at the rank's contended flag and at
    /// the run queue (read at most every [`pressure::RUN_QUEUE_EVERY`]);
    /// then a look at the scheduler's evidence every [`PRESSURE_EVERY`]
    /// rounds while it spins, and every round once past its
    /// `spin_rounds`: then it yields each round, and a yield beside a CPU
    /// hog hands the core over for a whole time slice, so 1024 rounds
    /// would be seconds (a look inside a window is a clock read).
    #[inline]
    fn watch_pressure(&mut self, cfg: &WaitConfig) {
        let r = self.idle_rounds;
        if r == 1 {
            self.short = pressure::short_spin().min(cfg.spin_rounds.max(1));
        }
        if r == self.short {
            self.backing_off =
                cfg.always_back_off || pressure::contended() || pressure::run_queue_crowded();
        } else if r > self.short && (r % PRESSURE_EVERY == 0 || r > cfg.spin_rounds) {
            self.backing_off = pressure::look(&mut self.window) || pressure::run_queue_crowded();
        }
    }
}
