//! Model 1: the free list's claim (fetch-and-increment + in-use
//! test-and-set) and release, HPVM §5 send steps 2–3.
//!
//! Two frames, two senders, one receiver. Frame 0 starts in use, holding
//! a message the receiver has not read yet, and the free-list head points
//! at it: the first claim always finds a frame still in use and skips it;
//! a later claim may wrap round to frame 0 after the receiver released it
//! (a reuse ordered only by SYNC POINT frame-release) or find the other
//! sender's frame in use and walk on. Each sender fills its frame with its
//! own byte and hands the index to the receiver; the receiver checks every
//! byte and releases the frame.
//!
//! Checked: no frame has two owners at once (loom reports the racing byte
//! accesses, or the receiver finds another sender's bytes), a released
//! frame's last read happens before its next write, and every claim ends.
//!
//! Under loom the test-and-set is a `compare_exchange(0, 1)` rather than
//! the shipped `swap(1)` (same result, see `sync::test_and_set`): loom
//! cannot model a sender that keeps swapping a flag a concurrent release
//! is clearing.

use crate::frames::LoomFrames;
use fastmsg::internal::queue::{FrameStore, FreeList, NO_FRAME};
use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

const BYTES: usize = 4;
/// The byte of the message already waiting in frame 0.
const OLD: u8 = 0xEE;
const WRONG_BYTES: &str = "frame holds another owner's bytes";

struct State {
    head: AtomicU64,
    frames: LoomFrames<BYTES>,
    /// Per sender: the frame it filled (the model's hand-off, not part of
    /// the protocol under test).
    mailbox: [AtomicU32; 2],
}

/// One execution of the model. Returns whether some sender reused frame 0
/// after the receiver released it.
fn run() -> bool {
    let s = Arc::new(State {
        head: AtomicU64::new(0),
        frames: LoomFrames::new(2),
        mailbox: [AtomicU32::new(NO_FRAME), AtomicU32::new(NO_FRAME)],
    });
    // Frame 0 holds an unread message: claimed and filled before the
    // threads start.
    s.frames.in_use(0).store(1, Ordering::Relaxed);
    s.frames.write(0, 0, &[OLD; BYTES]);

    let senders: Vec<_> = (0..2u8)
        .map(|id| {
            let s = s.clone();
            thread::spawn(move || {
                let list = FreeList::new(&s.head, &s.frames);
                // Claim a frame.
                let frame = list.claim(|| false).expect("sound frames");
                // Fill it.
                s.frames.write(frame, 0, &[id; BYTES]);
                // Hand it to the receiver.
                s.mailbox[id as usize].store(frame, Ordering::Release);
                frame
            })
        })
        .collect();

    // Receiver: read and release the old message, then each sender's.
    let list = FreeList::new(&s.head, &s.frames);
    let mut buf = [0u8; BYTES];
    s.frames.read(0, 0, &mut buf);
    assert_eq!(buf, [OLD; BYTES], "{WRONG_BYTES}");
    list.release(0);
    for id in 0..2u8 {
        let frame = loop {
            let f = s.mailbox[id as usize].load(Ordering::Acquire);
            if f != NO_FRAME {
                break f;
            }
            thread::yield_now();
        };
        s.frames.read(frame, 0, &mut buf);
        assert_eq!(buf, [id; BYTES], "{WRONG_BYTES}");
        list.release(frame);
    }
    let frames: Vec<u32> = senders.into_iter().map(|h| h.join().unwrap()).collect();
    frames.contains(&0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{assert_caught, check, says};
    use fastmsg::internal::mutant::Mutant;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    #[test]
    fn claim_release_two_senders() {
        // Count executions in which frame 0 was reused, to show the model
        // reaches the release → claim hand-over and not only fresh frames.
        let reused = std::sync::Arc::new(AtomicUsize::new(0));
        let r = reused.clone();
        check(move || {
            if run() {
                r.fetch_add(1, Relaxed);
            }
        });
        assert!(reused.load(Relaxed) > 0, "no execution reused frame 0");
    }

    #[test]
    fn mutant_plain_test_and_set_is_caught() {
        assert_caught(Mutant::FreeListPlainTas, &[says::RACE, WRONG_BYTES], || {
            run();
        });
    }

    #[test]
    fn mutant_relaxed_release_is_caught() {
        assert_caught(Mutant::FrameReleaseRelaxed, &[says::RACE], || {
            run();
        });
    }
}
