//! fmrun's command line.

use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "fmrun",
    version,
    about = "Start N ranks of a fastmsg program on this host",
    trailing_var_arg = true
)]
pub struct Args {
    /// Number of ranks.
    #[arg(short = 'n', long = "np", value_name = "N")]
    pub ranks: u32,
    /// Receive queues per rank (1 ..= N; default: N up to 16).
    #[arg(long, value_name = "M")]
    pub queues: Option<u32>,
    /// Wait policy when idle.
    #[arg(long, value_name = "POLICY", value_parser = ["spin", "yield", "sleep", "auto"])]
    pub wait: Option<String>,
    /// Credits per pair of ranks, in frames.
    #[arg(long, value_name = "FRAMES")]
    pub credits: Option<u32>,
    /// Payload bytes per shared-memory frame (multiple of 64).
    #[arg(long, value_name = "BYTES")]
    pub frame_size: Option<u32>,
    /// Seconds ranks wait for each other at start-up.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    /// Seconds between SIGTERM and SIGKILL when stopping ranks.
    #[arg(long, default_value_t = 2, value_name = "SECONDS")]
    pub grace: u64,
    /// Directory of the shared segment (default: FASTMSG_SHM_DIR, else
    /// /dev/shm).
    #[arg(long, value_name = "DIR")]
    pub shm_dir: Option<String>,
    /// Ranks in the whole job, over all hosts (default: -n).
    #[arg(long, value_name = "S")]
    pub size: Option<u32>,
    /// Global rank of this host's first rank.
    #[arg(long, default_value_t = 0, value_name = "K")]
    pub rank_offset: u32,
    /// Where rank 0 serves the rendezvous (needed when ranks span hosts).
    #[arg(long, value_name = "HOST:PORT")]
    pub root: Option<String>,
    /// A file holding the job secret every connection proves: owned by
    /// you, mode 0600 or stricter (default: FASTMSG_SECRET, else
    /// FASTMSG_SECRET_FILE, else a fresh random one for a one-host job).
    /// The ranks get it by environment, never on a command line.
    #[arg(long, value_name = "FILE")]
    pub secret_file: Option<String>,
    /// Refused: a secret on the command line is visible to every local
    /// user (ps). Use --secret-file or FASTMSG_SECRET.
    #[arg(long, value_name = "SECRET", hide = true)]
    pub secret: Option<String>,
    /// Job id, the same on every host (default: a fresh one; needed when
    /// ranks span hosts).
    #[arg(long, value_name = "ID")]
    pub job: Option<String>,
    /// This host's identity (FASTMSG_HOST; default: the host name).
    #[arg(long, value_name = "NAME")]
    pub host_id: Option<String>,
    /// Transport between ranks: auto (shm on a host, tcp between hosts),
    /// or a network provider, tcp, verbs or ofi (every pair over the
    /// network, like UCX_TLS).
    #[arg(long, value_name = "NET", value_parser = net_mode)]
    pub net: Option<String>,
    /// Prefix every line a rank prints with `[rank] ` (as mpirun's
    /// --tag-output).
    #[arg(long)]
    pub tag_output: bool,
    /// Program and its arguments.
    #[arg(required = true, value_name = "PROG")]
    pub command: Vec<String>,
}

impl Args {
    /// Check the tuning options by the library's own rules before any
    /// rank starts (each rank would otherwise refuse the value itself,
    /// once per rank): an error names the option, what is wrong, and the
    /// variable it sets.
    ///
    /// # Errors
    /// The option and why, in words.
    pub fn check_tuning(&self) -> Result<(), String> {
        use fastmsg::bootstrap::{JobInfo, Launcher};
        let job = JobInfo::single_host(0, self.ranks, "fmrun-check", Launcher::Fmrun);
        let mut c = fastmsg::Config::new(job);
        let options = [
            ("FASTMSG_CREDITS", "--credits", self.credits.is_some()),
            (
                "FASTMSG_FRAME_SIZE",
                "--frame-size",
                self.frame_size.is_some(),
            ),
            ("FASTMSG_TIMEOUT", "--timeout", self.timeout.is_some()),
        ];
        if let Some(v) = self.credits {
            c.shm.credits = v;
        }
        if let Some(v) = self.frame_size {
            c.shm.frame_size = v;
        }
        if let Some(v) = self.timeout {
            c.timeout = std::time::Duration::from_secs(v);
        }
        match c.validate() {
            Err(fastmsg::error::ConfigError::Invalid { what, why }) => {
                let flag = options
                    .iter()
                    .find(|o| o.0 == what && o.2)
                    .map_or(String::new(), |o| format!("{} ", o.1));
                Err(format!("{flag}{why} ({what})"))
            }
            Err(e) => Err(e.to_string()),
            Ok(()) => Ok(()),
        }
    }
}

/// A `--net` value the library accepts (`auto` or a provider's name).
fn net_mode(s: &str) -> Result<String, String> {
    s.parse::<fastmsg::NetMode>()
        .map(|_| s.to_owned())
        .map_err(|e| e.to_string())
}
