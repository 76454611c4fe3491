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
//! depends on what shares the core — the rank waited for (a yield hands
//! it the core at once, without the wake-up's system calls) or a CPU-bound
//! process (a yield leaves the core to it for a time slice, while a
//! woken sleeper preempts it) — which the kernel does not tell. So the
//! rank measures: each backed-off wait's length is averaged per way, the
//! faster way is taken, and the other is tried again now and then, rarely
//! enough that trying costs at most about [`EXPLORE_COST`] of the time.
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

/// Share of the time a backed-off rank spends trying the way it judges
/// slower, at most (one try every `1 / EXPLORE_COST × slower / faster`
/// waits).
pub const EXPLORE_COST: f64 = 0.05;

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
    /// The measured ways of backing off.
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

/// The measured lengths of backed-off waits, per [`Way`], and which to
/// take next (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(in crate::endpoint) struct Backoff {
    /// Running averages (ns) of the waits that yielded and that slept;
    /// negative: none measured yet.
    mean_ns: [f64; 2],
    /// Waits measured per way (up to [`Backoff::SETTLED`]).
    seen: [u32; 2],
    /// Waits backed off so far.
    waits: u64,
}

impl Backoff {
    /// Nothing measured.
    pub(in crate::endpoint) const fn new() -> Backoff {
        Backoff {
            mean_ns: [-1.0; 2],
            seen: [0; 2],
            waits: 0,
        }
    }

    /// Waits after which a way's average moves by an eighth of each new
    /// one (before: the plain mean of those measured).
    const SETTLED: u32 = 8;

    /// Consecutive waits a try of the slower way lasts (one wait's length
    /// is too noisy to judge by).
    const TRY: u64 = 4;

    fn index(way: Way) -> usize {
        match way {
            Way::Yield => 0,
            Way::Sleep => 1,
        }
    }

    /// The way the next backed-off wait takes (`can_sleep`: doorbells
    /// are on): each unmeasured way first, then the faster, trying the
    /// slower for [`Self::TRY`] waits every
    /// `TRY × slower / faster / EXPLORE_COST` waits.
    pub(in crate::endpoint) fn choose(&mut self, can_sleep: bool) -> Way {
        if !can_sleep {
            return Way::Yield;
        }
        self.waits += 1;
        let [y, s] = self.mean_ns;
        if y < 0.0 {
            return Way::Yield;
        }
        if s < 0.0 {
            return Way::Sleep;
        }
        let (fast, slow, fast_way, slow_way) = if y <= s {
            (y, s, Way::Yield, Way::Sleep)
        } else {
            (s, y, Way::Sleep, Way::Yield)
        };
        let every =
            (Self::TRY as f64 * slow / fast.max(1.0) / EXPLORE_COST).clamp(64.0, 16384.0) as u64;
        if self.waits % every < Self::TRY {
            slow_way
        } else {
            fast_way
        }
    }

    /// A wait that backed off by `way` lasted `ns` from the back-off on.
    pub(in crate::endpoint) fn record(&mut self, way: Way, ns: f64) {
        let i = Self::index(way);
        self.seen[i] = (self.seen[i] + 1).min(Self::SETTLED);
        let m = &mut self.mean_ns[i];
        *m = if *m < 0.0 {
            ns
        } else {
            *m + (ns - *m) / f64::from(self.seen[i])
        };
    }

    /// The running average of `way`'s waits (None: not measured).
    #[cfg(test)]
    pub(in crate::endpoint) fn mean(&self, way: Way) -> Option<f64> {
        let m = self.mean_ns[Self::index(way)];
        (m >= 0.0).then_some(m)
    }
}

/// The way this thread's next backed-off wait takes.
pub(in crate::endpoint) fn choose_backoff(can_sleep: bool) -> Way {
    BACKOFF.with(|b| {
        let mut v = b.get();
        let w = v.choose(can_sleep);
        b.set(v);
        w
    })
}

/// A backed-off wait of this thread ended, `took` after it backed off.
pub(in crate::endpoint) fn backed_off(way: Way, took: Duration) {
    BACKOFF.with(|b| {
        let mut v = b.get();
        v.record(way, took.as_nanos() as f64);
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
    fn backing_off_takes_the_way_whose_waits_end_sooner() {
        // Without doorbells there is only yielding.
        let mut b = Backoff::new();
        assert_eq!(b.choose(false), Way::Yield);
        // Each way is measured first.
        assert_eq!(b.choose(true), Way::Yield);
        b.record(Way::Yield, 20_000.0);
        assert_eq!(b.choose(true), Way::Sleep);
        b.record(Way::Sleep, 400_000.0);
        // Yielding's waits end 20 times sooner: it is taken, and sleeping
        // tried for 4 waits in 4 × 20 / 0.05 = 1600 (the 1600th to the
        // 1603rd here; the 3rd, the first pick, ends the first try).
        let picks: Vec<Way> = (0..1601).map(|_| b.choose(true)).collect();
        assert_eq!(picks[0], Way::Sleep);
        let slept = picks[1..].iter().filter(|&&w| w == Way::Sleep).count();
        assert_eq!(slept, 4, "{b:?}");
        // The first waits of a way are averaged plainly: one unlucky
        // first measurement does not condemn it.
        let mut c = Backoff::new();
        for ns in [8_000.0, 1_000.0, 1_000.0, 2_000.0] {
            c.record(Way::Sleep, ns);
        }
        assert_eq!(c.mean(Way::Sleep), Some(3_000.0));
        // A CPU-bound process beside the rank: yielding's waits grow to
        // a time slice, and the rank changes to sleeping.
        for _ in 0..32 {
            b.record(Way::Yield, 3_000_000.0);
        }
        assert!(b.mean(Way::Yield).unwrap() > b.mean(Way::Sleep).unwrap());
        let picks: Vec<Way> = (0..64).map(|_| b.choose(true)).collect();
        assert!(picks.iter().filter(|&&w| w == Way::Sleep).count() >= 60);
        // Ways close in cost are both tried often: 4 waits in
        // 4 × 1.1 / 0.05 = 88 (the 1st to 3rd, then the 88th to 91st).
        let mut b = Backoff::new();
        b.record(Way::Yield, 1_000.0);
        b.record(Way::Sleep, 1_100.0);
        let picks: Vec<Way> = (0..175).map(|_| b.choose(true)).collect();
        assert_eq!(picks.iter().filter(|&&w| w == Way::Sleep).count(), 7);
        assert!(picks[87..91].iter().all(|&w| w == Way::Sleep));
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
