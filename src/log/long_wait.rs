//! When to say that a wait still waits: [`LongWait`], the one clock behind
//! every "still waiting" warning of the library (`close` naming the ranks
//! it waits for, a network write waiting for its completion, a peer's
//! flush at close) and of the layers above it (a collective waiting for
//! its members).
//!
//! A wait that may last long for good reasons (a peer computing, stopped
//! in a debugger, reaching the call late) is not an error, but silence
//! during it looks like a hang. The clock answers "now" once the wait
//! passes a first delay, then at each doubling of the wait: a wait of an
//! hour logs about nine lines after a 10 s delay, not thousands.

use std::time::{Duration, Instant};

/// The clock of one wait: [`due`](LongWait::due) is `Some` once past the
/// first delay, then once past each doubling of it.
#[derive(Debug, Clone)]
pub struct LongWait {
    since: Instant,
    next: Duration,
}

impl LongWait {
    /// Start the clock now; the first mark is `first` (at least 1 ms).
    #[must_use]
    pub fn new(first: Duration) -> LongWait {
        LongWait {
            since: Instant::now(),
            next: first.max(Duration::from_millis(1)),
        }
    }

    /// How long the wait has lasted: `Some` (and the next mark doubled)
    /// when it has passed the current mark, else `None`.
    pub fn due(&mut self) -> Option<Duration> {
        self.due_after(self.since.elapsed())
    }

    /// [`due`](LongWait::due) for a wait that has lasted `waited`.
    fn due_after(&mut self, waited: Duration) -> Option<Duration> {
        if waited < self.next {
            return None;
        }
        self.next = self.next.saturating_mul(2);
        Some(waited)
    }

    /// How long the wait has lasted.
    #[must_use]
    pub fn waited(&self) -> Duration {
        self.since.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn due_after_the_first_delay_then_at_each_doubling() {
        let mut w = LongWait::new(MS(30));
        assert_eq!(w.due_after(MS(29)), None, "not yet");
        assert_eq!(w.due_after(MS(35)), Some(MS(35)), "past 30 ms");
        assert_eq!(w.due_after(MS(59)), None, "next at 60 ms");
        assert_eq!(w.due_after(MS(61)), Some(MS(61)), "past 60 ms");
        assert_eq!(w.due_after(MS(119)), None, "next at 120 ms");
        assert_eq!(w.due_after(MS(130)), Some(MS(130)), "past 120 ms");
        assert_eq!(w.due_after(MS(239)), None, "next at 240 ms");
    }

    #[test]
    fn the_clock_reads_real_time() {
        let mut w = LongWait::new(Duration::ZERO);
        std::thread::sleep(MS(2));
        assert!(w.due().is_some_and(|t| t >= MS(1)), "past the 1 ms floor");
        assert!(w.waited() >= MS(2));
    }
}
