//! Saying what a collective waits for when it waits long: a member that
//! never calls the collective, calls another one first, or names another
//! root (where that leaves no member sending: `crate` docs, "Members that
//! call with different arguments") keeps the others waiting, and without a
//! word that looks like a hang.
//!
//! Each blocking wait keeps a [`StallWatch`]. After the endpoint's
//! `close_warn` (`FASTMSG_CLOSE_WARN`, 10 s by default; the same setting
//! `close` uses to name the ranks it waits for) and again at each
//! doubling of the wait, it logs one warning naming the collective, its
//! instance, its group and root, and what each member must do alike. A
//! diagnostic, not an error: a member may reach the call much later for
//! good reasons (a long computation), and a *failed* member is an error at
//! once anyway.

use fastmsg::log::LongWait;
use std::time::Duration;

/// The clock of one blocking wait.
#[derive(Debug)]
pub(crate) struct StallWatch {
    clock: LongWait,
}

impl StallWatch {
    /// Start the clock: the first warning after `warn`.
    pub(crate) fn new(warn: Duration) -> StallWatch {
        StallWatch {
            clock: LongWait::new(warn),
        }
    }

    /// Called each time the wait looks at its condition: once the wait
    /// passed the next mark, log `what` (how long it has waited is added).
    /// Returns whether it logged.
    pub(crate) fn tick(&mut self, what: impl FnOnce() -> String) -> bool {
        let Some(waited) = self.clock.due() else {
            return false;
        };
        tracing::warn!(
            "{} for {:.0} s: every member must call the same collectives in the same order, with the same root; a member that has not called it yet, or called another first, keeps it waiting",
            what(),
            waited.as_secs_f64()
        );
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_after_the_delay_then_at_each_doubling() {
        let mut w = StallWatch::new(Duration::from_millis(30));
        assert!(!w.tick(|| "waiting".into()), "not yet");
        std::thread::sleep(Duration::from_millis(35));
        assert!(w.tick(|| "waiting".into()), "past 30 ms");
        assert!(!w.tick(|| "waiting".into()), "next at 60 ms");
        std::thread::sleep(Duration::from_millis(30));
        assert!(w.tick(|| "waiting".into()), "past 60 ms");
    }
}
