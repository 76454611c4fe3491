//! What this rank's waits did, counted while `tracing` enables debug
//! events for this module (`FASTMSG_LOG=warn,fastmsg::endpoint::wait=debug`)
//! and logged once when the process exits: how many waits ended while
//! spinning and how many backed off, which way they backed off, how often
//! and how long the rank yielded and slept, and which witness found the
//! core wanted. Off (the default), a wait pays one thread-local load
//! when it ends.
//!
//! The counts are the thread's that ran the process's first counted wait
//! (a rank's main thread under a launcher); ranks run as threads of one
//! process are not counted apart.

#![allow(unsafe_code)] // atexit

use std::cell::Cell;
use std::time::Duration;

/// What was counted.
#[derive(Clone, Copy, Debug, Default)]
pub(in crate::endpoint) struct Counts {
    /// Waits that ended while spinning.
    pub(in crate::endpoint) spun: u64,
    /// Waits that ended after backing off.
    pub(in crate::endpoint) backed_off: u64,
    /// Backed-off waits that took each way: yield, sleep.
    pub(in crate::endpoint) way_yield: u64,
    /// See `way_yield`.
    pub(in crate::endpoint) way_sleep: u64,
    /// Backed-off waits whose way changed after a yield.
    pub(in crate::endpoint) way_changed: u64,
    /// Idle spells (a wait found nothing, after finding something or at
    /// its start).
    pub(in crate::endpoint) spells: u64,
    /// Yields, and the time they kept the thread off its core (ns).
    pub(in crate::endpoint) yields: u64,
    /// See `yields`.
    pub(in crate::endpoint) yield_ns: u64,
    /// Doorbell sleeps, and their time (ns).
    pub(in crate::endpoint) sleeps: u64,
    /// See `sleeps`.
    pub(in crate::endpoint) sleep_ns: u64,
    /// Verdicts "wanted" by the run queue and by the run delay.
    pub(in crate::endpoint) by_run_queue: u64,
    /// See `by_run_queue`.
    pub(in crate::endpoint) by_run_delay: u64,
}

thread_local! {
    /// Whether this thread counts (None: not asked yet).
    static ON: Cell<Option<bool>> = const { Cell::new(None) };
    static COUNTS: Cell<Counts> = const { Cell::new(Counts {
        spun: 0, backed_off: 0, way_yield: 0, way_sleep: 0, way_changed: 0,
        spells: 0, yields: 0,
        yield_ns: 0, sleeps: 0, sleep_ns: 0, by_run_queue: 0,
        by_run_delay: 0,
    }) };
}

/// Whether this thread counts: asked of `tracing` once per thread; the
/// first thread that counts has its counts logged at exit.
#[inline]
pub(in crate::endpoint) fn on() -> bool {
    ON.with(|c| match c.get() {
        Some(v) => v,
        None => {
            let v = tracing::enabled!(tracing::Level::DEBUG);
            if v {
                register_at_exit();
            }
            c.set(Some(v));
            v
        }
    })
}

/// Count something (when counting is on).
#[inline]
pub(in crate::endpoint) fn count(f: impl FnOnce(&mut Counts)) {
    if on() {
        COUNTS.with(|c| {
            let mut v = c.get();
            f(&mut v);
            c.set(v);
        });
    }
}

/// Nanoseconds of `d`, saturated.
pub(in crate::endpoint) fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn register_at_exit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        extern "C" fn log_counts() {
            // The thread that exits is the one whose counts are read; a
            // thread-local without destructor is still there at exit.
            let c = COUNTS.try_with(Cell::get).unwrap_or_default();
            tracing::debug!(
                "waits: {} idle spells, {} ended spinning, {} backed off ({} yielding, \
                 {} sleeping, {} changed way); \
                 {} yields ({} ns mean), {} sleeps ({} ns mean); core found wanted by \
                 the run queue {} and the run delay {}",
                c.spells,
                c.spun,
                c.backed_off,
                c.way_yield,
                c.way_sleep,
                c.way_changed,
                c.yields,
                c.yield_ns.checked_div(c.yields).unwrap_or(0),
                c.sleeps,
                c.sleep_ns.checked_div(c.sleeps).unwrap_or(0),
                c.by_run_queue,
                c.by_run_delay,
            );
        }
        // SAFETY: `log_counts` is a plain `extern "C" fn()` that does not
        // unwind (tracing's macros do not panic on a working subscriber).
        if unsafe { libc::atexit(log_counts) } != 0 {
            tracing::debug!("could not register the wait counts' log at exit");
        }
    });
}
