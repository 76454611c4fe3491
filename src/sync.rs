//! The one synchronisation shim.
//!
//! Every atomic, cell, spin hint and futex call of the lock-free code (the
//! shared-memory queues in [`crate::queue`], the credit counters in
//! [`crate::flow`], the sleep/wake doorbell in [`crate::wake`]) goes through
//! this module. Under `--cfg loom` it re-exports loom's model-checked types,
//! otherwise `core`'s, so the loom suite in `loom-tests/` checks the very code
//! that ships (the tokio `loom` module / crossbeam `primitive` pattern).
//!
//! The std types used here have the same in-memory representation as their
//! integers, which is what lets the shared-memory transport place them in a
//! mapping shared by several processes.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// Spin-loop hint (the CPU's `pause`); under loom, a yield point.
#[inline(always)]
pub(crate) fn spin_loop() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}

/// Give the CPU to another runnable thread or process.
#[inline]
pub(crate) fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

/// An `UnsafeCell` with loom's closure-based access API, so that loom can
/// track every read and write of non-atomic shared data (and report races).
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// An `UnsafeCell` with loom's closure-based access API (std build: a
/// transparent wrapper with no cost).
#[cfg(not(loom))]
#[derive(Debug, Default)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    #[allow(dead_code)]
    pub(crate) const fn new(data: T) -> UnsafeCell<T> {
        UnsafeCell(core::cell::UnsafeCell::new(data))
    }

    /// Run `f` with a read pointer to the contents.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Run `f` with a write pointer to the contents.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Futex operations on a 32-bit word (Linux `futex(2)`, shared across
/// processes when the word lives in a shared mapping).
#[cfg(not(loom))]
pub(crate) mod futex {
    #![allow(unsafe_code)]
    use super::AtomicU32;
    use std::time::Duration;

    /// Sleep while `*word == expected`, at most `timeout`. Spurious returns
    /// are allowed; callers re-check their condition.
    pub(crate) fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `word` is a valid, aligned 32-bit atomic for the duration of
        // the call; FUTEX_WAIT only reads it. `ts` outlives the call. Not
        // FUTEX_PRIVATE: the word may be shared between processes.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT,
                expected,
                &ts as *const libc::timespec,
            );
        }
    }

    /// Wake every sleeper on `word`.
    pub(crate) fn wake_all(word: &AtomicU32) {
        // SAFETY: `word` is a valid, aligned 32-bit atomic; FUTEX_WAKE does
        // not access memory beyond reading the address as a key.
        unsafe {
            libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
        }
    }
}
