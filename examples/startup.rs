//! Start-up time of a job as the ranks see it: how long
//! `EndpointBuilder::from_env` (reading the launcher; under PMIx, also
//! connecting to the PMIx server) and `start` (the network wire-up —
//! rendezvous or PMIx exchange —, the segment, the connections, the
//! handler-table check) take on each rank. Rank 0 gathers every rank's
//! figures and prints the median and the maximum over ranks.
//!
//! ```sh
//! fmrun -n 4 --net tcp target/release/examples/startup --json
//! mpirun -n 4 -x FASTMSG_NET=tcp target/release/examples/startup --json   # feature pmix
//! srun --mpi=pmix -n 4 target/release/examples/startup --json
//! ```
//!
//! The launcher's own cost (spawning, its PMIx server) is outside these
//! figures: time the whole command for that.

use clap::Parser;
use fastmsg::{EndpointBuilder, Rank};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

#[derive(Parser, Debug)]
struct Args {
    /// One JSON object instead of a line of text.
    #[arg(long)]
    json: bool,
}

fn med(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let t0 = Instant::now();
    let mut b = EndpointBuilder::from_env()?;
    let env_s = t0.elapsed().as_secs_f64();
    let got: Rc<RefCell<Vec<(f64, f64)>>> = Rc::default();
    let g = got.clone();
    let report = b.register_fn("startup-report", move |_ctx, p| {
        let d = p.data();
        let env = f64::from_le_bytes(d[..8].try_into()?);
        let start = f64::from_le_bytes(d[8..16].try_into()?);
        g.borrow_mut().push((env, start));
        Ok(())
    });
    let launcher = format!("{:?}", b.config().job.launcher);
    let net = format!("{:?}", b.config().net.mode);
    let t1 = Instant::now();
    let mut ep = b.start()?;
    let start_s = t1.elapsed().as_secs_f64();
    ep.send(
        Rank(0),
        report,
        &[&env_s.to_le_bytes(), &start_s.to_le_bytes()],
    )?;
    if ep.rank().0 == 0 {
        let n = ep.size() as usize;
        ep.wait_until(|| got.borrow().len() == n)?;
        let all = got.borrow();
        let env: Vec<f64> = all.iter().map(|x| x.0 * 1e3).collect();
        let start: Vec<f64> = all.iter().map(|x| x.1 * 1e3).collect();
        let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
        if args.json {
            println!(
                "{{\"launcher\":\"{launcher}\",\"net\":\"{net}\",\"ranks\":{n},\"from_env_ms_median\":{:.3},\"from_env_ms_max\":{:.3},\"start_ms_median\":{:.3},\"start_ms_max\":{:.3}}}",
                med(env.clone()),
                max(&env),
                med(start.clone()),
                max(&start)
            );
        } else {
            println!(
                "{n} ranks under {launcher} (net {net}): from_env median {:.2} ms (max {:.2}), start median {:.2} ms (max {:.2})",
                med(env.clone()),
                max(&env),
                med(start.clone()),
                max(&start)
            );
        }
    }
    ep.close()?;
    Ok(())
}
