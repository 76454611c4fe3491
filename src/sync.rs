//! The one synchronisation shim.
//!
//! Every atomic, cell, spin hint and futex call of the lock-free code (the
//! shared-memory queues in [`crate::queue`], the network rings in
//! [`crate::ring`], the credit counters in [`crate::flow`], the sleep/wake
//! doorbell in [`crate::wake`]) goes through
//! this module. Under `--cfg loom` it re-exports loom's model-checked types,
//! otherwise `core`'s, so the loom suite in `loom-tests/` checks the very code
//! that ships (the tokio `loom` module / crossbeam `primitive` pattern).
//!
//! The std types used here have the same in-memory representation as their
//! integers, which is what lets the shared-memory transport place them in a
//! mapping shared by several processes.

// Under loom the modules that use the flag and counter types (endpoint,
// transports, bootstrap) are not built.
#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
/// A lock loom can see (the link error a NIC thread hands over, `crate::transport::net::link`).
#[cfg(loom)]
pub(crate) use loom::sync::Mutex;

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{
    fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
/// A lock loom can see (the link error a NIC thread hands over, `crate::transport::net::link`).
#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;

/// Test-and-set of a 0/1 flag: set it to 1 and return what it held.
///
/// A `compare_exchange(0, 1)` rather than a `swap(1)`: the same result and
/// the same final flag, and on x86 the same one locked instruction; loom
/// checks it exactly, whereas it mis-orders a `swap` that races with a
/// plain store (the receiver's release; tokio-rs/loom#254), so the shipped
/// and the model-checked operation are the same one.
#[inline(always)]
pub(crate) fn test_and_set(flag: &AtomicU32, order: Ordering) -> u32 {
    flag.compare_exchange(0, 1, order, Ordering::Relaxed)
        .unwrap_or_else(|held| held)
}

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

/// Seeded mutants: the loom suite's proof that each model can fail.
///
/// A handful of spots in the queue, ring, credit, doorbell, window, link and
/// lazy-pair code ask
/// [`on`](mutant::on) whether one named bug should be planted there (an
/// ordering weakened, a fence or a check left out). Outside `--cfg loom`
/// `on` is a `const fn` returning `false` and [`weaken`](mutant::weaken)
/// returns its ordering unchanged, so every seeded spot compiles to exactly
/// the code it had before. Under loom a test switches one mutant on for the
/// current thread (loom runs a whole model on the calling thread), runs the
/// model and asserts that loom reports a failure.
#[cfg_attr(loom, doc(hidden))]
pub mod mutant {
    use super::Ordering;

    /// The seeded bugs, one per seeded spot.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Mutant {
        /// `FreeList::claim`: test-and-set replaced by a load then a store.
        FreeListPlainTas,
        /// `FreeList::release`: the in-use clear is Relaxed, not Release.
        FrameReleaseRelaxed,
        /// `RecvQueue::publish`: the stamp store is Relaxed, not Release.
        PublishRelaxed,
        /// `RecvQueue::publish` (shared): no wait for the recycle stamp.
        PublishSkipsRecycleWait,
        /// `RecvQueue::recycle`: the recycle stamp is Relaxed, not Release.
        RecycleRelaxed,
        /// `CreditLine::read`: Relaxed, not Acquire.
        CreditReadRelaxed,
        /// `CreditWindow::try_take`: `<=` instead of `<` (one credit too many).
        CreditTakeOffByOne,
        /// `CreditReturn::take_publish`: returns the previous total.
        CreditPublishStale,
        /// `Doorbell::sleep`: no SeqCst fence after announcing the sleep.
        SleeperNoFence,
        /// `Doorbell::ring`: no SeqCst fence before checking for a sleeper.
        WakerNoFence,
        /// `ring::publish_trailer`: the stamp store is Relaxed, not Release.
        RingStampRelaxed,
        /// `RingRx::try_take`: the stamp load is Relaxed, not Acquire.
        RingTakeRelaxed,
        /// `RingRx::try_take`: a slot still holding last lap's fragment is
        /// taken as holding this one (a flag test without the lap).
        RingTakesLastLap,
        /// `window::store_word`: the word store is Relaxed, not Release.
        WindowStoreRelaxed,
        /// `window::load_word`: the word load is Relaxed, not Acquire.
        WindowLoadRelaxed,
        /// `Links::fail` / `Links::leave`: the alert count is bumped
        /// Relaxed, not Release.
        LinkAlertRelaxed,
        /// `Links::fail` / `Links::leave`: the alert count is bumped before
        /// the link's state is stored.
        LinkAlertFirst,
        /// `LazyPairs::accept`: decides on a look, then stores (no
        /// compare-exchange).
        PairAcceptLooksThenStores,
        /// `LazyPairs::accept`: the tie-break inverted at the lower rank's
        /// end (it takes the higher rank's dial while dialing itself).
        PairTieBreakInvertedAtLower,
        /// `LazyPairs::accept`: the tie-break inverted at the higher rank's
        /// end (it refuses the lower rank's dial while dialing itself).
        PairTieBreakInvertedAtHigher,
        /// `LazyPairs::settle`: counted after the answer, not before.
        SettleCountedLate,
        /// `LazyPairs::settle`: the count drops Relaxed, not AcqRel.
        SettleRelaxed,
        /// `LazyPairs::hand_over`: the flag is raised Relaxed, not Release.
        HandoverRelaxed,
        /// `LazyPairs::hand_over`: the flag is raised by a plain store, not
        /// a read-modify-write.
        HandoverPlainRaise,
        /// `LazyPairs::take`: the flag is lowered by a plain store, not an
        /// Acquire swap (the code before the loom model).
        HandoverPlainLower,
        /// `Placements::count_after`: the count is bumped Relaxed, not
        /// Release.
        PlacementCountRelaxed,
        /// `Placements::count_after`: the count is bumped before the
        /// placement, not after.
        PlacementCountedFirst,
    }

    #[cfg(loom)]
    std::thread_local! {
        static ACTIVE: core::cell::Cell<Option<Mutant>> = const { core::cell::Cell::new(None) };
    }

    /// Whether mutant `m` is switched on (never, outside loom).
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) const fn on(_m: Mutant) -> bool {
        false
    }

    /// Whether mutant `m` is switched on for this thread.
    #[cfg(loom)]
    #[inline]
    pub(crate) fn on(m: Mutant) -> bool {
        ACTIVE.with(|a| a.get() == Some(m))
    }

    /// `order` (outside loom, always).
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) const fn weaken(_m: Mutant, order: Ordering) -> Ordering {
        order
    }

    /// `order`, or `Relaxed` while mutant `m` is on.
    #[cfg(loom)]
    #[inline]
    pub(crate) fn weaken(m: Mutant, order: Ordering) -> Ordering {
        if on(m) {
            Ordering::Relaxed
        } else {
            order
        }
    }

    /// The mutant switched on for this thread, if any.
    #[cfg(loom)]
    pub fn active() -> Option<Mutant> {
        ACTIVE.with(|a| a.get())
    }

    /// Run `f` with mutant `m` switched on for the current thread (and
    /// switched off again when `f` returns or panics).
    #[cfg(loom)]
    pub fn with<R>(m: Mutant, f: impl FnOnce() -> R) -> R {
        struct Off;
        impl Drop for Off {
            fn drop(&mut self) {
                ACTIVE.with(|a| a.set(None));
            }
        }
        ACTIVE.with(|a| {
            assert_eq!(a.get(), None, "one mutant at a time");
            a.set(Some(m));
        });
        let _off = Off;
        f()
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

/// The heavy half of an asymmetric fence pair: `membarrier(2)`'s
/// `GLOBAL_EXPEDITED` command makes every running thread of every process
/// that registered for it execute a full memory barrier before the call
/// returns (a thread not running passes one when it is switched in). A
/// process that registered may then use a compiler fence where a Dekker
/// handshake needs a full fence on its hot side, provided the other side
/// calls [`membarrier::heavy`] after its own full fence — the doorbell's
/// waker and sleeper ([`crate::wake`]). Linux 4.16 and later; elsewhere
/// (or under a seccomp filter that forbids it) `supported` is false and
/// both sides keep their fences.
#[cfg(not(loom))]
pub(crate) mod membarrier {
    #![allow(unsafe_code)]
    use super::{AtomicU8, Ordering};

    // <linux/membarrier.h>
    const CMD_QUERY: libc::c_long = 0;
    const CMD_GLOBAL_EXPEDITED: libc::c_long = 1 << 1;
    const CMD_REGISTER_GLOBAL_EXPEDITED: libc::c_long = 1 << 2;

    /// 0: not asked yet; 1: unsupported; 2: supported.
    static SUPPORTED: AtomicU8 = AtomicU8::new(0);
    /// Whether this process registered (its wakers may use a compiler fence).
    static REGISTERED: AtomicU8 = AtomicU8::new(0);

    fn call(cmd: libc::c_long) -> libc::c_long {
        // SAFETY: membarrier takes no pointers; an unknown command is EINVAL.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_long,
                0 as libc::c_long,
            )
        }
    }

    /// Whether this kernel offers the commands used here (the same answer
    /// for every process of the host).
    pub(crate) fn supported() -> bool {
        match SUPPORTED.load(Ordering::Relaxed) {
            0 => {
                let q = call(CMD_QUERY);
                let need = CMD_GLOBAL_EXPEDITED | CMD_REGISTER_GLOBAL_EXPEDITED;
                let yes = q >= 0 && q & need == need;
                SUPPORTED.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
                yes
            }
            v => v == 2,
        }
    }

    /// Register this process as a target of [`heavy`]; returns whether it
    /// is registered. Idempotent.
    pub(crate) fn register() -> bool {
        if REGISTERED.load(Ordering::Relaxed) == 1 {
            return true;
        }
        if !supported() || call(CMD_REGISTER_GLOBAL_EXPEDITED) != 0 {
            return false;
        }
        // Only after the kernel has registered us do our wakers drop their
        // fence (`registered` is read by the same thread or after a start
        // that happens-after this store; a stale `false` only fences).
        REGISTERED.store(1, Ordering::Relaxed);
        true
    }

    /// Whether this process registered.
    #[inline(always)]
    pub(crate) fn registered() -> bool {
        REGISTERED.load(Ordering::Relaxed) == 1
    }

    /// A full barrier on every running thread of every registered process;
    /// false if the kernel refused (then the caller must not rely on it).
    pub(crate) fn heavy() -> bool {
        supported() && call(CMD_GLOBAL_EXPEDITED) == 0
    }
}

/// Whether [`light_fence`] is a compiler fence in this process, now and
/// from now on (registration is never undone). Never under loom.
#[inline(always)]
pub(crate) fn light_fence_is_free() -> bool {
    #[cfg(not(loom))]
    return membarrier::registered();
    #[cfg(loom)]
    return false;
}

/// [`light_fence`] for a caller that learnt from [`light_fence_is_free`]
/// that this process is registered: the compiler fence alone, without
/// asking again. Under loom a SeqCst fence, as `light_fence`.
#[inline(always)]
pub(crate) fn registered_fence() {
    #[cfg(not(loom))]
    // SYNC POINT doorbell (waker side, asymmetric): the sleeper's heavy
    // barrier runs the full fence in this thread.
    core::sync::atomic::compiler_fence(Ordering::SeqCst);
    #[cfg(loom)]
    fence(Ordering::SeqCst);
}

/// The light half of the pair: a compiler fence when this process is a
/// registered target of [`membarrier::heavy`], else a SeqCst fence.
/// Under loom always a SeqCst fence (loom models the pair this way: the
/// heavy side's barrier runs, in effect, in the light side's thread).
#[inline(always)]
pub(crate) fn light_fence() {
    if light_fence_is_free() {
        registered_fence();
    } else {
        // SYNC POINT doorbell (waker side): the full fence (`wake::Doorbell`).
        fence(Ordering::SeqCst);
    }
}
