//! The sleep/wake doorbell of one rank: a sleeping flag and a futex word.
//!
//! A rank that has found nothing to do for a while may sleep instead of
//! spinning (the `sleep` wait policy). Whoever makes work for it — a sender
//! publishing a fragment, a receiver returning credit — rings its doorbell.
//! The handshake is Dekker's: the sleeper announces itself and then re-checks
//! for work; the waker makes the work visible and then checks for a sleeper;
//! a SeqCst fence on each side guarantees at least one of them sees the
//! other, so a wake-up is never lost. The sleeper also sleeps with a timeout,
//! which bounds the damage of a peer that dies mid-protocol.
//!
//! Where the kernel offers `membarrier(2)` (see [`crate::sync::membarrier`])
//! the handshake is asymmetric: the waker's fence — paid on every send while
//! doorbells are on — becomes a compiler fence, and the sleeper, after its
//! own fence, has the kernel run a full barrier on every thread of the
//! job's processes (a few µs, paid only when about to sleep). That is what
//! lets the default `auto` policy keep doorbells on and sleep when the
//! machine is busy, without slowing sends on a quiet one. The sleeper
//! always pays the heavy barrier when the kernel offers it, so a waker that
//! could not register (and fences) and one that did (and does not) are
//! both safe beside it. If the heavy barrier fails, the sleeper does not
//! sleep.
//!
//! The doorbell lives in the shared mapping (so other processes can ring it)
//! or in process memory; under loom the futex is modelled by a mutex and a
//! condition variable, which loom checks for lost wake-ups.

use crate::sync::mutant::{self, Mutant};
use crate::sync::{fence, AtomicU32, Ordering};
use std::time::Duration;

/// The sleeper's heavy barrier: `membarrier` where the kernel offers it
/// (every registered waker then has a full barrier between its publication
/// and its look at `sleeping`); true where there is nothing to do (no
/// waker can have left its fence out). False: the kernel refused.
#[inline]
fn heavy_barrier() -> bool {
    #[cfg(not(loom))]
    {
        !crate::sync::membarrier::supported() || crate::sync::membarrier::heavy()
    }
    #[cfg(loom)]
    {
        true
    }
}

/// One rank's doorbell. One cache line.
// Shared layout: a fixed `repr(C, align(64))`, not crossbeam's `CachePadded`
// (128 on x86_64, platform dependent), which the segment's offsets and
// every process mapping it must agree on (docs/architecture.md).
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct Doorbell {
    sleeping: AtomicU32,
    word: AtomicU32,
    #[cfg(loom)]
    park: (loom::sync::Mutex<()>, loom::sync::Condvar),
}

impl Doorbell {
    /// A doorbell with nobody asleep.
    pub fn new() -> Self {
        Doorbell::default()
    }

    /// Sleeper: sleep until rung or `timeout` passes, unless `has_work`
    /// (called after announcing the sleep) finds something to do.
    /// Returns whether it actually slept.
    pub fn sleep(&self, timeout: Duration, has_work: impl FnOnce() -> bool) -> bool {
        // Note the ring count before announcing: a ring after this point
        // changes the word and the futex wait returns at once.
        // SYNC POINT doorbell-word (acquire side): pairs with `ring`'s bump.
        let seen = self.word.load(Ordering::Acquire);
        self.sleeping.store(1, Ordering::Relaxed);
        // SYNC POINT doorbell (sleeper side): the SeqCst fence orders our
        // `sleeping = 1` before the re-check of the queues; pairs with the
        // fence in `ring`. (MUTANT SleeperNoFence, loom only: no fence.)
        if !mutant::on(Mutant::SleeperNoFence) {
            fence(Ordering::SeqCst);
        }
        // SYNC POINT doorbell (sleeper side, asymmetric): the heavy barrier
        // stands in for the fence that registered wakers leave out (see
        // `ring`); without it this sleeper must not sleep.
        if !heavy_barrier() {
            self.sleeping.store(0, Ordering::Relaxed);
            return false;
        }
        if has_work() {
            self.sleeping.store(0, Ordering::Relaxed);
            return false;
        }
        self.wait(seen, timeout);
        self.sleeping.store(0, Ordering::Relaxed);
        true
    }

    /// Whether the sleeper announced a sleep and has not woken yet (read
    /// by the sleeper's own thread inside `has_work`, where it is set).
    pub fn is_sleeping(&self) -> bool {
        self.sleeping.load(Ordering::Relaxed) != 0
    }

    /// Waker: call after making work visible (publishing a slot, returning
    /// credit). Costs a fence and one load when nobody sleeps. A hot path
    /// rings through a [`Ringer`], which decided the fence once.
    #[inline]
    pub fn ring(&self) {
        // SYNC POINT doorbell (waker side): orders the publication before
        // reading `sleeping`; pairs with the fence in `sleep`.
        // (MUTANT WakerNoFence, loom only: no fence.)
        // A registered process's fence is a compiler fence: the sleeper's
        // heavy barrier runs the full one in this thread for it.
        if !mutant::on(Mutant::WakerNoFence) {
            crate::sync::light_fence();
        }
        self.wake_sleeper();
    }

    /// The waker's look for a sleeper, after its fence: one load while
    /// nobody sleeps; the wake itself is out of line.
    #[inline(always)]
    fn wake_sleeper(&self) {
        if self.sleeping.load(Ordering::Relaxed) != 0 {
            self.wake_now();
        }
    }

    #[cold]
    #[inline(never)]
    fn wake_now(&self) {
        // SYNC POINT doorbell-word (release side): a sleeper that sees
        // the new word also sees the work.
        self.word.fetch_add(1, Ordering::Release);
        self.wake();
    }

    /// Whether wakers may ring this doorbell cheaply (this kernel offers
    /// the asymmetric barrier): the `auto` policy's doorbells are on only
    /// then.
    pub fn cheap_wakers() -> bool {
        #[cfg(not(loom))]
        return crate::sync::membarrier::supported();
        #[cfg(loom)]
        return false;
    }

    /// Let this process ring doorbells with a compiler fence instead of a
    /// full one (see the module docs); returns whether it may.
    pub fn register_waker() -> bool {
        #[cfg(not(loom))]
        return crate::sync::membarrier::register();
        #[cfg(loom)]
        return false;
    }

    #[cfg(not(loom))]
    fn wait(&self, seen: u32, timeout: Duration) {
        crate::sync::futex::wait(&self.word, seen, timeout);
    }

    #[cfg(not(loom))]
    fn wake(&self) {
        crate::sync::futex::wake_all(&self.word);
    }

    #[cfg(loom)]
    fn wait(&self, seen: u32, _timeout: Duration) {
        // futex(2) semantics: the compare and the sleep are atomic with
        // respect to wake. No timeout under loom, so a lost wake-up is a
        // deadlock that loom reports.
        let guard = self.park.0.lock().unwrap();
        // SYNC POINT doorbell-word (acquire side), as in `sleep`.
        if self.word.load(Ordering::Acquire) == seen {
            drop(self.park.1.wait(guard).unwrap());
        }
    }

    #[cfg(loom)]
    fn wake(&self) {
        let _guard = self.park.0.lock().unwrap();
        self.park.1.notify_all();
    }
}

/// How this process rings doorbells, decided once per transport (when it
/// is built, after the wait policy registered the process with
/// `membarrier`), so that a ring on the send and release paths costs one
/// load of the sleeping word and a test while nobody sleeps, instead of
/// also asking each time whether the process is registered.
///
/// The handshake is [`Doorbell::ring`]'s, unchanged: `Light` is the
/// compiler fence a registered process uses there (registration is never
/// undone, so an answer of "registered" stays true); `Full` is the SeqCst
/// fence. Under loom there is no `Light` (loom checks the handshake with
/// the full fence in the waker, see `loom-tests/src/doorbell.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ringer {
    /// Doorbells are off (no wait policy sleeps): ringing does nothing.
    Off,
    /// Doorbells on, this process registered for the asymmetric barrier.
    Light,
    /// Doorbells on, full fence per ring.
    Full,
}

impl Ringer {
    /// The ringer for a transport whose senders ring when `doorbells`.
    pub fn new(doorbells: bool) -> Ringer {
        if !doorbells {
            Ringer::Off
        } else if crate::sync::light_fence_is_free() {
            Ringer::Light
        } else {
            Ringer::Full
        }
    }

    /// Ring `bell` (call after making work visible to its owner).
    #[inline(always)]
    pub fn ring(self, bell: &Doorbell) {
        match self {
            Ringer::Off => return,
            // SYNC POINT doorbell (waker side, asymmetric): as in
            // `Doorbell::ring` for a registered process; pairs with the
            // sleeper's fence and heavy barrier in `sleep`.
            Ringer::Light => crate::sync::registered_fence(),
            // SYNC POINT doorbell (waker side): as in `Doorbell::ring` for
            // a process that is not registered; pairs with the fence in
            // `sleep`.
            Ringer::Full => fence(Ordering::SeqCst),
        }
        bell.wake_sleeper();
    }
}
