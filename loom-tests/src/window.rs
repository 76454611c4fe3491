//! Model 6: one-sided window words ([`fastmsg::internal::window`]) — a flag-based
//! exchange over a window, the pattern of the handlers' barriers and of
//! any put/get layer.
//!
//! The writer is a peer on this host (`WindowArea::write` then
//! `store_u64`) or the TCP NIC applying a PUT record then a PUT_U64 record
//! (its word store is `WindowArea::store_u64` too): both end in
//! [`store_word`], run here over [`LoomWindow`]. The reader is
//! `read_u64`'s [`load_word`], then reads the data.
//!
//! Two rounds on the same bytes: the writer puts 16 bytes and raises the
//! flag; the reader waits for the flag, reads the bytes and acknowledges
//! through its own word; the writer waits for the acknowledgement and
//! overwrites the bytes for round two. Checked: the reader never reads the
//! bytes before or while they are written (loom reports the race on the
//! cell) and reads each round's bytes whole; the writer never overwrites
//! bytes still being read (loom reports that race too).

use crate::harness::spawn_with;
use crate::window_store::{LoomWindow, ACK, DATA, FLAG};
use fastmsg::internal::window::{load_word, store_word, WindowMemory};
use loom::sync::Arc;
use loom::thread;

pub(crate) const TORN: &str = "the reader saw bytes of another round";

fn wait_for(w: &LoomWindow, at: u64, v: u64) {
    while load_word(w, at) != v {
        thread::yield_now();
    }
}

fn run() {
    let w = Arc::new(LoomWindow::new());
    let writer = spawn_with(&w, |w| {
        w.copy_in(0, &[1; DATA]);
        store_word(w, FLAG, 1);
        wait_for(w, ACK, 1);
        w.copy_in(0, &[2; DATA]);
        store_word(w, FLAG, 2);
    });
    let mut buf = [0; DATA];
    wait_for(&w, FLAG, 1);
    w.copy_out(0, &mut buf);
    assert_eq!(buf, [1; DATA], "{TORN}");
    store_word(&*w, ACK, 1);
    wait_for(&w, FLAG, 2);
    w.copy_out(0, &mut buf);
    assert_eq!(buf, [2; DATA], "{TORN}");
    writer.join().unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{assert_caught, check, says};
    use fastmsg::internal::mutant::Mutant;

    #[test]
    fn flag_after_data_two_rounds() {
        check(run);
    }

    #[test]
    fn mutant_relaxed_word_store_is_caught() {
        assert_caught(Mutant::WindowStoreRelaxed, &[says::RACE], run);
    }

    #[test]
    fn mutant_relaxed_word_load_is_caught() {
        assert_caught(Mutant::WindowLoadRelaxed, &[says::RACE], run);
    }
}
