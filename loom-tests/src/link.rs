//! Model 7: the TCP wire's link words ([`fastmsg::internal::link`]) — link
//! state and the alert count — between the NIC thread and the application
//! thread. (The close flush is a flush word in the rings area since the TCP
//! wire runs under the ring transport: a Release store after the records
//! it covers, as every ring write's stamp.)
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

use crate::harness::spawn_with;
use fastmsg::error::NetError;
use fastmsg::internal::link::{Departure, Links};
use fastmsg::Rank;
use loom::sync::Arc;

pub(crate) const LOST: &str = "a link's departure was never reported";
pub(crate) const TWICE: &str = "a link's departure was reported twice";

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{assert_caught, check};
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
}
