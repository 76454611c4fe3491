//! Model 7: the TCP NIC's link words ([`fastmsg::internal::link`]) — link state,
//! the alert count, the flush round — between the NIC thread and the
//! application thread.
//!
//! - **Departures.** The NIC thread ends two peers' connections as
//!   `nic::run` does: [`Links::fail`] for peer 0 (a connection that
//!   dropped), [`Links::leave`] for peer 1 (a goodbye without close). The
//!   application runs the transport's check, [`Links::check`], twice while
//!   the NIC works and then until it finds nothing more. Checked: each
//!   departure is reported exactly once, with its error or rank, and both
//!   peers end gone — the alert count that moves is never read without the
//!   state stored before it, which would let the check record the count as
//!   seen and never look again.
//! - **Flush.** The NIC applies a PUT record (bytes into the window area,
//!   [`LoomWindow`]) then the FLUSH record after it,
//!   [`Links::mark_flushed`]; the application waits as `quiesce` does,
//!   [`Links::flush_pending`], then reads the bytes. Checked: loom sees no
//!   race on them, and they are whole.

use crate::harness::spawn_with;
use crate::window_store::{LoomWindow, DATA};
use fastmsg::error::NetError;
use fastmsg::internal::link::{Departure, Links};
use fastmsg::internal::window::WindowMemory;
use fastmsg::Rank;
use loom::sync::Arc;
use loom::thread;

pub(crate) const LOST: &str = "a link's departure was never reported";
pub(crate) const TWICE: &str = "a link's departure was reported twice";
pub(crate) const TORN: &str = "the bytes put before the flush are not whole";

fn dropped() -> NetError {
    NetError::Disconnected {
        rank: Rank(1),
        mid_record: false,
    }
}

fn departures() {
    let links = Arc::new(Links::new(&[Rank(1), Rank(2)]));
    let nic = spawn_with(&links, |l| {
        l.fail(0, dropped());
        l.leave(1, false);
    });
    let mut seen = 0;
    let mut gone = [false; 2];
    let mut reported = Vec::new();
    for _ in 0..2 {
        if let Err(d) = links.check(&mut seen, gone.iter_mut()) {
            reported.push(d);
        }
    }
    nic.join().unwrap();
    // Until a check finds nothing more (at most one report per call).
    for _ in 0..3 {
        match links.check(&mut seen, gone.iter_mut()) {
            Err(d) => reported.push(d),
            Ok(()) => break,
        }
    }
    for want in [Departure::Failed(dropped()), Departure::Left(Rank(2))] {
        match reported.iter().filter(|d| **d == want).count() {
            0 => panic!("{LOST}: {want:?} (reported: {reported:?})"),
            1 => {}
            _ => panic!("{TWICE}: {want:?}"),
        }
    }
    assert_eq!(reported.len(), 2, "{TWICE}");
    assert_eq!(gone, [true, true], "{LOST}");
}

fn flush() {
    struct State {
        links: Links,
        window: LoomWindow,
    }
    let s = Arc::new(State {
        links: Links::new(&[Rank(1)]),
        window: LoomWindow::new(),
    });
    let nic = spawn_with(&s, |s| {
        s.window.copy_in(0, &[7; DATA]);
        s.links.mark_flushed(0, 1);
    });
    while s.links.flush_pending(0, 1) {
        thread::yield_now();
    }
    let mut buf = [0; DATA];
    s.window.copy_out(0, &mut buf);
    assert_eq!(buf, [7; DATA], "{TORN}");
    nic.join().unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{assert_caught, check, says};
    use fastmsg::internal::mutant::Mutant;

    #[test]
    fn every_departure_reported_once() {
        check(departures);
    }

    #[test]
    fn mutant_relaxed_alert_is_caught() {
        assert_caught(Mutant::LinkAlertRelaxed, &[LOST], departures);
    }

    #[test]
    fn mutant_alert_before_state_is_caught() {
        assert_caught(Mutant::LinkAlertFirst, &[LOST], departures);
    }

    #[test]
    fn flush_makes_earlier_records_visible() {
        check(flush);
    }

    #[test]
    fn mutant_relaxed_flush_round_is_caught() {
        assert_caught(Mutant::FlushRelaxed, &[says::RACE, TORN], flush);
    }
}
