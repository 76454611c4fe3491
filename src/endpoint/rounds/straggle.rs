//! Saying whom `close` waits for: a rank that never calls `close` keeps
//! every other rank in it, and without a word that looks like a hang.
//!
//! Each closing rank keeps a [`StraggleWatch`]. After `Config::close_warn`
//! in `close`, and again at each doubling of the wait, it logs one warning
//! (`crate::log`). Rank 0 — the only rank that knows who has called `close` —
//! names the ranks that have not, and sends the list to every rank that
//! has ([`OP_STRAGGLERS`]), which prints it on arrival. A rank that has not
//! heard from rank 0 says it waits for rank 0's release. Why a diagnostic
//! and not an error: a rank may reach `close` much later than the others
//! for good reasons (a long last computation, I/O), and no fixed limit
//! suits every program; a *failed* rank, by contrast, is an error at once
//! (see `crate::endpoint::engine::health`).

use crate::endpoint::engine::control::OP_STRAGGLERS;
use crate::endpoint::engine::core::Core;
use crate::id::Rank;
use crate::log::LongWait;
use std::time::Duration;

/// The clock of one `close`.
#[derive(Debug)]
pub(in crate::endpoint) struct StraggleWatch {
    clock: LongWait,
}

/// Log one warning (`crate::log` writes each line to stderr in one
/// `write`, so lines of several ranks sharing a pipe are not interleaved).
fn say(line: String) {
    tracing::warn!("{line}");
}

fn list(ranks: &[Rank]) -> String {
    let v: Vec<String> = ranks.iter().map(|r| r.0.to_string()).collect();
    v.join(", ")
}

impl StraggleWatch {
    /// Start the clock (first report after `warn`).
    pub(in crate::endpoint) fn new(warn: Duration) -> Self {
        StraggleWatch {
            clock: LongWait::new(warn),
        }
    }

    /// Called after each round of the close loop.
    pub(in crate::endpoint) fn tick(&mut self, core: &Core) {
        let me = core.rank();
        if let Some(missing) = core.control().borrow_mut().take_stragglers() {
            say(format!(
                "rank {me} is waiting in close: rank 0 reports that rank(s) {} have not called close",
                list(&missing)
            ));
        }
        let Some(waited) = self.clock.due() else {
            return;
        };
        if me != Rank(0) {
            say(format!(
                "rank {me} has waited {:.0?} in close for rank 0's release (rank 0 names the ranks that have not called close once it is in close itself)",
                waited
            ));
            return;
        }
        let (missing, closing) = core.control().borrow().close_census();
        if missing.is_empty() {
            return; // everyone is in: the release is a few rounds away
        }
        say(format!(
            "rank 0 has waited {:.0?} in close for rank(s) {} that have not called close (they are alive: every rank waits for them)",
            waited,
            list(&missing)
        ));
        let payload: Vec<u8> = missing.iter().flat_map(|r| r.0.to_le_bytes()).collect();
        for r in closing.into_iter().filter(|&r| r != me) {
            core.send_control(r, OP_STRAGGLERS, &payload);
        }
    }
}
