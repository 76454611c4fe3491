//! A [`WindowMemory`] on ordinary memory whose every data access loom sees
//! (the raw `WindowArea` casts bytes to atomics and cannot run under loom).
//!
//! Sixteen data bytes behind one loom cell at offsets 0..16, then two
//! 8-byte words, loom atomics, at [`FLAG`] and [`ACK`]: the layout a
//! flag-based exchange over a window uses (data first, the word after).

use fastmsg::internal::window::WindowMemory;
use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicU64;

/// Bytes of data before the words.
pub const DATA: usize = 16;
/// The writer's flag word.
pub const FLAG: u64 = 16;
/// The reader's acknowledgement word.
pub const ACK: u64 = 24;

/// A zeroed window area: [`DATA`] bytes, then the two words.
#[derive(Debug)]
pub struct LoomWindow {
    data: UnsafeCell<[u8; DATA]>,
    words: [AtomicU64; 2],
}

impl LoomWindow {
    /// Zero bytes, zero words (a window just registered).
    pub fn new() -> Self {
        LoomWindow {
            data: UnsafeCell::new([0; DATA]),
            words: [AtomicU64::new(0), AtomicU64::new(0)],
        }
    }
}

impl Default for LoomWindow {
    fn default() -> Self {
        Self::new()
    }
}

fn data_range(at: u64, len: usize) -> core::ops::Range<usize> {
    let at = at as usize;
    assert!(
        at + len <= DATA,
        "window bytes {at}..{} are not data",
        at + len
    );
    at..at + len
}

impl WindowMemory for LoomWindow {
    fn word(&self, at: u64) -> &AtomicU64 {
        match at {
            FLAG => &self.words[0],
            ACK => &self.words[1],
            _ => panic!("no window word at {at}"),
        }
    }

    fn copy_in(&self, at: u64, data: &[u8]) {
        let r = data_range(at, data.len());
        self.data.with_mut(|p| {
            // SAFETY: `p` points to the live data; loom checks for any
            // concurrent access (that is what is modelled).
            unsafe { (&mut *p)[r].copy_from_slice(data) }
        })
    }

    fn copy_out(&self, at: u64, buf: &mut [u8]) {
        let r = data_range(at, buf.len());
        self.data.with(|p| {
            // SAFETY: `p` points to the live data; loom checks for a
            // concurrent writer.
            buf.copy_from_slice(unsafe { &(&*p)[r] })
        })
    }
}
