//! The library never measures the copy strategies or writes a file behind
//! the user's back: without a stored plan, a job that sends large messages
//! uses plain copies and leaves the cache directory as it found it (the
//! plan is tuned and stored only by `fmbench tune-copy` or
//! `FASTMSG_COPY=tune`).
//!
//! One test in this binary: it sets the process environment before any
//! endpoint exists, so no other test can race with it.

use fastmsg::threads;
use fastmsg::Rank;
use std::cell::Cell;
use std::rc::Rc;

#[test]
fn a_job_writes_no_copy_plan() {
    let cache = std::env::temp_dir().join(format!("fastmsg-copy-plan-{}", std::process::id()));
    std::fs::create_dir_all(&cache).unwrap();
    std::env::set_var("XDG_CACHE_HOME", &cache);
    std::env::remove_var("FASTMSG_COPY");

    let big = vec![7u8; 256 * 1024];
    let sums = threads::run(
        2,
        |_| {},
        |mut b| {
            let got = Rc::new(Cell::new(0u64));
            let g = Rc::clone(&got);
            let h = b.register_fn("sum", move |_c, p| {
                g.set(g.get() + p.data().iter().map(|&x| u64::from(x)).sum::<u64>());
                Ok(())
            });
            let mut ep = b.start()?;
            if ep.rank() == Rank(0) {
                ep.send(Rank(1), h, &[&big])?;
            } else {
                let want = 7 * big.len() as u64;
                ep.wait_until(|| got.get() == want)?;
            }
            let total = got.get();
            ep.close()?;
            Ok(total)
        },
    )
    .expect("the job");
    assert_eq!(sums, vec![0, 7 * big.len() as u64]);

    let left: Vec<_> = walk(&cache);
    let _ = std::fs::remove_dir_all(&cache);
    assert!(left.is_empty(), "the library wrote {left:?}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}
