//! Start-up time and memory of a job as the ranks see it: how long
//! `EndpointBuilder::from_env` (reading the launcher; under PMIx, also
//! connecting to the PMIx server) and `start` (the network wire-up —
//! rendezvous or PMIx exchange —, the segment, the connections, the
//! handler-table check) take on each rank, and what each rank holds in
//! memory once started (its own `/proc/self/smaps`, read right after
//! `start` — no sampling race), split into the shared segment, the
//! network ring regions `start` created and the rest ([`memory`]). Rank 0
//! gathers every rank's figures and prints the median and the maximum
//! over ranks, with the segment file's size and allocation and the host's
//! TCP socket memory at that moment, and how many network connections
//! each rank holds (with lazy connections, `FASTMSG_CONNECT=lazy`, those
//! it used: rank 0's star of start-up, and the traffic's peers).
//!
//! ```sh
//! fmrun -n 4 --net tcp target/release/examples/startup --json
//! mpirun -n 4 -x FASTMSG_NET=tcp target/release/examples/startup --json   # feature pmix
//! srun --mpi=pmix -n 4 target/release/examples/startup --json
//! fmrun -n 16 --net tcp target/release/examples/startup --json --traffic 65536
//! ```
//!
//! `--traffic B` sends `--traffic-msgs` messages of B bytes to every other
//! rank after start and measures memory after they have all arrived: the
//! rings' pages then have been written, which shows what lazily touched
//! rings would cost once used.
//!
//! The launcher's own cost (spawning, its PMIx server) is outside these
//! figures: time the whole command for that. `scripts/startup-scale.sh`
//! runs this for several job sizes.

use clap::Parser;
use fastmsg::{EndpointBuilder, Rank};
use fastmsg_examples::memory;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

#[derive(Parser, Debug)]
struct Args {
    /// One JSON object instead of a line of text.
    #[arg(long)]
    json: bool,
    /// After start, send messages of this many bytes to every other rank
    /// (0: none) before memory is read.
    #[arg(long, default_value_t = 0)]
    traffic: usize,
    /// Messages per peer of `--traffic`.
    #[arg(long, default_value_t = 16)]
    traffic_msgs: u32,
}

/// One rank's figures, as sent to rank 0 (f64 each, little-endian).
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    from_env_ms: f64,
    start_ms: f64,
    /// KiB: the process before `start`, after it, and its split.
    pre_rss: f64,
    rss: f64,
    pss: f64,
    segment_rss: f64,
    segment_pss: f64,
    regions_rss: f64,
    regions_size: f64,
    rest_rss: f64,
    /// Network connections held when memory was read.
    connections: f64,
}

impl Sample {
    const FIELDS: usize = 11;

    fn encode(&self) -> Vec<u8> {
        self.fields().iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    fn fields(&self) -> [f64; Self::FIELDS] {
        [
            self.from_env_ms,
            self.start_ms,
            self.pre_rss,
            self.rss,
            self.pss,
            self.segment_rss,
            self.segment_pss,
            self.regions_rss,
            self.regions_size,
            self.rest_rss,
            self.connections,
        ]
    }

    fn decode(d: &[u8]) -> Result<Sample, String> {
        if d.len() != Self::FIELDS * 8 {
            return Err(format!(
                "a report of {} bytes, not {}",
                d.len(),
                Self::FIELDS * 8
            ));
        }
        let f = |i: usize| f64::from_le_bytes(d[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        Ok(Sample {
            from_env_ms: f(0),
            start_ms: f(1),
            pre_rss: f(2),
            rss: f(3),
            pss: f(4),
            segment_rss: f(5),
            segment_pss: f(6),
            regions_rss: f(7),
            regions_size: f(8),
            rest_rss: f(9),
            connections: f(10),
        })
    }
}

fn med(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

fn main() -> std::process::ExitCode {
    fastmsg_examples::exit_report(run())
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let t0 = Instant::now();
    let mut b = EndpointBuilder::from_env()?;
    let from_env_s = t0.elapsed().as_secs_f64();
    let got: Rc<RefCell<Vec<Sample>>> = Rc::default();
    let g = got.clone();
    let report = b.register_whole(
        "startup-report",
        Sample::FIELDS * 8,
        move |_ctx, _src, d| {
            g.borrow_mut().push(Sample::decode(d)?);
            Ok(())
        },
    );
    let arrived = Rc::new(Cell::new(0u64));
    let a = arrived.clone();
    let traffic = b.register_fn("startup-traffic", move |_ctx, p| {
        if p.is_last() {
            a.set(a.get() + 1);
        }
        Ok(())
    });
    let launcher = format!("{:?}", b.config().job.launcher);
    let net = format!("{:?}", b.config().net.mode);
    let shm_dir = b.config().shm_dir.clone();
    let before = memory::mappings();
    let t1 = Instant::now();
    let mut ep = b.start()?;
    let start_s = t1.elapsed().as_secs_f64();
    let n = ep.size();
    if args.traffic > 0 {
        let payload = vec![7u8; args.traffic];
        for _ in 0..args.traffic_msgs {
            for k in 1..n {
                let dest = Rank((ep.rank().0 + k) % n);
                ep.send(dest, traffic, &[&payload])?;
            }
        }
        let want = u64::from(args.traffic_msgs) * u64::from(n - 1);
        ep.wait_until(|| arrived.get() == want)?;
    }
    let split = memory::split(&memory::mappings(), &shm_dir, &memory::starts(&before));
    let sample = Sample {
        from_env_ms: from_env_s * 1e3,
        start_ms: start_s * 1e3,
        pre_rss: before.iter().map(|m| m.rss).sum::<u64>() as f64,
        rss: split.total.rss as f64,
        pss: split.total.pss as f64,
        segment_rss: split.segment.rss as f64,
        segment_pss: split.segment.pss as f64,
        regions_rss: split.regions.rss as f64,
        regions_size: split.regions.size as f64,
        rest_rss: split.rest_rss() as f64,
        connections: ep.network_connections().len() as f64,
    };
    ep.send(Rank(0), report, &[&sample.encode()])?;
    if ep.rank().0 == 0 {
        ep.wait_until(|| got.borrow().len() == n as usize)?;
        let all = got.borrow();
        let col = |f: fn(&Sample) -> f64| all.iter().map(f).collect::<Vec<f64>>();
        let mib = |kib: f64| kib / 1024.0;
        let seg = split
            .segment_range
            .as_deref()
            .and_then(memory::file_allocation);
        let sock = memory::tcp_sockstat();
        if args.json {
            let mut fields = vec![
                format!("\"launcher\":\"{launcher}\""),
                format!("\"net\":\"{net}\""),
                format!("\"ranks\":{n}"),
                format!("\"traffic_bytes\":{}", args.traffic),
            ];
            let mut put = |name: &str, v: f64| fields.push(format!("\"{name}\":{v:.3}"));
            for (name, f, to_mib) in [
                (
                    "from_env_ms",
                    (|s: &Sample| s.from_env_ms) as fn(&Sample) -> f64,
                    false,
                ),
                ("start_ms", |s| s.start_ms, false),
                ("pre_start_rss_mib", |s| s.pre_rss, true),
                ("rss_mib", |s| s.rss, true),
                ("pss_mib", |s| s.pss, true),
                ("segment_rss_mib", |s| s.segment_rss, true),
                ("segment_pss_mib", |s| s.segment_pss, true),
                ("regions_rss_mib", |s| s.regions_rss, true),
                ("regions_size_mib", |s| s.regions_size, true),
                ("rest_rss_mib", |s| s.rest_rss, true),
                ("connections", |s| s.connections, false),
            ] {
                let v = col(f);
                let (m, x) = (med(v.clone()), max(&v));
                let (m, x) = if to_mib { (mib(m), mib(x)) } else { (m, x) };
                put(&format!("{name}_median"), m);
                put(&format!("{name}_max"), x);
            }
            if let Some((alloc, len)) = seg {
                put("segment_file_mib", len as f64 / 1048576.0);
                put("segment_allocated_mib", alloc as f64 / 1048576.0);
            }
            if let Some((inuse, pages)) = sock {
                put("host_tcp_sockets", inuse as f64);
                put("host_tcp_buffer_kib", pages as f64 * 4.0);
            }
            println!("{{{}}}", fields.join(","));
        } else {
            let env = col(|s| s.from_env_ms);
            let start = col(|s| s.start_ms);
            println!(
                "{n} ranks under {launcher} (net {net}): from_env median {:.2} ms (max {:.2}), start median {:.2} ms (max {:.2}); per rank RSS median {:.1} MiB (segment {:.1}, rings {:.1}, rest {:.1}), PSS {:.1} MiB",
                med(env.clone()),
                max(&env),
                med(start.clone()),
                max(&start),
                mib(med(col(|s| s.rss))),
                mib(med(col(|s| s.segment_rss))),
                mib(med(col(|s| s.regions_rss))),
                mib(med(col(|s| s.rest_rss))),
                mib(med(col(|s| s.pss))),
            );
        }
    }
    ep.close()?;
    Ok(())
}
