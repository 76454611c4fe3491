//! Running models, and asserting that loom catches a seeded mutant.

use fastmsg::internal::mutant::{self, Mutant};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

/// Preemption bound used when `LOOM_MAX_PREEMPTIONS` is not set.
pub const DEFAULT_PREEMPTIONS: usize = 3;

/// Explore every interleaving of `model` (and every value its loads may
/// read) within the preemption bound: `LOOM_MAX_PREEMPTIONS`, or
/// [`DEFAULT_PREEMPTIONS`]. Returns the number of executions explored
/// (also printed, for the record of state-space sizes). With `LOOM_LOG`
/// set, runs through `loom::model`, which prints loom's trace (and takes
/// every bound from the environment).
pub fn check(model: impl Fn() + Sync + Send + 'static) -> usize {
    check_bounded(usize::MAX, model)
}

/// As [`check`], with the preemption bound lowered to at most `max` (for
/// a model whose exploration does not end at higher bounds; its docs say
/// why).
pub fn check_bounded(max: usize, model: impl Fn() + Sync + Send + 'static) -> usize {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = {
        let runs = runs.clone();
        move || {
            runs.fetch_add(1, Relaxed);
            model();
        }
    };
    let mut builder = loom::model::Builder::new();
    let bound = builder.preemption_bound.unwrap_or(DEFAULT_PREEMPTIONS);
    builder.preemption_bound = Some(bound.min(max));
    let started = Instant::now();
    if std::env::var_os("LOOM_LOG").is_some() {
        loom::model(counted);
    } else {
        builder.check(counted);
    }
    let runs = runs.load(Relaxed);
    eprintln!(
        "loom: {runs} executions in {:.2?} (preemption bound {:?})",
        started.elapsed(),
        builder.preemption_bound
    );
    runs
}

/// What loom says when it finds each kind of failure.
pub mod says {
    /// Two accesses to a loom `UnsafeCell` not ordered by happens-before.
    pub const RACE: &str = "Causality violation";
    /// Every live thread is blocked.
    pub const DEADLOCK: &str = "deadlock";
}

/// Run `model` with mutant `m` switched on and assert that it fails with a
/// panic whose message contains one of `expect` (a loom report such as
/// [`says::RACE`], or one of the model's own assertion messages), so that a
/// mutant caught for an unrelated reason does not count.
///
/// # Panics
/// If loom explores every interleaving without a failure, or the failure
/// is not one of those expected.
pub fn assert_caught(m: Mutant, expect: &[&str], model: impl Fn() + Sync + Send + 'static) {
    quiet_expected_panics();
    let result = catch_unwind(AssertUnwindSafe(|| mutant::with(m, || check(model))));
    let Err(payload) = result else {
        panic!("mutant {m:?} survived: loom explored every interleaving without a failure");
    };
    let msg = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("<non-string panic>");
    assert!(
        expect.iter().any(|e| msg.contains(e)),
        "mutant {m:?} failed, but not as expected {expect:?}: {msg}"
    );
    eprintln!("mutant {m:?} caught: {}", msg.lines().next().unwrap_or(""));
}

/// Spawn a loom thread running `body` on its own handle of `shared`.
///
/// When loom finds a deadlock it panics inside the thread that blocked
/// last, with no thread left active; if that thread then dropped a loom
/// object while unwinding (such as its `Arc`), loom would panic again and
/// abort the whole test binary. So the handle is released only when `body`
/// returns normally.
pub fn spawn_with<T, R>(
    shared: &loom::sync::Arc<T>,
    body: impl FnOnce(&T) -> R + 'static,
) -> loom::thread::JoinHandle<R>
where
    T: 'static,
    R: 'static,
{
    let handle = std::mem::ManuallyDrop::new(shared.clone());
    loom::thread::spawn(move || {
        let result = body(&handle);
        drop(std::mem::ManuallyDrop::into_inner(handle));
        result
    })
}

/// Print one line, not loom's report and a backtrace, for a panic raised
/// while a mutant is switched on in the panicking thread (the failure the
/// mutant test expects; it checks the message itself). Every other panic,
/// in this test or one running beside it, goes to the default hook.
fn quiet_expected_panics() {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| match mutant::active() {
            Some(m) => {
                let msg = info
                    .payload()
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| info.payload().downcast_ref::<&str>().copied());
                // A payload that is no message is the `generator` crate
                // (under loom's threads) unwinding one of its own, seen in
                // the link model's mutant runs: not a failure, not printed.
                if let Some(msg) = msg {
                    eprintln!(
                        "(mutant {m:?}: expected panic) {}",
                        msg.lines().next().unwrap_or("")
                    );
                }
            }
            None => default(info),
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The harness itself can fail: a mutant planted where the model never
    /// goes (a doorbell fence, in a model without a doorbell) survives, and
    /// `assert_caught` says so.
    #[test]
    #[should_panic(expected = "survived")]
    fn a_mutant_the_model_cannot_see_survives() {
        assert_caught(Mutant::SleeperNoFence, &[says::RACE], || {
            let a = loom::sync::Arc::new(loom::sync::atomic::AtomicU32::new(0));
            let b = a.clone();
            let t = loom::thread::spawn(move || b.store(1, std::sync::atomic::Ordering::Release));
            a.load(std::sync::atomic::Ordering::Acquire);
            t.join().unwrap();
        });
    }

    /// And a model whose failure is not the one expected does not count.
    #[test]
    #[should_panic(expected = "not as expected")]
    fn a_mutant_caught_for_another_reason_does_not_count() {
        assert_caught(Mutant::SleeperNoFence, &[says::DEADLOCK], || {
            panic!("an unrelated assertion");
        });
    }
}
