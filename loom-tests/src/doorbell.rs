//! Model 5: the doorbell's sleep/wake handshake (Dekker: announce, fence,
//! re-check / make visible, fence, look for a sleeper).
//!
//! A receiver waits for fragments on dedicated queues the way the `sleep`
//! wait policy does: pop what is there, otherwise [`Doorbell::sleep`] with
//! "is a head slot published?" as the re-check. Each sender publishes a
//! fragment, then rings. Under loom the futex is a mutex and a condition
//! variable and the sleep has no timeout, so a lost wake-up leaves the
//! receiver asleep for ever: loom reports a deadlock.
//!
//! Two configurations, explored at the suite's preemption bound:
//! - one sender, two fragments (two rings): a ring may land while the
//!   receiver is between two sleeps, and the `sleeping` flag of the first
//!   sleep meets the second;
//! - two senders, one fragment each, on their own queues (the receiver's
//!   doorbell is rung by every local peer): two rings race each other and
//!   the sleeper.
//!
//! The shipped handshake may be asymmetric (`crate::sync::membarrier`):
//! a registered waker's fence is a compiler fence and the sleeper, after
//! its own fence, has the kernel run a full barrier in every registered
//! thread (`membarrier` GLOBAL_EXPEDITED). loom cannot run a barrier in
//! another thread, so it checks the handshake with that barrier where the
//! kernel puts it, in the waker (`sync::light_fence` is a SeqCst fence
//! under loom); `WakerNoFence` shows the waker's side is needed at all.

use crate::harness::spawn_with;
use fastmsg::internal::frame::FragHeader;
use fastmsg::internal::queue::{RecvQueue, Slot, SlotBody};
use fastmsg::internal::wake::Doorbell;
use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use std::time::Duration;

const SLOTS: u64 = 2;

/// A dedicated queue (no slot is reused here, so no credit is needed).
struct Queue {
    slots: Vec<Slot>,
    tail: AtomicU64,
}

impl Queue {
    fn new() -> Queue {
        Queue {
            slots: (0..SLOTS).map(Slot::new).collect(),
            tail: AtomicU64::new(0),
        }
    }

    fn queue(&self) -> RecvQueue<'_> {
        RecvQueue::new(&self.slots, &self.tail, false)
    }
}

struct State {
    queues: Vec<Queue>,
    bell: Doorbell,
}

/// `fragments[i]` fragments from sender `i`, each on its own queue.
fn run(fragments: &'static [u64]) {
    let s = Arc::new(State {
        queues: fragments.iter().map(|_| Queue::new()).collect(),
        bell: Doorbell::new(),
    });
    let senders: Vec<_> = (0..fragments.len())
        .map(|i| {
            spawn_with(&s, move |s| {
                let q = s.queues[i].queue();
                for k in 0..fragments[i] {
                    let body = SlotBody {
                        header: FragHeader {
                            handler: k as u32,
                            ..FragHeader::default()
                        },
                        ..SlotBody::default()
                    };
                    // Make the work visible, then ring.
                    q.publish_dedicated(k, &body);
                    s.bell.ring();
                }
            })
        })
        .collect();

    let queues: Vec<RecvQueue<'_>> = s.queues.iter().map(Queue::queue).collect();
    let mut heads = vec![0u64; fragments.len()];
    while heads.iter().zip(fragments).any(|(h, n)| h < n) {
        let mut popped = false;
        for (q, head) in queues.iter().zip(&mut heads) {
            if let Some(body) = q.try_pop(*head).expect("stamp looks corrupt") {
                assert_eq!(u64::from(body.header.handler), *head);
                *head += 1;
                popped = true;
            }
        }
        if !popped {
            let has_work = || queues.iter().zip(&heads).any(|(q, &h)| q.is_ready(h));
            s.bell.sleep(Duration::from_secs(1), has_work);
        }
    }
    for t in senders {
        t.join().unwrap();
    }
}

fn one_sender() {
    run(&[2]);
}

fn two_senders() {
    run(&[1, 1]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{assert_caught, check, says};
    use fastmsg::internal::mutant::Mutant;

    #[test]
    fn no_lost_wake_up_one_sender() {
        check(one_sender);
    }

    #[test]
    fn no_lost_wake_up_two_senders() {
        check(two_senders);
    }

    #[test]
    fn mutant_sleeper_without_fence_is_caught() {
        assert_caught(Mutant::SleeperNoFence, &[says::DEADLOCK], one_sender);
    }

    #[test]
    fn mutant_waker_without_fence_is_caught() {
        assert_caught(Mutant::WakerNoFence, &[says::DEADLOCK], one_sender);
    }

    #[test]
    fn mutant_sleeper_without_fence_is_caught_two_senders() {
        assert_caught(Mutant::SleeperNoFence, &[says::DEADLOCK], two_senders);
    }
}
