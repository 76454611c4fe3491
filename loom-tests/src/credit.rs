//! Model 3: credit accounting between a sender and a receiver that returns
//! credit, with both sides waiting the way the `sleep` wait policy does.
//!
//! A window of one credit over a dedicated queue of two slots (what the
//! segment layout gives one sender with one credit), three fragments. The
//! sender takes a credit per fragment; without one it refreshes its
//! [`CreditWindow`] from the [`CreditLine`] and, still without, sleeps on
//! its [`Doorbell`] with the refresh as the re-check. The receiver counts
//! each release in a [`CreditReturn`], publishes the total it hands out
//! (`take_publish`) and rings the sender's doorbell. Doorbells have no
//! timeout under loom, so a credit that never comes back is a deadlock.
//! The receiver waits for fragments the same way, on its own doorbell,
//! which the sender rings after each publish; so when either side waits
//! for something that never comes, both end up asleep and loom reports the
//! deadlock (a side that spun instead would only exhaust loom's branches).
//!
//! Checked: the sender's view of credit never goes negative (`returned`
//! never passes `sent`, `available()` never underflows), never more
//! fragments in flight than the window, every fragment arrives in order,
//! the final published total equals what was sent, and no deadlock.

use crate::harness::spawn_with;
use fastmsg::internal::flow::{CreditLine, CreditReturn, CreditWindow};
use fastmsg::internal::frame::FragHeader;
use fastmsg::internal::queue::{RecvQueue, Slot, SlotBody};
use fastmsg::internal::wake::Doorbell;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use std::time::Duration;

const SLOTS: u64 = 2;
const WINDOW: u32 = 1;
const FRAGMENTS: u64 = 3;
const OVER_WINDOW: &str = "more fragments in flight than the window";
const NEGATIVE: &str = "credit went negative";

struct State {
    slots: Vec<Slot>,
    tail: AtomicU64,
    credit: CreditLine,
    sender_bell: Doorbell,
    receiver_bell: Doorbell,
    /// Fragments taken and not yet released (model bookkeeping: Relaxed
    /// read-modify-writes, which add no happens-before edge).
    in_flight: AtomicU64,
}

fn available(w: &CreditWindow) -> u64 {
    let a = w.available();
    assert!(a <= u64::from(WINDOW), "{NEGATIVE}");
    a
}

fn run() {
    let s = Arc::new(State {
        slots: (0..SLOTS).map(Slot::new).collect(),
        tail: AtomicU64::new(0),
        credit: CreditLine::new(),
        sender_bell: Doorbell::new(),
        receiver_bell: Doorbell::new(),
        in_flight: AtomicU64::new(0),
    });

    let sender = spawn_with(&s, |s| {
        let q = RecvQueue::new(&s.slots, &s.tail, false);
        let mut window = CreditWindow::new(WINDOW);
        let refresh = |w: &mut CreditWindow| {
            let returned = s.credit.read();
            assert!(returned <= w.sent(), "{NEGATIVE}");
            w.update(returned);
            available(w) > 0
        };
        for k in 0..FRAGMENTS {
            while !window.try_take() {
                // Out of credit: refresh, then sleep until rung.
                if !refresh(&mut window) {
                    s.sender_bell
                        .sleep(Duration::from_secs(1), || refresh(&mut window));
                }
            }
            available(&window);
            let n = s.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
            assert!(n <= u64::from(WINDOW), "{OVER_WINDOW}");
            let body = SlotBody {
                header: FragHeader {
                    handler: k as u32,
                    ..FragHeader::default()
                },
                ..SlotBody::default()
            };
            q.publish_dedicated(window.sent() - 1, &body);
            s.receiver_bell.ring();
        }
    });

    let q = RecvQueue::new(&s.slots, &s.tail, false);
    let mut returns = CreditReturn::default();
    for head in 0..FRAGMENTS {
        let body = loop {
            match q.try_pop(head).expect("stamp looks corrupt") {
                Some(b) => break b,
                None => {
                    s.receiver_bell
                        .sleep(Duration::from_secs(1), || q.is_ready(head));
                }
            }
        };
        assert_eq!(
            u64::from(body.header.handler),
            head,
            "fragment out of order"
        );
        s.in_flight.fetch_sub(1, Ordering::Relaxed);
        returns.release();
        assert_eq!(returns.unpublished(), 1);
        // Return the credit and wake the sender if it sleeps.
        if let Some(total) = returns.take_publish() {
            s.credit.publish(total);
            s.sender_bell.ring();
        }
    }
    sender.join().unwrap();
    assert_eq!(returns.unpublished(), 0);
    assert_eq!(s.credit.read(), FRAGMENTS, "credit lost");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{assert_caught, check, says};
    use fastmsg::internal::mutant::Mutant;

    #[test]
    fn window_of_one_three_fragments() {
        check(run);
    }

    #[test]
    fn mutant_take_one_too_many_is_caught() {
        assert_caught(
            Mutant::CreditTakeOffByOne,
            &[OVER_WINDOW, NEGATIVE, "overflow", says::RACE],
            run,
        );
    }

    #[test]
    fn mutant_stale_credit_total_is_caught() {
        assert_caught(Mutant::CreditPublishStale, &[says::DEADLOCK], run);
    }
}
