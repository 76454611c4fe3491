//! The thread launcher: run the ranks of a job as threads of this process — for tests, examples
//! and experiments without a launcher. Each thread builds its own endpoint
//! exactly as a process would (it maps the same shared segment).
//!
//! ```
//! use fastmsg::threads;
//!
//! let sums = threads::run(3, |_cfg| {}, |mut b| {
//!     let got = std::rc::Rc::new(std::cell::Cell::new(0u32));
//!     let g = got.clone();
//!     let h = b.register("add", move |_ctx, mut m| {
//!         let g = g.clone();
//!         async move {
//!             let mut x = [0u8; 4];
//!             m.receive(&mut x).await?;
//!             g.set(g.get() + u32::from_le_bytes(x));
//!             Ok(())
//!         }
//!     });
//!     let mut ep = b.start()?;
//!     for r in 0..ep.size() {
//!         ep.send(fastmsg::Rank(r), h, &[&(ep.rank().0 + 1).to_le_bytes()])?;
//!     }
//!     ep.wait_until(|| got.get() == 1 + 2 + 3)?;
//!     ep.close()?;
//!     Ok(got.get())
//! }).unwrap();
//! assert_eq!(sums, vec![6, 6, 6]);
//! ```

use crate::bootstrap::{fresh_job_id, JobInfo, Launcher};
use crate::endpoint::{Config, EndpointBuilder};
use crate::error::Error;
use crate::id::Rank;
use crate::sync::{AtomicBool, Ordering};
use std::sync::Arc;

/// A rank of a threaded job failed.
#[derive(Debug, thiserror::Error)]
#[error("rank {rank} failed: {error}")]
pub struct RankError {
    /// The failing rank (the first to fail).
    pub rank: Rank,
    /// Its error.
    pub error: Error,
}

/// Run `ranks` ranks as threads. `configure` adjusts each rank's [`Config`]
/// (queues, window, wait policy…); `body` gets the rank's builder and
/// returns its result. Returns the results in rank order, or the first
/// rank's error; when one rank fails the others' blocking calls are aborted
/// (`ExtractError::Aborted`) instead of waiting for ever. A panic in a rank
/// is re-raised after all threads have ended. A rank whose thread cannot
/// be created (the OS refused it) is that rank's error, and the ranks
/// already started are aborted instead of waiting for it.
///
/// # Errors
/// [`RankError`] with the first failing rank.
pub fn run<T, C, F>(ranks: u32, configure: C, body: F) -> Result<Vec<T>, RankError>
where
    T: Send,
    C: Fn(&mut Config) + Sync,
    F: Fn(EndpointBuilder) -> Result<T, Error> + Sync,
{
    let job = fresh_job_id();
    let abort = Arc::new(AtomicBool::new(false));
    let results: Vec<std::thread::Result<Result<T, Error>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..ranks)
            .map(|r| {
                let mut cfg = Config::new(JobInfo::single_host(r, ranks, &job, Launcher::Threads));
                cfg.abort = Some(Arc::clone(&abort));
                configure(&mut cfg);
                let (body, abort) = (&body, &abort);
                let spawned = std::thread::Builder::new()
                    .name(format!("rank{r}"))
                    .spawn_scoped(s, move || {
                        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            body(EndpointBuilder::new(cfg))
                        }));
                        if !matches!(out, Ok(Ok(_))) {
                            abort.store(true, Ordering::Relaxed);
                        }
                        out
                    });
                if spawned.is_err() {
                    // The ranks already running would wait for this one
                    // until their start-up timeout: stop them now.
                    abort.store(true, Ordering::Relaxed);
                }
                spawned
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(r, h)| match h {
                Ok(h) => h.join().unwrap_or_else(Err),
                Err(e) => Ok(Err(Error::other(format!(
                    "could not start the thread of rank {r}: {e}"
                )))),
            })
            .collect()
    });
    let mut out = Vec::with_capacity(ranks as usize);
    let mut first_err: Option<RankError> = None;
    let mut panic = None;
    for (r, res) in results.into_iter().enumerate() {
        match res {
            Ok(Ok(v)) => out.push(v),
            Ok(Err(error)) => {
                // Prefer a root cause over what it triggered: the aborts,
                // and the other ranks' reports of the failed rank leaving.
                let rank_of = |e: &Error| match (e.is_abort(), e.is_peer_failure()) {
                    (false, false) => 0,
                    (false, true) => 1,
                    (true, _) => 2,
                };
                if first_err
                    .as_ref()
                    .is_none_or(|e| rank_of(&e.error) > rank_of(&error))
                {
                    first_err = Some(RankError {
                        rank: Rank(r as u32),
                        error,
                    });
                }
            }
            Err(p) => panic = panic.or(Some(p)),
        }
    }
    if let Some(p) = panic {
        std::panic::resume_unwind(p);
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}
