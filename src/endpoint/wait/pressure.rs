//! Whether this rank's core is wanted by something else, as the `auto`
//! wait policy asks it (see [`crate::endpoint::wait`]).
//!
//! The evidence is the scheduler's own: the time this thread spent
//! runnable but waiting for a CPU (the second field of
//! `/proc/thread-self/schedstat`, `run_delay`). A spinning rank that
//! shares its core with another runnable thread loses about half its time
//! that way; on a quiet machine it loses next to nothing (a kernel thread
//! now and then). A wait that has spun a while looks ([`look`]): if, over
//! [`WINDOW`] or more of its own spinning, the thread lost more than a
//! fifth of the time to the run queue, the rank counts as contended for
//! [`CONTENDED_FOR`]; waits in that time spin only about as long as this
//! rank's waits usually last ([`short_spin`], twice the running average
//! of the waits that ended while spinning, within
//! [`SHORT_MIN`]..=[`SHORT_MAX`] rounds) and then back off. Nothing here is
//! consulted before a wait has spun [`short_spin`] rounds, so short waits
//! on a quiet machine cost nothing. Where the kernel keeps no schedstat
//! the evidence is `getrusage(RUSAGE_THREAD).ru_nivcsw`: the thread was
//! preempted in the window.
//!
//! The run queue is the other witness: `/proc/loadavg`'s count of
//! runnable threads, machine-wide, at the moment of the look
//! ([`crowded`]). More runnable threads than CPUs online means some thread
//! waits for a core — perhaps the very rank this one waits for — so the
//! rank counts as contended as above. It costs one read, made at most
//! every [`RUN_QUEUE_EVERY`] per thread, and only by a wait that outlived
//! its short spin.
//!
//! A contended wait backs off in one of two ways ([`Backoff`]): yield the
//! core each round, or sleep on the doorbell at once. Which is faster
//! depends on what shares the core — other ranks and NIC threads (a yield
//! hands them the core and comes back within microseconds, without a
//! wake-up's system calls and context switches on the message's path) or
//! a CPU-bound process (a yield leaves the core to it until the scheduler
//! takes it back, while a woken sleeper preempts it). So the rank
//! measures what it controls: how long its own yields keep it off the
//! core. While a yield costs less than a wake-up ([`WAKE_COST`]) it
//! yields; otherwise it sleeps, and yields through one wait every
//! [`RESAMPLE_EVERY`] to measure again. (The length of the waits
//! themselves is no guide: it is mostly the peers' doing — a rank whose
//! peers sleep finds every way slow.)
//!
//! The state is per thread (an endpoint never leaves its thread), so ranks
//! run as threads of one process each keep their own.

#![allow(unsafe_code)] // getrusage

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::thread::LocalKey;
use std::time::{Duration, Instant};

/// How long a rank counts as contended after a look found its core
/// wanted: after that, the next long wait looks afresh (and the time lost
/// meanwhile — a woken sleeper waiting for a CPU counts too — decides).
pub const CONTENDED_FOR: Duration = Duration::from_millis(100);

/// Shortest span a verdict is drawn over.
pub const WINDOW: Duration = Duration::from_millis(1);

/// Fewest rounds a wait spins before backing off.
pub const SHORT_MIN: u32 = 64;

/// Most rounds a wait spins before backing off.
pub const SHORT_MAX: u32 = 4096;

/// Least time between two reads of the run queue by one thread.
pub const RUN_QUEUE_EVERY: Duration = Duration::from_micros(200);

thread_local! {
    /// Until when this thread counts as contended.
    static CONTENDED_UNTIL: Cell<Option<Instant>> = const { Cell::new(None) };
    /// Running average (×8) of the idle rounds of waits that ended while
    /// spinning.
    static TYPICAL_X8: Cell<u32> = const { Cell::new(SHORT_MIN * 8) };
    /// This thread's schedstat file, opened on first use (None inside:
    /// unreadable, use the context switches).
    static SCHEDSTAT: RefCell<Option<Option<File>>> = const { RefCell::new(None) };
    /// `/proc/loadavg`, opened on first use (None inside: unreadable).
    static LOADAVG: RefCell<Option<Option<File>>> = const { RefCell::new(None) };
    /// When the run queue was last read, and what it said.
    static RUN_QUEUE_SEEN: Cell<Option<(Instant, bool)>> = const { Cell::new(None) };
    /// What this thread's yields cost.
    static BACKOFF: Cell<Backoff> = const { Cell::new(Backoff::new()) };
}

/// CPUs online, read once.
fn online_cpus() -> u32 {
    static ONLINE: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *ONLINE.get_or_init(|| crate::topology::Cpus::probe().online)
}

/// Whether `running` runnable threads (the run queue's length, this
/// thread included) crowd `cpus` CPUs: some thread waits for a core.
pub(in crate::endpoint) fn crowded(running: u32, cpus: u32) -> bool {
    running > cpus
}

/// The fourth field of `/proc/loadavg` (`runnable/threads`): the
/// runnable count.
fn parse_running(s: &str) -> Option<u32> {
    s.split_whitespace().nth(3)?.split_once('/')?.0.parse().ok()
}

fn running_now() -> Option<u32> {
    read_kept(&LOADAVG, "/proc/loadavg", parse_running)
}

/// Parse the start of the small kernel file `path`, kept open in this
/// thread's `cell` after the first call (one `pread` a call); `None`
/// where it cannot be opened, read or parsed.
fn read_kept<T>(
    cell: &'static LocalKey<RefCell<Option<Option<File>>>>,
    path: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Option<T> {
    cell.with(|s| {
        let mut s = s.borrow_mut();
        let f = s.get_or_insert_with(|| File::open(path).ok());
        let f = f.as_ref()?;
        let mut buf = [0u8; 128];
        let n = f.read_at(&mut buf, 0).ok()?;
        parse(std::str::from_utf8(&buf[..n]).ok()?)
    })
}

/// Whether the run queue holds more runnable threads than there are
/// CPUs; when it does, the rank is marked contended. Reads the kernel's
/// count at most every [`RUN_QUEUE_EVERY`] (the last answer in between).
pub(in crate::endpoint) fn run_queue_crowded() -> bool {
    let now = Instant::now();
    if let Some((t, v)) = RUN_QUEUE_SEEN.with(Cell::get) {
        if now.saturating_duration_since(t) < RUN_QUEUE_EVERY {
            return v;
        }
    }
    let v = running_now().is_some_and(|r| crowded(r, online_cpus()));
    RUN_QUEUE_SEEN.with(|c| c.set(Some((now, v))));
    if v {
        mark_contended(now);
    }
    v
}

/// A way of backing off, once a contended wait has spun its short spin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::endpoint) enum Way {
    /// Yield the core each round (sleep only after a long idle spell).
    Yield,
    /// Sleep on the doorbell at once.
    Sleep,
}

/// What a yield costs this rank, measured, and so which way a backed-off
/// wait takes (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(in crate::endpoint) struct Backoff {
    /// Running average (ns) of the time a yield kept this thread off its
    /// core (from the call to the return); negative: none measured.
    yield_ns: f64,
    /// Yields measured (up to [`Backoff::SETTLED`]).
    seen: u32,
    /// When a yield was last measured.
    sampled: Option<Instant>,
}

impl Backoff {
    /// Nothing measured.
    pub(in crate::endpoint) const fn new() -> Backoff {
        Backoff {
            yield_ns: -1.0,
            seen: 0,
            sampled: None,
        }
    }

    /// Yields after which the average moves by an eighth of each new one
    /// (before: the plain mean of those measured).
    const SETTLED: u32 = 8;

    /// The way the next backed-off wait takes (`can_sleep`: doorbells
    /// are on) at `now`: yielding while a yield costs less than a
    /// wake-up ([`WAKE_COST`]) or has not been measured, or was last
    /// measured [`RESAMPLE_EVERY`] ago or more (then this wait measures
    /// it again); sleeping otherwise.
    pub(in crate::endpoint) fn choose(&self, can_sleep: bool, now: Instant) -> Way {
        if !can_sleep || self.yield_ns < 0.0 {
            return Way::Yield;
        }
        let cheap = self.yield_ns <= WAKE_COST.as_nanos() as f64;
        let stale = self
            .sampled
            .is_none_or(|t| now.saturating_duration_since(t) >= RESAMPLE_EVERY);
        if cheap || stale {
            Way::Yield
        } else {
            Way::Sleep
        }
    }

    /// A yield at `now` kept the thread off its core for `ns`.
    pub(in crate::endpoint) fn record_yield(&mut self, ns: f64, now: Instant) {
        self.seen = (self.seen + 1).min(Self::SETTLED);
        self.yield_ns = if self.yield_ns < 0.0 {
            ns
        } else {
            self.yield_ns + (ns - self.yield_ns) / f64::from(self.seen)
        };
        self.sampled = Some(now);
    }

    /// The running average of a yield's cost (None: not measured).
    #[cfg(test)]
    pub(in crate::endpoint) fn yield_cost(&self) -> Option<f64> {
        (self.yield_ns >= 0.0).then_some(self.yield_ns)
    }
}

/// What a sleeper's wake-up costs, taken as the price a yield is weighed
/// against: the waker's futex call, the wakee's context switch and, for
/// a wait on another host, the NIC thread's wake-up before it. A yield
/// that comes back sooner than this (the core's other claimants are
/// other ranks and NIC threads, which run briefly and yield or sleep in
/// turn) is the cheaper way to wait; one that comes back later (a
/// CPU-bound process kept the core until the scheduler took it back) is
/// dearer than being woken, which the scheduler favours. Measured on 2
/// vCPUs: a yield among the ranks of a 4-rank ring costs 2–8 µs; one
/// beside a CPU-bound process 15 µs to milliseconds.
pub const WAKE_COST: Duration = Duration::from_micros(10);

/// Longest a rank that sleeps goes without measuring a yield again (one
/// backed-off wait then yields): what shares the core changes.
pub const RESAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The way this thread's next backed-off wait takes.
pub(in crate::endpoint) fn choose_backoff(can_sleep: bool) -> Way {
    BACKOFF.with(|b| b.get().choose(can_sleep, Instant::now()))
}

/// A yield of this thread started at `start` has returned.
pub(in crate::endpoint) fn yielded(start: Instant) {
    let now = Instant::now();
    BACKOFF.with(|b| {
        let mut v = b.get();
        v.record_yield(now.saturating_duration_since(start).as_nanos() as f64, now);
        b.set(v);
    });
}

/// What the kernel says about this thread at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::endpoint) enum Evidence {
    /// Nanoseconds spent runnable, waiting for a CPU.
    RunDelay(u64),
    /// Involuntary context switches.
    Preempted(u64),
}

/// Most rounds a wait spins before backing off while the rank counts as
/// contended: spinning then takes time from whoever wants the core.
pub const CONTENDED_SHORT_MAX: u32 = 256;

/// Rounds a wait spins before it asks whether the core is wanted, and
/// while contended before it backs off: twice the usual wait (at most
/// [`CONTENDED_SHORT_MAX`] while contended).
#[inline]
pub(in crate::endpoint) fn short_spin() -> u32 {
    let typical = TYPICAL_X8.with(Cell::get) / 8;
    let max = if contended() {
        CONTENDED_SHORT_MAX
    } else {
        SHORT_MAX
    };
    typical.saturating_mul(2).clamp(SHORT_MIN, max)
}

/// A wait ended after `rounds` idle rounds; `backed_off`: it ended after
/// backing off (its length says nothing about how long spinning takes).
#[inline]
pub(in crate::endpoint) fn waited(rounds: u32, backed_off: bool) {
    if backed_off {
        return;
    }
    let r = rounds.min(SHORT_MAX * 4);
    TYPICAL_X8.with(|t| {
        let v = t.get();
        // avg += (r - avg) / 8, in eighths.
        t.set(v - v / 8 + r);
    });
}

/// Whether a look found the core wanted less than [`CONTENDED_FOR`] ago.
pub(in crate::endpoint) fn contended() -> bool {
    CONTENDED_UNTIL.with(|c| c.get().is_some_and(|u| Instant::now() < u))
}

fn mark_contended(now: Instant) {
    CONTENDED_UNTIL.with(|c| c.set(Some(now + CONTENDED_FOR)));
}

/// The span one wait looks over: when it started looking, and the
/// evidence then.
pub(in crate::endpoint) type Window = Option<(Instant, Evidence)>;

/// Look at the evidence within one wait that keeps spinning: the first
/// look opens `window`; a later one, at least [`WINDOW`] after it, returns
/// true (and marks the rank contended) if the thread lost more than a
/// fifth of that span waiting for a CPU, and opens the next window. Only
/// a wait's spinning and yielding is judged (the waiter drops its window
/// when it has slept): the delay a sleeper meets when woken is the
/// wake-up's cost, not a sign that its core is wanted (counting it, a rank
/// that once slept would find itself contended for ever), whereas a yield
/// that waits a time slice for the process beside it is exactly that
/// sign.
pub(in crate::endpoint) fn look(window: &mut Window) -> bool {
    let now = Instant::now();
    if window.is_some_and(|(t0, _)| now.saturating_duration_since(t0) < WINDOW) {
        // Too soon for a verdict: no system call.
        return false;
    }
    let Some(ev) = evidence() else {
        return false;
    };
    let Some((t0, ev0)) = *window else {
        *window = Some((now, ev));
        return false;
    };
    let span = now.saturating_duration_since(t0);
    *window = Some((now, ev));
    let wanted = verdict(ev0, ev, span);
    if wanted {
        mark_contended(now);
    }
    wanted
}

/// Whether the evidence at the start and end of a window `span` long
/// shows the core wanted.
fn verdict(start: Evidence, end: Evidence, span: Duration) -> bool {
    match (start, end) {
        (Evidence::RunDelay(a), Evidence::RunDelay(b)) => {
            // More than a fifth of the window lost to the run queue.
            u128::from(b.saturating_sub(a)) * 5 > span.as_nanos()
        }
        (Evidence::Preempted(a), Evidence::Preempted(b)) => b > a,
        _ => false,
    }
}

fn evidence() -> Option<Evidence> {
    let delay = read_kept(&SCHEDSTAT, "/proc/thread-self/schedstat", parse_run_delay);
    match delay {
        Some(d) => Some(Evidence::RunDelay(d)),
        None => switches().map(Evidence::Preempted),
    }
}

/// The second field of a schedstat line (`on-cpu-ns run-delay-ns slices`).
fn parse_run_delay(s: &str) -> Option<u64> {
    s.split_whitespace().nth(1)?.parse().ok()
}

/// This thread's involuntary context switches so far (None if the kernel
/// does not say).
fn switches() -> Option<u64> {
    // SAFETY: a zeroed rusage is a valid value for getrusage to fill in.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable rusage for the duration of the call.
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    (r == 0).then(|| u64::try_from(u.ru_nivcsw).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_short_spin_follows_how_long_waits_last() {
        std::thread::spawn(|| {
            assert_eq!(short_spin(), SHORT_MIN * 2);
            for _ in 0..64 {
                waited(1000, false);
            }
            // Converged to about 1000: spins twice that.
            assert!((1900..=2000).contains(&short_spin()), "{}", short_spin());
            // Waits that backed off do not count.
            for _ in 0..64 {
                waited(1, true);
            }
            assert!((1900..=2000).contains(&short_spin()));
            for _ in 0..64 {
                waited(1 << 30, false);
            }
            assert_eq!(short_spin(), SHORT_MAX);
            for _ in 0..64 {
                waited(0, false);
            }
            assert_eq!(short_spin(), SHORT_MIN);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn contention_is_marked_and_expires_per_thread() {
        std::thread::spawn(|| {
            assert!(!contended());
            mark_contended(Instant::now());
            assert!(contended());
            // Another thread (another rank) is not contended.
            assert!(!std::thread::spawn(contended).join().unwrap());
            CONTENDED_UNTIL.with(|c| c.set(Some(Instant::now())));
            assert!(!contended());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_run_queue_longer_than_the_cpus_is_crowded() {
        assert_eq!(parse_running("0.50 0.40 0.30 3/345 12345\n"), Some(3));
        assert_eq!(parse_running("0.50 0.40 0.30 x/345 1"), None);
        assert_eq!(parse_running("0.50 0.40"), None);
        // Two spinning ranks on two CPUs: not crowded; a CPU-bound
        // process beside them: crowded.
        assert!(!crowded(2, 2));
        assert!(crowded(3, 2));
        assert!(!crowded(1, 64));
        std::thread::spawn(|| {
            // The kernel answers here, and a crowded answer marks the
            // thread contended.
            assert!(running_now().is_some_and(|r| r >= 1));
            let v = run_queue_crowded();
            assert_eq!(contended(), v);
            // Within RUN_QUEUE_EVERY the answer is the one read.
            assert_eq!(run_queue_crowded(), v);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn backing_off_yields_while_a_yield_costs_less_than_a_wake_up() {
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        // Without doorbells there is only yielding.
        let mut b = Backoff::new();
        assert_eq!(b.choose(false, t0), Way::Yield);
        // Unmeasured: yield (the yield measures itself).
        assert_eq!(b.choose(true, t0), Way::Yield);
        // Yields that come back in a few µs (other ranks): keep yielding.
        for _ in 0..16 {
            b.record_yield(3_000.0, t0);
        }
        assert_eq!(b.choose(true, t0), Way::Yield);
        // A CPU-bound process beside the rank: yields cost milliseconds,
        // and the rank sleeps...
        for _ in 0..4 {
            b.record_yield(3_000_000.0, t0);
        }
        assert!(b.yield_cost().unwrap() > WAKE_COST.as_nanos() as f64);
        assert_eq!(b.choose(true, t0 + ms), Way::Sleep);
        assert_eq!(b.choose(false, t0 + ms), Way::Yield);
        // ...measuring a yield again once the last one is stale.
        assert_eq!(b.choose(true, t0 + RESAMPLE_EVERY), Way::Yield);
        // The first yields are averaged plainly: one unlucky first
        // measurement does not condemn yielding.
        let mut c = Backoff::new();
        for ns in [40_000.0, 1_000.0, 1_000.0, 2_000.0] {
            c.record_yield(ns, t0);
        }
        assert_eq!(c.yield_cost(), Some(11_000.0));
        c.record_yield(1_000.0, t0);
        assert_eq!(c.choose(true, t0), Way::Yield);
    }

    #[test]
    fn schedstat_lines_parse() {
        assert_eq!(parse_run_delay("1234 5678 9\n"), Some(5678));
        assert_eq!(parse_run_delay("1234"), None);
        assert_eq!(parse_run_delay("a b c"), None);
    }

    #[test]
    fn a_window_where_the_thread_waited_for_a_cpu_is_contended() {
        let ms = Duration::from_millis(1);
        let d = Evidence::RunDelay;
        // Half of 2 ms lost: wanted. A tenth: not.
        assert!(verdict(d(5_000_000), d(6_000_000), 2 * ms));
        assert!(!verdict(d(5_000_000), d(5_200_000), 2 * ms));
        // A counter that went back (a new thread) says nothing.
        assert!(!verdict(d(6_000_000), d(5_000_000), 2 * ms));
        let p = Evidence::Preempted;
        assert!(verdict(p(3), p(4), ms));
        assert!(!verdict(p(3), p(3), ms));
        assert!(!verdict(p(3), d(3), ms));
    }

    #[test]
    fn the_kernel_answers_and_short_windows_wait() {
        std::thread::spawn(|| {
            // Read twice: the file is read again from its start.
            let a = evidence().expect("schedstat or getrusage");
            let b = evidence().unwrap();
            match (a, b) {
                (Evidence::RunDelay(x), Evidence::RunDelay(y)) => assert!(y >= x),
                (Evidence::Preempted(x), Evidence::Preempted(y)) => assert!(y >= x),
                _ => panic!("{a:?} then {b:?}"),
            }
            // The first look opens a window; one at once draws no verdict.
            let mut w = None;
            assert!(!look(&mut w));
            assert!(w.is_some());
            assert!(!look(&mut w));
            assert!(!contended());
            // A window long past whose start shows no lost time: not
            // contended, and the next window opens.
            let Some((_, ev)) = w else { unreachable!() };
            let old = std::time::Instant::now() - WINDOW * 1000;
            w = Some((old, ev));
            let wanted = look(&mut w);
            assert!(w.is_some_and(|(t, _)| t > old));
            assert_eq!(contended(), wanted);
        })
        .join()
        .unwrap();
    }
}
