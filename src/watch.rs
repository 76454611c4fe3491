//! The watchdog: one thread per endpoint that asks, every
//! [`WATCH_EVERY`], whether any peer has failed, and raises the endpoint's
//! alarm word when the answer changed.
//!
//! Progress stays where it was — inside calls into the library, with no
//! hidden progress thread: the watchdog only *looks* (lifelines in the
//! shared segment, network links' states, the supervisor's abort flag) and
//! never touches queues, streams or handlers. What it raises is one word
//! that the empty `extract` reads beside the receive queues' stamps, so a
//! program that only polls learns of a peer's death within
//! `WATCH_EVERY` plus its next call — at the price of one cached load per
//! poll (measured in the endpoint's module docs) instead of a liveness
//! system call now and then on the fast path.
//!
//! The engine clears the alarm *before* it reads what the probes found, so
//! a failure found meanwhile raises it again and is never lost.

use crate::sync::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the watchdog looks.
pub const WATCH_EVERY: Duration = Duration::from_millis(100);

/// Something the watchdog asks from its own thread.
pub(crate) trait Probe: Send {
    /// Look once; true if something new happened that the engine must
    /// read (a peer failed or left, the job was aborted).
    fn look(&mut self) -> bool;
}

/// The alarm word: raised by the watchdog, cleared by the engine.
#[derive(Debug, Default)]
pub(crate) struct Alarm(AtomicU32);

impl Alarm {
    /// Whether the alarm is raised (a hint for the poll: Relaxed; the
    /// engine then reads what the probes recorded with Acquire).
    #[inline(always)]
    pub(crate) fn raised(&self) -> bool {
        self.0.load(Ordering::Relaxed) != 0
    }

    /// Raise it.
    pub(crate) fn raise(&self) {
        // SYNC POINT alarm (release side): what the probe recorded before
        // is visible to the engine that sees the alarm (it clears, then
        // reads the records with their own Acquire loads).
        self.0.store(1, Ordering::Release);
    }

    /// Clear it before reading what the probes recorded.
    pub(crate) fn clear(&self) {
        // SYNC POINT alarm (acquire side).
        self.0.swap(0, Ordering::AcqRel);
    }
}

/// The stop signal of the thread.
type Stop = (Mutex<bool>, Condvar);

/// A running watchdog. Dropping it stops and joins the thread.
#[derive(Debug)]
pub(crate) struct Watchdog {
    alarm: Arc<Alarm>,
    stop: Arc<Stop>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Start a watchdog over `probes` (none: no thread at all).
    ///
    /// # Errors
    /// The OS error of creating the thread.
    pub(crate) fn start(name: String, probes: Vec<Box<dyn Probe>>) -> std::io::Result<Watchdog> {
        let alarm = Arc::new(Alarm::default());
        let stop: Arc<Stop> = Arc::new((Mutex::new(false), Condvar::new()));
        let thread = if probes.is_empty() {
            None
        } else {
            let (a, s) = (Arc::clone(&alarm), Arc::clone(&stop));
            Some(
                std::thread::Builder::new()
                    .name(name)
                    .spawn(move || run(probes, &a, &s))?,
            )
        };
        Ok(Watchdog {
            alarm,
            stop,
            thread,
        })
    }

    /// The alarm word.
    #[inline(always)]
    pub(crate) fn alarm(&self) -> &Alarm {
        &self.alarm
    }

    /// A shared handle on the alarm word, for a transport that finds a
    /// failure itself (on its own send path) and raises the alarm so that
    /// the engine reads it as it reads the probes' findings.
    pub(crate) fn alarm_handle(&self) -> Arc<Alarm> {
        Arc::clone(&self.alarm)
    }
}

fn run(mut probes: Vec<Box<dyn Probe>>, alarm: &Alarm, stop: &Stop) {
    let (lock, cv) = stop;
    let mut stopped = lock.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        if *stopped {
            return;
        }
        let (guard, _) = cv
            .wait_timeout(stopped, WATCH_EVERY)
            .unwrap_or_else(|p| p.into_inner());
        stopped = guard;
        if *stopped {
            return;
        }
        let mut news = false;
        for p in &mut probes {
            news |= p.look();
        }
        if news {
            alarm.raise();
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let (lock, cv) = &*self.stop;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Raises the alarm every [`TICK_EVERY`]: the engine then makes the
/// transports' own checks (a corrupt receive queue, a silent peer), so a
/// program that only polls with `extract`, or waits in short slices,
/// learns of them as soon as a blocking wait would.
#[derive(Debug)]
pub(crate) struct Tick {
    next: std::time::Instant,
}

/// How often [`Tick`] raises the alarm.
pub(crate) const TICK_EVERY: Duration = Duration::from_millis(500);

impl Tick {
    pub(crate) fn new() -> Tick {
        Tick {
            next: std::time::Instant::now() + TICK_EVERY,
        }
    }
}

impl Probe for Tick {
    fn look(&mut self) -> bool {
        let now = std::time::Instant::now();
        if now < self.next {
            return false;
        }
        self.next = now + TICK_EVERY;
        true
    }
}

/// Watches the supervisor's abort flag (threads launched by
/// [`crate::threads`]).
#[derive(Debug)]
pub(crate) struct AbortProbe {
    pub(crate) flag: Arc<crate::sync::AtomicBool>,
    pub(crate) seen: bool,
}

impl Probe for AbortProbe {
    fn look(&mut self) -> bool {
        // Relaxed: a flag with nothing published behind it.
        if !self.seen && self.flag.load(crate::sync::Ordering::Relaxed) {
            self.seen = true;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::AtomicBool;

    struct After(u32);
    impl Probe for After {
        fn look(&mut self) -> bool {
            self.0 = self.0.saturating_sub(1);
            self.0 == 1
        }
    }

    #[test]
    fn raises_once_a_probe_reports_and_stops_promptly() {
        let w = Watchdog::start("t".into(), vec![Box::new(After(3))]).unwrap();
        assert!(!w.alarm().raised());
        let t = std::time::Instant::now();
        while !w.alarm().raised() {
            assert!(t.elapsed() < Duration::from_secs(5), "never raised");
            std::thread::sleep(Duration::from_millis(5));
        }
        w.alarm().clear();
        assert!(!w.alarm().raised());
        let t = std::time::Instant::now();
        drop(w);
        assert!(t.elapsed() < WATCH_EVERY * 5, "stop waited a full period");
    }

    #[test]
    fn the_abort_flag_is_reported_once() {
        let flag = Arc::new(AtomicBool::new(false));
        let mut p = AbortProbe {
            flag: Arc::clone(&flag),
            seen: false,
        };
        assert!(!p.look());
        flag.store(true, crate::sync::Ordering::Relaxed);
        assert!(p.look());
        assert!(!p.look());
    }
}
