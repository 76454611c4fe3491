//! `fastmsg-info`: fastmsg's configuration report (like `ompi_info` or
//! `ucx_info -c`).
//!
//! Prints every `FASTMSG_*` setting with its effective value and where it
//! came from (default, environment, `fmrun` option, launcher), the
//! transports and RDMA devices available, the copy plan, and the CPU facts
//! the `auto` wait policy decides by. Run it as a program would run: by
//! hand (a one-rank job), or under a launcher to see what a rank sees,
//! e.g. `fmrun -n 4 --wait yield fastmsg-info` or `srun fastmsg-info`.
//! `FASTMSG_VERBOSE_ENV=1` makes rank 0 of any fastmsg program print the
//! same report when it starts.

use clap::Parser;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "fastmsg-info",
    version,
    about = "Print fastmsg's settings (value and source), transports, devices and CPU facts"
)]
struct Args {
    /// Print only the report of this rank (under a launcher; default: 0).
    #[arg(long, value_name = "RANK", default_value_t = 0)]
    rank: u32,
}

fn main() -> ExitCode {
    fastmsg::log::init_as("fastmsg-info");
    let args = Args::parse();
    match fastmsg::Config::from_env() {
        Ok(cfg) => {
            if cfg.job.rank.0 == args.rank {
                print!("{}", fastmsg::internal::launcher::report(&cfg));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fastmsg-info: {e}");
            ExitCode::FAILURE
        }
    }
}
