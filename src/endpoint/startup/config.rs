//! Endpoint configuration: the job, transport tuning, waiting, time-outs.
//!
//! Every knob can be set from the environment (`FASTMSG_*`, documented in
//! the README's table) so a launched program needs no code changes to be
//! tuned; builders can also set them directly.

use crate::bootstrap::{JobInfo, Launcher};
use crate::endpoint::engine::wait_policy::WaitPolicy;
use crate::error::ConfigError;
use crate::sync::AtomicBool;
use crate::transport::net::NetRingConfig;
use crate::transport::shm::ShmConfig;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Everything an endpoint needs to join its job.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// Who we are in which job.
    pub job: JobInfo,
    /// Shared-memory transport settings.
    pub shm: ShmConfig,
    /// Network transport settings (multi-host jobs, `FASTMSG_NET`).
    pub net: NetConfig,
    /// How to wait when idle.
    pub wait: WaitPolicy,
    /// How long start-up may wait for peers.
    pub timeout: Duration,
    /// Where shared segments live.
    pub shm_dir: PathBuf,
    /// Set by a supervisor to make blocking calls give up
    /// (`ExtractError::Aborted`); used by [`crate::threads`].
    pub abort: Option<Arc<AtomicBool>>,
    /// How long `close` waits before saying which ranks have not called
    /// it, and a blocking collective of `fastmsg-handlers` before saying
    /// what it waits in (then again at each doubling); also how long a
    /// send, or any wait with sends parked, waits for credit from a peer
    /// that takes none of its messages before warning, naming the peer
    /// (then again at each doubling) (`FASTMSG_CLOSE_WARN`, seconds).
    pub close_warn: Duration,
    /// Bytes of sends this rank may keep parked (waiting for credit)
    /// before a send from outside any handler makes progress instead of
    /// parking more (`FASTMSG_MAX_PARKED`, bytes; 4 MiB by default). Sends
    /// from handlers and idle hooks never block: they park beyond it.
    pub max_parked: usize,
    /// The longest message [`Message::receive_vec`](crate::Message::receive_vec)
    /// allocates for: the length a message declares comes from its
    /// sender, so a longer one is refused with
    /// [`ReceiveError::TooLong`](crate::error::ReceiveError::TooLong)
    /// before anything is allocated (`FASTMSG_MAX_RECEIVE`, bytes; 1 GiB
    /// by default).
    pub max_receive: usize,
}

/// The default of [`Config::max_parked`]: 4 MiB.
pub const DEFAULT_MAX_PARKED: usize = 4 << 20;

/// The default of [`Config::max_receive`]: 1 GiB.
pub const DEFAULT_MAX_RECEIVE: usize = 1 << 30;

/// Which transport carries traffic between ranks (`FASTMSG_NET`): `auto`,
/// or the name of a network provider (`tcp`, `verbs`, `ofi`; the
/// configuration report lists them with what each finds on this host).
///
/// ```
/// use fastmsg::NetMode;
/// let tcp: NetMode = "tcp".parse()?;
/// assert_eq!(tcp, NetMode::named("tcp")?);
/// assert_eq!(tcp.to_string(), "tcp");
/// assert!("carrier-pigeon".parse::<NetMode>().is_err());
/// # Ok::<(), fastmsg::error::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum NetMode {
    /// Shared memory between ranks of a host; between hosts the first
    /// provider that may be chosen unnamed and probes usable (TCP).
    #[default]
    Auto,
    /// Every peer over the named provider, also on the same host (like
    /// `UCX_TLS=tcp`). Build it with [`NetMode::named`] or `parse`.
    Provider(&'static str),
}

impl NetMode {
    /// Every peer over the provider called `name`.
    ///
    /// # Errors
    /// [`ConfigError::BadEnv`] listing the providers, if none is called
    /// `name`.
    pub fn named(name: &str) -> Result<NetMode, ConfigError> {
        crate::transport::provider(name)
            .map(|p| NetMode::Provider(p.name()))
            .ok_or_else(|| crate::transport::unknown_provider(name))
    }

    /// The provider named, if any (`None` for `auto`).
    pub(in crate::endpoint) fn provider_name(&self) -> Option<&'static str> {
        match self {
            NetMode::Auto => None,
            NetMode::Provider(name) => Some(name),
        }
    }
}

impl std::fmt::Display for NetMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.provider_name().unwrap_or("auto"))
    }
}

impl std::str::FromStr for NetMode {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s {
            "auto" => Ok(NetMode::Auto),
            name => NetMode::named(name),
        }
    }
}

/// When network pairs connect (`FASTMSG_CONNECT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ConnectMode {
    /// Each pair on first use (a send, put or the peer's first contact):
    /// start-up costs one listener per rank, a rank holds connections only
    /// to the peers it talks to. Providers that cannot connect late
    /// (libfabric, verbs) connect the full mesh whatever this says.
    #[default]
    Lazy,
    /// Every pair at start (the full mesh).
    Eager,
}

impl std::str::FromStr for ConnectMode {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s {
            "lazy" => Ok(ConnectMode::Lazy),
            "eager" => Ok(ConnectMode::Eager),
            _ => Err(ConfigError::BadEnv {
                var: "FASTMSG_CONNECT",
                value: s.to_owned(),
                why: "expected lazy or eager".into(),
            }),
        }
    }
}

/// How ranks on different hosts (or, forced, all ranks) meet and talk.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NetConfig {
    /// The transport choice (`FASTMSG_NET`).
    pub mode: NetMode,
    /// Where rank 0 serves the rendezvous, `host:port` (`FASTMSG_ROOT`).
    /// Needed when ranks span hosts; on one host rank 0 picks a port.
    pub root: Option<String>,
    /// The job secret every connection proves (`FASTMSG_SECRET`, or the
    /// file `FASTMSG_SECRET_FILE`; never a command-line argument).
    pub secret: Option<String>,
    /// Ring geometry (`FASTMSG_NET_SLOTS`, `FASTMSG_NET_SLOT_SIZE`).
    pub rings: NetRingConfig,
    /// When pairs connect (`FASTMSG_CONNECT`): on first use or all at start.
    pub connect: ConnectMode,
    /// How long a peer's host may stay silent — answering no keepalive
    /// probe, acknowledging no data — before it is reported dead
    /// (`FASTMSG_NET_DEAD_AFTER_MS`; TCP connections; 3 s by default, see
    /// the trade-off at `crate::netio::alive::DEAD_AFTER`). A peer process
    /// that dies on a live host is reported at once, whatever this is. An
    /// idle connection is judged on keepalive probes, one a second at
    /// most, two unanswered: there a lost host takes at least 2 s.
    pub dead_after: Duration,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            mode: NetMode::default(),
            root: None,
            secret: None,
            rings: NetRingConfig::default(),
            connect: ConnectMode::default(),
            dead_after: crate::netio::alive::DEAD_AFTER,
        }
    }
}

fn env_num(var: &'static str) -> Result<Option<u64>, ConfigError> {
    match crate::settings::var(var) {
        Ok(v) if !v.is_empty() => {
            v.trim()
                .parse::<u64>()
                .map(Some)
                .map_err(|e| ConfigError::BadEnv {
                    var,
                    value: v,
                    why: e.to_string(),
                })
        }
        Err(std::env::VarError::NotUnicode(v)) => Err(ConfigError::BadEnv {
            var,
            value: v.to_string_lossy().into_owned(),
            why: "not valid UTF-8".into(),
        }),
        _ => Ok(None),
    }
}

/// The longest time-out (`FASTMSG_TIMEOUT`, `FASTMSG_CLOSE_WARN`): a year.
/// Longer ones would overflow deadline arithmetic (`Instant + Duration`).
pub(in crate::endpoint) const MAX_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);

/// Physical memory of this host in bytes (`u64::MAX` if unknown).
fn physical_memory() -> u64 {
    // SAFETY: sysconf only reads system parameters.
    #[allow(unsafe_code)]
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    match (u64::try_from(pages), u64::try_from(size)) {
        (Ok(p), Ok(s)) if p > 0 && s > 0 => p.saturating_mul(s),
        _ => u64::MAX,
    }
}

/// A switch: 0 or 1, nothing else (a 2 is a typo, not "on").
fn flag(var: &'static str, v: u64) -> Result<bool, ConfigError> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(ConfigError::BadEnv {
            var,
            value: v.to_string(),
            why: "expected 0 or 1".into(),
        }),
    }
}

/// The shortest `FASTMSG_NET_DEAD_AFTER_MS` that can work: keepalive
/// probes go out at most once a second (`TCP_KEEPIDLE` counts whole
/// seconds), so a live but idle host is silent for up to a second between
/// its answers; a shorter bound declares live peers dead.
pub(in crate::endpoint) const MIN_DEAD_AFTER_MS: u128 = 1000;

fn fits(var: &'static str, v: u64) -> Result<u32, ConfigError> {
    u32::try_from(v).map_err(|_| ConfigError::BadEnv {
        var,
        value: v.to_string(),
        why: "too large".into(),
    })
}

impl Config {
    /// Defaults for `job`.
    pub fn new(job: JobInfo) -> Config {
        Config {
            job,
            shm: ShmConfig::default(),
            net: NetConfig::default(),
            wait: WaitPolicy::Auto,
            timeout: Duration::from_secs(60),
            shm_dir: PathBuf::from("/dev/shm"),
            abort: None,
            close_warn: Duration::from_secs(10),
            max_parked: DEFAULT_MAX_PARKED,
            max_receive: DEFAULT_MAX_RECEIVE,
        }
    }

    /// The job from the launcher's environment, tuned by `FASTMSG_*`.
    ///
    /// # Errors
    /// [`ConfigError`] naming the missing or malformed variable.
    pub fn from_env() -> Result<Config, ConfigError> {
        crate::log::init();
        let job = JobInfo::from_env()?;
        crate::log::set_process_rank(job.rank.0);
        if job.rank.0 == 0 {
            // Once per job, not once per rank.
            crate::settings::warn_unknown_env();
        }
        Config::new(job).tuned_from_env()
    }

    /// Check `FASTMSG_COPY` and apply the tuning variables (`FASTMSG_QUEUES`, `FASTMSG_CREDITS`,
    /// `FASTMSG_FRAME_SIZE`, `FASTMSG_SHM_INLINE`, `FASTMSG_WAIT`,
    /// the switches `FASTMSG_VERBOSE_ENV` and `FASTMSG_STATS` (0 or 1),
    /// `FASTMSG_TIMEOUT`, `FASTMSG_SHM_DIR`, `FASTMSG_CLOSE_WARN`,
    /// `FASTMSG_MAX_PARKED`, `FASTMSG_MAX_RECEIVE`, and the
    /// network's
    /// `FASTMSG_NET`, `FASTMSG_ROOT`, `FASTMSG_SECRET` or
    /// `FASTMSG_SECRET_FILE` (see docs/security.md),
    /// `FASTMSG_NET_SLOTS`, `FASTMSG_NET_SLOT_SIZE`,
    /// `FASTMSG_NET_DEAD_AFTER_MS`) that are set.
    ///
    /// # Errors
    /// [`ConfigError::BadEnv`] naming the malformed variable.
    pub fn tuned_from_env(mut self) -> Result<Config, ConfigError> {
        // Read when the first copy settles the plan; checked here so that a
        // typo is an error at start, not a warning and plain copies.
        if let Ok(v) = crate::settings::var("FASTMSG_COPY") {
            crate::copy::check_env(&v).map_err(|_| ConfigError::BadEnv {
                var: "FASTMSG_COPY",
                value: v.clone(),
                why: crate::copy::EXPECTED.into(),
            })?;
        }
        if let Some(q) = env_num("FASTMSG_QUEUES")? {
            self.shm.queues = Some(fits("FASTMSG_QUEUES", q)?);
        }
        if let Some(w) = env_num("FASTMSG_CREDITS")? {
            self.shm.credits = fits("FASTMSG_CREDITS", w)?;
        }
        if let Some(f) = env_num("FASTMSG_FRAME_SIZE")? {
            self.shm.frame_size = fits("FASTMSG_FRAME_SIZE", f)?;
        }
        if let Some(i) = env_num("FASTMSG_SHM_INLINE")? {
            self.shm.inline = flag("FASTMSG_SHM_INLINE", i)?;
        }
        if let Some(v) = env_num(crate::settings::VERBOSE_VAR)? {
            flag(crate::settings::VERBOSE_VAR, v)?;
        }
        if let Some(v) = env_num("FASTMSG_STATS")? {
            flag("FASTMSG_STATS", v)?;
        }
        if let Ok(w) = crate::settings::var("FASTMSG_WAIT") {
            if !w.is_empty() {
                self.wait = w.parse()?;
            }
        }
        if let Some(t) = env_num("FASTMSG_TIMEOUT")? {
            self.timeout = Duration::from_secs(t);
        }
        if let Ok(n) = crate::settings::var("FASTMSG_NET") {
            if !n.is_empty() {
                self.net.mode = n.parse()?;
            }
        }
        if let Ok(c) = crate::settings::var("FASTMSG_CONNECT") {
            if !c.is_empty() {
                self.net.connect = c.parse()?;
            }
        }
        if let Ok(r) = crate::settings::var("FASTMSG_ROOT") {
            if !r.is_empty() {
                self.net.root = Some(r);
            }
        }
        if let Some(k) = crate::bootstrap::secret::secret_from_env()? {
            self.net.secret = Some(k);
        }
        if let Some(n) = env_num("FASTMSG_NET_SLOTS")? {
            self.net.rings.slots = fits("FASTMSG_NET_SLOTS", n)?;
        }
        if let Some(n) = env_num("FASTMSG_NET_SLOT_SIZE")? {
            self.net.rings.slot_bytes = fits("FASTMSG_NET_SLOT_SIZE", n)?;
        }
        if let Some(ms) = env_num("FASTMSG_NET_DEAD_AFTER_MS")? {
            self.net.dead_after = Duration::from_millis(ms);
        }
        if let Some(b) = env_num("FASTMSG_MAX_PARKED")? {
            self.max_parked = usize::try_from(b).unwrap_or(usize::MAX);
        }
        if let Some(b) = env_num("FASTMSG_MAX_RECEIVE")? {
            self.max_receive = usize::try_from(b).unwrap_or(usize::MAX);
        }
        if let Some(t) = env_num("FASTMSG_CLOSE_WARN")? {
            self.close_warn = Duration::from_secs(t.max(1));
        }
        if let Ok(d) = crate::settings::var("FASTMSG_SHM_DIR") {
            if !d.is_empty() {
                self.shm_dir = PathBuf::from(d);
            }
        }
        Ok(self)
    }

    /// Whether this job needs the network at all: ranks on other hosts,
    /// a forced network transport, or a rendezvous address.
    pub(in crate::endpoint) fn needs_network(&self) -> bool {
        let job = &self.job;
        job.size > 1
            && (job.local_size != job.size
                || self.net.mode != NetMode::Auto
                || self.net.root.is_some()
                || (has_store(job) && crate::settings::is_set("FASTMSG_HOST")))
    }

    /// The network rings' memory per rank (one receive ring, one credit
    /// line and one staging slot per network peer, at most every other
    /// rank) against this host's physical memory: settings inside the
    /// documented ranges can still ask for a terabyte together.
    fn check_net_memory(&self) -> Result<(), ConfigError> {
        if !self.needs_network() {
            return Ok(());
        }
        let Some(g) = self.net.rings.geometry() else {
            return Ok(()); // reported by `validate`
        };
        let peers = u64::from(self.job.size.saturating_sub(1));
        let asked = g
            .ring_bytes()
            .checked_add(64 + u64::from(g.slot_bytes))
            .and_then(|per| per.checked_mul(peers));
        let available = physical_memory();
        if asked.is_none_or(|a| a > available) {
            return Err(ConfigError::TooMuchMemory {
                what: "FASTMSG_NET_SLOTS x FASTMSG_NET_SLOT_SIZE x (ranks - 1)",
                asked,
                available,
            });
        }
        Ok(())
    }

    /// Check ranges that the transports do not check themselves.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.job.validate()?;
        let most = crate::transport::shm::layout::MAX_LOCAL_RANKS;
        if self.job.local_size > most {
            return Err(ConfigError::Invalid {
                what: "FASTMSG_LOCAL_SIZE",
                why: format!(
                    "{} ranks on one host; the engine takes 1 ..= {most} per host",
                    self.job.local_size
                ),
            });
        }
        if let Some(q) = self.shm.queues {
            if q == 0 || q > self.job.local_size {
                return Err(ConfigError::Invalid {
                    what: "FASTMSG_QUEUES",
                    why: format!(
                        "{q} queues per rank; must be 1 ..= {} (local ranks)",
                        self.job.local_size
                    ),
                });
            }
        }
        if self.shm.credits == 0 {
            return Err(ConfigError::Invalid {
                what: "FASTMSG_CREDITS",
                why: "0 credits can never send".into(),
            });
        }
        if self.net.rings.geometry().is_none() {
            return Err(ConfigError::Invalid {
                what: "FASTMSG_NET_SLOTS / FASTMSG_NET_SLOT_SIZE",
                why: format!(
                    "{} slots of {} bytes; need a power of two of 4 ..= 65536 slots of a multiple of 64 bytes in 64 ..= 16 MiB",
                    self.net.rings.slots, self.net.rings.slot_bytes
                ),
            });
        }
        // TCP_USER_TIMEOUT takes a positive C int of milliseconds.
        let ms = self.net.dead_after.as_millis();
        if !(MIN_DEAD_AFTER_MS..=i32::MAX as u128).contains(&ms) {
            return Err(ConfigError::Invalid {
                what: "FASTMSG_NET_DEAD_AFTER_MS",
                why: format!(
                    "{ms} ms; must be {MIN_DEAD_AFTER_MS} ..= {} (keepalive probes go out at most once a second: a shorter bound declares live idle hosts dead)",
                    i32::MAX
                ),
            });
        }
        if self.timeout.is_zero() {
            return Err(ConfigError::Invalid {
                what: "FASTMSG_TIMEOUT",
                why: "0 s: ranks could not wait for each other at all at start-up (at least 1)"
                    .into(),
            });
        }
        for (what, d) in [
            ("FASTMSG_TIMEOUT", self.timeout),
            ("FASTMSG_CLOSE_WARN", self.close_warn),
        ] {
            if d > MAX_WAIT {
                return Err(ConfigError::Invalid {
                    what,
                    why: format!(
                        "{} s is more than {} s (a year): deadlines must stay countable",
                        d.as_secs(),
                        MAX_WAIT.as_secs()
                    ),
                });
            }
        }
        self.check_net_memory()?;
        if self.shm.frame_size < 64 || self.shm.frame_size % 64 != 0 {
            return Err(ConfigError::Invalid {
                what: "FASTMSG_FRAME_SIZE",
                why: format!(
                    "{} is not a multiple of 64 of at least 64",
                    self.shm.frame_size
                ),
            });
        }
        Ok(())
    }
}

/// Whether the launcher offers a key-value store for the wire-up: a PMIx
/// server or a PMI socket.
fn has_store(job: &JobInfo) -> bool {
    job.launcher == Launcher::Pmix || crate::bootstrap::pmi2::available()
}
