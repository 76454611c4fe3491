//! Two nodes for real on one machine: `scripts/two-nodes.sh` makes two
//! "nodes" (network, UTS and mount namespaces: host names `node1` and
//! `node2`, their own addresses, a private hosts file) and a head, and
//! runs fastmsg's multi-host rank programs under a two-node Slurm (`srun
//! --mpi=pmix`, `--mpi=pmi2`, `sbatch --nodes=2`), Open MPI's `mpirun`
//! (an `orted` on each node) and MPICH's `mpiexec` (a Hydra proxy on each
//! node), with nothing exported. [`two_nodes_under_every_launcher`] runs
//! the script (root only; it skips what is not installed).
//!
//! [`startup_rank`] is the rank program of the start-up timing: from the
//! launch (`FMTEST_T0`, the launch time in nanoseconds since the epoch,
//! set by the script) to after `start` and a barrier, printed by each
//! rank as `startup-ms <rank> <ms>`; `scripts/mpi_init_time.c` does the
//! same for MPI_Init + MPI_Barrier.

mod common;

use fastmsg::{EndpointBuilder, Rank};
use std::cell::Cell;
use std::process::Command;
use std::rc::Rc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The start-up timing's rank program (does nothing as an ordinary test).
#[test]
fn startup_rank() {
    if std::env::var_os("FMTEST_T0").is_none() {
        return;
    }
    let t0: u128 = std::env::var("FMTEST_T0")
        .unwrap()
        .parse()
        .expect("FMTEST_T0 in ns");
    let mut b = EndpointBuilder::from_env().expect("launcher environment");
    let arrived = Rc::new(Cell::new(0u32));
    let released = Rc::new(Cell::new(false));
    let (a, r) = (arrived.clone(), released.clone());
    let arrive = b.register_fn("arrive", move |_ctx, _p| {
        a.set(a.get() + 1);
        Ok(())
    });
    let release = b.register_fn("release", move |_ctx, _p| {
        r.set(true);
        Ok(())
    });
    let host = b.config().job.host.clone();
    let mut ep = b.start().expect("start");
    let (me, n) = (ep.rank().0, ep.size());
    if me == 0 {
        ep.wait_until(|| arrived.get() == n - 1).expect("arrivals");
        for d in 1..n {
            ep.send(Rank(d), release, &[b"go"]).expect("release");
        }
    } else {
        ep.send(Rank(0), arrive, &[b"here"]).expect("arrive");
        ep.wait_until(|| released.get()).expect("release");
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let ms = (now.as_nanos().saturating_sub(t0)) as f64 / 1e6;
    println!("startup-ms {me} {ms:.1} on {}", host);
    ep.close().expect("close");
}

/// The newest executable `<name>-<hash>` beside this test binary (cargo
/// puts every test executable of the workspace in one directory).
fn sibling(name: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let me = std::env::current_exe().ok()?;
    let prefix = format!("{name}-");
    std::fs::read_dir(me.parent()?)
        .ok()?
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with(&prefix) && !n.contains('.')
        })
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            let when = m.modified().ok()?;
            (m.is_file() && m.permissions().mode() & 0o111 != 0).then(|| (when, e.path()))
        })
        .max()
        .map(|(_, p)| p)
}

/// Run `scripts/two-nodes.sh` with this binary and its siblings (built by
/// `cargo test --test net_hosts --test net_collectives --test two_nodes`);
/// without them the script builds in a target directory of its own (this
/// test's cargo holds the lock of this one).
#[test]
fn two_nodes_under_every_launcher() {
    if common::launch::is_rank() || std::env::var_os("FMTEST_T0").is_some() {
        return;
    }
    // SAFETY: geteuid cannot fail and touches no memory.
    #[allow(unsafe_code)]
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root (namespaces, slurmd, munged)");
        return;
    }
    if std::env::var_os("FMTEST_TWO_NODES").is_none() {
        eprintln!(
            "skipped: set FMTEST_TWO_NODES=1 to run scripts/two-nodes.sh from here (minutes; .ci/run runs the script itself)"
        );
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/two-nodes.sh");
    let mut cmd = Command::new(script);
    match (sibling("net_hosts"), sibling("net_collectives")) {
        (Some(hosts), Some(coll)) => {
            cmd.env("FM_NET_HOSTS", hosts)
                .env("FM_NET_COLL", coll)
                .env("FM_TWO_NODES", std::env::current_exe().expect("own path"));
        }
        _ => {
            cmd.env(
                "CARGO_TARGET_DIR",
                concat!(env!("CARGO_MANIFEST_DIR"), "/target/two-nodes"),
            );
        }
    }
    let mut child = cmd.spawn().expect("start scripts/two-nodes.sh");
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > Duration::from_secs(1500) {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            std::thread::sleep(Duration::from_secs(10));
            let _ = child.kill();
            panic!("scripts/two-nodes.sh still running after 1500 s (killed)");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "scripts/two-nodes.sh: {status}");
}
