//! Whether this rank's core is wanted by something else, as the `auto`
//! wait policy asks it (see [`super::wait`]).
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
//! The state is per thread (an endpoint never leaves its thread), so ranks
//! run as threads of one process each keep their own.

#![allow(unsafe_code)] // getrusage

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::os::unix::fs::FileExt as _;
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

thread_local! {
    /// Until when this thread counts as contended.
    static CONTENDED_UNTIL: Cell<Option<Instant>> = const { Cell::new(None) };
    /// Running average (×8) of the idle rounds of waits that ended while
    /// spinning.
    static TYPICAL_X8: Cell<u32> = const { Cell::new(SHORT_MIN * 8) };
    /// This thread's schedstat file, opened on first use (None inside:
    /// unreadable, use the context switches).
    static SCHEDSTAT: RefCell<Option<Option<File>>> = const { RefCell::new(None) };
}

/// What the kernel says about this thread at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Evidence {
    /// Nanoseconds spent runnable, waiting for a CPU.
    RunDelay(u64),
    /// Involuntary context switches.
    Preempted(u64),
}

/// Rounds a wait spins before it asks whether the core is wanted, and
/// while contended before it backs off: twice the usual wait.
#[inline]
pub(crate) fn short_spin() -> u32 {
    let typical = TYPICAL_X8.with(Cell::get) / 8;
    typical.saturating_mul(2).clamp(SHORT_MIN, SHORT_MAX)
}

/// A wait ended after `rounds` idle rounds; `backed_off`: it ended after
/// backing off (its length says nothing about how long spinning takes).
#[inline]
pub(crate) fn waited(rounds: u32, backed_off: bool) {
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
pub(crate) fn contended() -> bool {
    CONTENDED_UNTIL.with(|c| c.get().is_some_and(|u| Instant::now() < u))
}

fn mark_contended(now: Instant) {
    CONTENDED_UNTIL.with(|c| c.set(Some(now + CONTENDED_FOR)));
}

/// The span one wait looks over: when it started looking, and the
/// evidence then.
pub(crate) type Window = Option<(Instant, Evidence)>;

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
pub(crate) fn look(window: &mut Window) -> bool {
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
    let delay = SCHEDSTAT.with(|s| {
        let mut s = s.borrow_mut();
        let f = s.get_or_insert_with(|| File::open("/proc/thread-self/schedstat").ok());
        let f = f.as_ref()?;
        let mut buf = [0u8; 96];
        let n = f.read_at(&mut buf, 0).ok()?;
        parse_run_delay(std::str::from_utf8(&buf[..n]).ok()?)
    });
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
