//! Rank liveness through the shared segment, independent of process ids.
//!
//! Every SMT id owns one [`LifeLine`] (a cache line of the segment's
//! "lifelines" area, see [`super::layout`]): a state word and a
//! process-shared **robust** pthread mutex. The rank *arms* its line at
//! attach — initialises the mutex and locks it from the thread that owns the
//! endpoint — and holds it for the endpoint's whole life. When it leaves in
//! order it first stores why (`CLOSED`: after the close barrier released
//! it; `LEFT`: the endpoint was dropped without `close`) and then unlocks.
//!
//! If the holding thread ends without unlocking — the process was killed,
//! crashed, called `exit` or `exec`, or the endpoint's thread ended with the
//! endpoint leaked — the kernel walks the thread's robust-futex list and
//! marks the mutex `FUTEX_OWNER_DIED`. That mark is made by the kernel on
//! the memory itself, so it means the same thing in every PID namespace: a
//! checker in another container sharing `/dev/shm` sees it exactly like a
//! checker next to the rank, whereas the `kill(pid, 0)` this replaces asked
//! about a pid number that names another process (or none) in another
//! namespace (a live rank was declared dead after a second; a dead rank
//! that was pid 1 of its namespace was never noticed).
//!
//! A checker ([`LifeLine::probe`]) reads the state word and, while it says
//! `ALIVE`, tries the mutex: busy means the holder lives; acquired with
//! `EOWNERDEAD` means it died — the checker stores `DEAD` (sticky: every
//! later reader sees it without touching the mutex), makes the mutex
//! consistent and unlocks it. The mutex's owner field holds the holder's
//! thread id in the holder's namespace; it is only ever compared by the
//! kernel in the holder's own namespace, and a checker whose thread id
//! happens to be the same number still gets "busy" (a non-recursive robust
//! mutex is never re-entered by `trylock`).
//!
//! Two rules keep the mutex safe to use from Rust:
//! - only the owning thread unlocks it ([`LifeGuard`] is neither `Send`
//!   nor `Sync`);
//! - it is unlocked before the segment is unmapped: glibc links a held
//!   robust mutex into the owner thread's list, and a list entry in
//!   unmapped memory would be written through by the next robust lock of
//!   that thread. The guard holds the mapping itself (a [`MapRef`] of its
//!   line), so the mapping cannot go first, whatever order its holders
//!   are dropped in.

#![allow(unsafe_code)]

use super::mapping::MapRef;
use crate::sync::{AtomicU32, Ordering};
use std::cell::UnsafeCell;
use std::marker::PhantomData;

/// Not armed yet (a fresh segment is all zeros).
const UNARMED: u32 = 0;
/// Armed: the mutex is held by the rank's thread.
const ALIVE: u32 = 1;
/// Released after the close barrier.
const CLOSED: u32 = 2;
/// Released without `close` (the endpoint was dropped).
const LEFT: u32 = 3;
/// Found dead by a checker (the kernel marked the mutex owner-dead).
const DEAD: u32 = 4;

/// What a lifeline says about its rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Life {
    /// The rank has not armed its line yet (still starting).
    Unarmed,
    /// The rank's thread holds its line.
    Alive,
    /// The rank left after the close barrier released it.
    Closed,
    /// The rank dropped its endpoint without calling `close`.
    Left,
    /// The rank's thread ended (killed, crashed, exited) without releasing.
    Dead,
}

impl Life {
    /// Whether the rank is gone for good (closed, left or dead).
    pub fn is_gone(self) -> bool {
        matches!(self, Life::Closed | Life::Left | Life::Dead)
    }
}

/// One SMT id's lifeline: a state word and a process-shared robust mutex,
/// on a cache line of its own in the segment.
// Shared layout: a fixed `repr(C, align(64))`, not crossbeam's `CachePadded`
// (128 on x86_64, platform dependent), which the segment's offsets and
// every process mapping it must agree on (docs/architecture.md).
#[repr(C, align(64))]
pub struct LifeLine {
    state: AtomicU32,
    /// What the rank noted when it left while alive
    /// ([`LifeGuard::set_left_noting`]), 0 for nothing: read once the
    /// state word says `LEFT`.
    note: AtomicU32,
    mutex: UnsafeCell<libc::pthread_mutex_t>,
}

static_assertions::const_assert!(core::mem::size_of::<LifeLine>() == 64);

// SAFETY: the state word is atomic; the mutex is a process-shared pthread
// mutex, made for concurrent use by threads of several processes, and is
// only ever touched through pthread calls (never read or written as data).
unsafe impl Sync for LifeLine {}
// SAFETY: as above; a `&LifeLine` may be used from any thread (the owner's
// unlock goes through the non-`Send` `LifeGuard`).
unsafe impl Send for LifeLine {}

impl std::fmt::Debug for LifeLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LifeLine")
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

/// Arming failed: a pthread call refused (errno value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArmError {
    /// The pthread function.
    pub call: &'static str,
    /// Its error number.
    pub errno: i32,
}

impl LifeLine {
    /// The state word alone (no mutex access), Acquire.
    pub fn state(&self) -> Life {
        // SYNC POINT life-state (acquire side): pairs with the Release
        // stores of `arm`, `LifeGuard::drop` and `probe`'s DEAD.
        decode(self.state.load(Ordering::Acquire))
    }

    /// What the rank noted when it left ([`LifeGuard::set_left_noting`]),
    /// 0 for nothing. Meaningful once [`state`](Self::state) said `Left`:
    /// that Acquire load (SYNC POINT life-state) makes the note, stored
    /// before the state, visible. Relaxed: the value is only compared.
    pub fn left_note(&self) -> u32 {
        self.note.load(Ordering::Relaxed)
    }

    /// Arm `line` for the calling thread: initialise the mutex
    /// (process-shared, robust), lock it, publish `ALIVE`. The returned
    /// guard, which keeps the line mapped, unlocks it on this thread.
    ///
    /// # Safety
    /// The line must be unarmed and not used by anyone else until this
    /// returns (it is this rank's own line, armed once).
    ///
    /// # Errors
    /// [`ArmError`] if a pthread call fails (the line stays unarmed).
    pub(crate) unsafe fn arm(line: MapRef<LifeLine>) -> Result<LifeGuard, ArmError> {
        let m = line.mutex.get();
        let check = |call: &'static str, r: i32| {
            if r == 0 {
                Ok(())
            } else {
                Err(ArmError { call, errno: r })
            }
        };
        // SAFETY: (1) `attr` is initialised by `pthread_mutexattr_init`
        // before use and destroyed after; (2) the mutex memory is ours
        // alone until ALIVE is published (the caller's promise), so
        // initialising it races with nobody.
        unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            check(
                "pthread_mutexattr_init",
                libc::pthread_mutexattr_init(&mut attr),
            )?;
            let set = check(
                "pthread_mutexattr_setpshared",
                libc::pthread_mutexattr_setpshared(&mut attr, libc::PTHREAD_PROCESS_SHARED),
            )
            .and_then(|()| {
                check(
                    "pthread_mutexattr_setrobust",
                    libc::pthread_mutexattr_setrobust(&mut attr, libc::PTHREAD_MUTEX_ROBUST),
                )
            })
            .and_then(|()| check("pthread_mutex_init", libc::pthread_mutex_init(m, &attr)));
            libc::pthread_mutexattr_destroy(&mut attr);
            set?;
            check("pthread_mutex_lock", libc::pthread_mutex_lock(m))?;
        }
        // SYNC POINT life-state (release side): the initialised, held mutex
        // is visible to whoever sees ALIVE.
        line.state.store(ALIVE, Ordering::Release);
        Ok(LifeGuard {
            line,
            closed: false,
            left: false,
            _owner: PhantomData,
        })
    }

    /// Ask whether the line's rank lives: the state word, and while it says
    /// alive, a `trylock` of its mutex (busy: alive; owner-dead: the rank
    /// died, recorded as `DEAD` for every later reader).
    pub fn probe(&self) -> Life {
        let s = self.state();
        if s != Life::Alive {
            return s;
        }
        let m = self.mutex.get();
        // SAFETY: ALIVE was seen with Acquire, so the mutex is initialised;
        // it is process-shared and robust, made for exactly this call.
        let r = unsafe { libc::pthread_mutex_trylock(m) };
        match r {
            libc::EBUSY => Life::Alive,
            libc::EOWNERDEAD => {
                self.mark_dead();
                // SAFETY: we hold the mutex (EOWNERDEAD acquires it): make
                // it consistent and unlock it, so it leaves this thread's
                // robust list at once.
                unsafe {
                    libc::pthread_mutex_consistent(m);
                    libc::pthread_mutex_unlock(m);
                }
                Life::Dead
            }
            0 => {
                // Acquired: the owner released it, after storing why (read
                // again below); give it back at once.
                // SAFETY: we hold it.
                unsafe { libc::pthread_mutex_unlock(m) };
                match self.state() {
                    // Unlocked while still "alive": only another checker
                    // passing through (it stores DEAD first), or a corrupt
                    // line; ask again next time.
                    Life::Alive => Life::Alive,
                    s => s,
                }
            }
            libc::ENOTRECOVERABLE => {
                self.mark_dead();
                Life::Dead
            }
            // EINVAL and friends: the line was overwritten; nothing can be
            // concluded from it.
            _ => Life::Alive,
        }
    }

    fn mark_dead(&self) {
        // Only ALIVE becomes DEAD: an orderly CLOSED or LEFT stays.
        // SYNC POINT life-state (release side).
        let _ = self
            .state
            .compare_exchange(ALIVE, DEAD, Ordering::Release, Ordering::Relaxed);
    }
}

fn decode(v: u32) -> Life {
    match v {
        UNARMED => Life::Unarmed,
        ALIVE => Life::Alive,
        CLOSED => Life::Closed,
        LEFT => Life::Left,
        DEAD => Life::Dead,
        // Anything else was written by nobody we know: count it as alive,
        // the mutex will tell.
        _ => Life::Alive,
    }
}

/// The owner's hold on its armed line. Dropping it (on the owning thread)
/// stores `CLOSED` (after [`set_closed`](Self::set_closed)) or `LEFT`, then
/// unlocks the mutex.
pub struct LifeGuard {
    /// The line, and with it the mapping, held until the unlock.
    line: MapRef<LifeLine>,
    closed: bool,
    /// [`set_left`](Self::set_left) was called: `LEFT` for good.
    left: bool,
    /// Neither `Send` nor `Sync`: only the thread that locked may unlock.
    _owner: PhantomData<*const ()>,
}

impl std::fmt::Debug for LifeGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LifeGuard")
            .field("closed", &self.closed)
            .finish()
    }
}

impl LifeGuard {
    /// The close barrier released this rank: leaving from now on is
    /// orderly, whether by dropping the endpoint or by exiting.
    /// Whether [`set_closed`](Self::set_closed) was called.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    pub fn set_closed(&mut self) {
        if self.left {
            return;
        }
        self.closed = true;
        // SYNC POINT life-state (release side). Stored now, not at drop:
        // a process that exits right after `close` without dropping its
        // endpoint has still left in order.
        self.line.state.store(CLOSED, Ordering::Release);
    }
}

impl LifeGuard {
    /// This rank gives up its part in the job while it keeps its
    /// endpoint: `LEFT` is stored now, as a drop without `close` would
    /// store it, so that every peer takes the rank as gone (and a
    /// position it claimed on a shared queue and never wrote is reported
    /// as a hole, see `holes`). For good: a later
    /// [`set_closed`](Self::set_closed) or drop keeps `LEFT`. The mutex
    /// stays held until the drop (the state word is read first).
    pub fn set_left(&mut self) {
        self.set_left_noting(0);
    }

    /// As [`set_left`](Self::set_left), leaving `note` for the peers to
    /// read ([`LifeLine::left_note`]; nonzero: what the rank gave up, as
    /// the caller encodes it). A later nonzero note replaces it.
    pub fn set_left_noting(&mut self, note: u32) {
        if note != 0 {
            // Relaxed: published by the state store below, which a
            // reader acquires before it reads this (SYNC POINT life-state).
            self.line.note.store(note, Ordering::Relaxed);
        }
        self.left = true;
        self.closed = false;
        // SYNC POINT life-state (release side), as in the drop.
        self.line.state.store(LEFT, Ordering::Release);
    }
}

impl Drop for LifeGuard {
    fn drop(&mut self) {
        let why = if self.closed { CLOSED } else { LEFT };
        // SYNC POINT life-state (release side): why we left, visible to a
        // checker that acquires the unlocked mutex or reads the word.
        self.line.state.store(why, Ordering::Release);
        // SAFETY: this thread locked the mutex in `arm` (the guard cannot
        // leave the thread), and the line is mapped while `self.line` is.
        unsafe { libc::pthread_mutex_unlock(self.line.mutex.get()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An unarmed line, alone in zeroed memory (a fresh segment).
    fn fresh_line() -> MapRef<LifeLine> {
        let map = super::super::mapping::Mapping::anon(4096).unwrap();
        // SAFETY: an all-zero LifeLine is its unarmed state.
        unsafe { map.view(0) }
    }

    #[test]
    fn a_held_line_is_alive_and_an_orderly_release_says_why() {
        let line = fresh_line();
        let mine = line.clone();
        assert_eq!(line.probe(), Life::Unarmed);
        let (armed_tx, armed_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<bool>();
        let t = std::thread::spawn(move || {
            // SAFETY: a fresh line, armed once.
            let mut g = unsafe { LifeLine::arm(mine) }.unwrap();
            armed_tx.send(()).unwrap();
            if go_rx.recv().unwrap() {
                g.set_closed();
            }
            drop(g);
        });
        armed_rx.recv().unwrap();
        for _ in 0..3 {
            assert_eq!(line.probe(), Life::Alive, "held by a live thread");
        }
        go_tx.send(false).unwrap();
        t.join().unwrap();
        assert_eq!(line.probe(), Life::Left);
        assert_eq!(line.probe(), Life::Left, "stays");
    }

    #[test]
    fn a_thread_that_ends_holding_its_line_is_dead() {
        let line = fresh_line();
        let mine = line.clone();
        std::thread::spawn(move || {
            // SAFETY: a fresh line, armed once.
            let g = unsafe { LifeLine::arm(mine) }.unwrap();
            // Ends without releasing, as a killed process would.
            std::mem::forget(g);
        })
        .join()
        .unwrap();
        assert_eq!(line.state(), Life::Alive, "nobody has looked yet");
        assert_eq!(line.probe(), Life::Dead);
        assert_eq!(line.state(), Life::Dead, "sticky in the word");
        assert_eq!(line.probe(), Life::Dead);
    }

    /// A rank that gave up its part while alive says `LEFT` at once, and
    /// a later close or drop does not turn it into an orderly leave.
    #[test]
    fn left_while_alive_is_left_for_good() {
        let line = fresh_line();
        let mine = line.clone();
        let (left_tx, left_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // SAFETY: a fresh line, armed once.
            let mut g = unsafe { LifeLine::arm(mine) }.unwrap();
            g.set_left();
            left_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            g.set_closed();
            assert!(!g.is_closed());
            drop(g);
        });
        left_rx.recv().unwrap();
        assert_eq!(line.probe(), Life::Left, "while the thread lives");
        go_tx.send(()).unwrap();
        t.join().unwrap();
        assert_eq!(line.probe(), Life::Left, "not closed after leaving");
    }

    #[test]
    fn closed_is_published_before_the_guard_goes() {
        let line = fresh_line();
        let mine = line.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // SAFETY: a fresh line, armed once.
            let mut g = unsafe { LifeLine::arm(mine) }.unwrap();
            g.set_closed();
            std::mem::forget(g); // exits right after close, no drop
            tx.send(()).unwrap();
        })
        .join()
        .unwrap();
        rx.recv().unwrap();
        assert_eq!(line.probe(), Life::Closed, "closed, then gone: orderly");
    }
}
