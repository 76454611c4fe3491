//! Start-up: everything `EndpointBuilder::start` does to join the job, in
//! order. A job that needs the network meets at the rendezvous first (or
//! wires up through the launcher's key-value store), which also says which
//! ranks share this host ([`hosts`]); then the shared-memory transport
//! attaches to the host's segment; then the network transport connects to
//! the other peers by rank order; then the engine is built and rank 0
//! checks every rank's handler table. Whatever points into the segment
//! (the network transport's NIC, the watchdog's probe, the waiter's
//! doorbell) holds a view that keeps it mapped: nothing here depends on the
//! order in which they are dropped.
//!
//! The room also holds what start-up reads: the builder that collects
//! handlers, windows and hooks ([`builder`]), the configuration and its
//! environment variables ([`config`]) and the report of both
//! ([`report`]). Promises: the configuration is checked before the job
//! is joined; what goes wrong is a typed [`StartError`]; and once
//! `start` returns, every rank registered the same handlers in the same
//! order.
//!
//! Its files import only down this table (`scripts/layers.py check`):
//!
//! ```text
//! layers:begin
//! builder report hosts fds | the builder; the report; the host map and
//!                          | rendezvous; the descriptor limit
//! config                   | the configuration and its environment
//! layers:end
//! ```

pub(in crate::endpoint) mod builder;
pub(in crate::endpoint) mod config;
pub(in crate::endpoint) mod fds;
pub(in crate::endpoint) mod hosts;
pub(crate) mod report;
#[cfg(test)]
mod tests;

use crate::bootstrap::JobInfo;
use crate::endpoint::engine::control::OP_TABLE;
use crate::endpoint::engine::core::{Core, CoreSetup};
use crate::endpoint::engine::core::{HandlerTable, Hook};
use crate::endpoint::engine::handler::encode_table;
use crate::endpoint::engine::net::Net;
use crate::endpoint::engine::wait_policy::{WaitConfig, WaitPolicy};
use crate::endpoint::startup::config::Config;
use crate::endpoint::startup::config::ConnectMode;
use crate::endpoint::wait::Waiter;
use crate::endpoint::Endpoint;
use crate::error::{ConnectError, ExtractError, SegmentError, StartError};
use crate::id::Rank;
use crate::transport::net::provider::{Caps, OpenPlan};
use crate::transport::net::NetTargets;
use crate::transport::shm::{ShmJob, ShmTransport};
use crate::transport::{AnyTransport, NetTransport};
use crate::watch::Probe;
use crate::window::WindowTable;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

/// Join the job with the handlers of `registry`, the windows of `windows`
/// and the idle `hooks` (see `EndpointBuilder::start` for the errors).
pub(super) fn start(
    config: Config,
    registry: HandlerTable,
    windows: WindowTable,
    hooks: Vec<Hook>,
) -> Result<Endpoint, StartError> {
    let (dir, job) = (config.shm_dir.clone(), config.job.job.clone());
    let started = join(config, registry, windows, hooks);
    if let Err(e) = &started {
        // A peer killed during start-up left its host-identity
        // announcement behind (see `bootstrap::layout`): the failure may
        // name it (its lifeline said it died).
        let died = match e {
            StartError::Segment(SegmentError::RankGone { rank, .. }) => Some(*rank),
            StartError::Exchange(ExtractError::PeerDied { rank, .. }) => Some(rank.0),
            _ => None,
        };
        crate::bootstrap::layout::remove_stale_announcements(&dir, &job, died);
    }
    started
}

/// [`start`], less the clean-up after a failure.
fn join(
    config: Config,
    registry: HandlerTable,
    windows: WindowTable,
    hooks: Vec<Hook>,
) -> Result<Endpoint, StartError> {
    config.validate()?;
    crate::endpoint::startup::report::print_if_verbose(&config);
    registry.check_unique()?;
    registry.check_table_size()?;
    registry.check_defined()?;
    // Fail at once, before the rendezvous, where the provider named
    // cannot run here (no device, no library, not built).
    let provider = crate::transport::choose(config.net.mode.provider_name())?;
    let mut job = config.job.clone();
    // A job that needs the network meets at the rendezvous first: the
    // job table says which ranks share this host.
    let plan = if hosts::needs_network(&config) {
        fds::ensure(job.size)?;
        Some(hosts::meet(&config, &mut job)?)
    } else {
        None
    };
    let sleeps = WaitConfig::sleeps(config.wait);
    // Host identities that contradict the launcher fail the wait at once.
    let watch = crate::bootstrap::layout::Watch::start(&config.shm_dir, &job, plan.is_none())?;
    let shm =
        attach_shm(&config, &job, &windows, sleeps, watch.flag()).map_err(|e| watch.explain(e))?;
    drop(watch);
    let mut probes = watch_probes(&config, &shm);
    let (my_window, local) = (shm.own_window(), shm.local_ranks());
    let mut wide: Vec<AnyTransport> = Vec::new();
    if let Some(plan) = plan.filter(|p| !p.peers.is_empty()) {
        let caps = provider.caps();
        let targets = NetTargets {
            window: my_window.clone(),
            bell: sleeps.then(|| shm.doorbell_ref()),
        };
        let t = provider.open(open_plan(&config, &job, plan, caps, targets))?;
        probes.extend(t.watch_probe());
        wide.push(t);
    }
    let caps = (!wide.is_empty()).then(|| provider.caps());
    let wait = wait_config(&config, &job, caps, sleeps);
    let watchdog = crate::watch::Watchdog::start(format!("fastmsg-watch-{}", job.rank), probes)
        .map_err(|source| ConnectError::Io {
            op: "start the watchdog thread for",
            peer: format!("rank {}", job.rank),
            source,
        })?;
    let mut names = registry.names().to_vec();
    names.extend(windows.describe());
    let mut net = routed(job.size, wide, shm);
    net.shm_mut().set_alarm(watchdog.alarm_handle());
    let setup = CoreSetup {
        wait,
        abort: config.abort.clone(),
        windows,
        my_window,
        local,
        watchdog,
        close_warn: config.close_warn,
        hooks,
        max_parked: config.max_parked,
        max_receive: config.max_receive,
    };
    let ep = Endpoint {
        core: Rc::new(Core::new(job.rank, job.size, net, registry, setup)),
    };
    check_tables(&ep, names, &config)?;
    tracing::info!(
        "rank {} of {} started (job {}, {} on this host, launcher {:?}, network: {})",
        job.rank,
        job.size,
        job.job,
        job.local_size,
        job.launcher,
        caps.is_some()
    );
    Ok(ep)
}

/// Attach to the host's shared segment.
fn attach_shm(
    config: &Config,
    job: &JobInfo,
    windows: &WindowTable,
    sleeps: bool,
    contradiction: Option<&crate::sync::AtomicBool>,
) -> Result<ShmTransport, StartError> {
    Ok(ShmTransport::connect(
        &ShmJob {
            dir: &config.shm_dir,
            job: &job.job,
            host: &job.host,
            rank: job.rank,
            world: job.size,
            local_rank: job.local_rank,
            local_size: job.local_size,
            doorbells: sleeps,
            timeout: config.timeout,
            window_bytes: windows.bytes(),
            abort: config.abort.as_deref().or(contradiction),
        },
        &config.shm,
    )?)
}

/// The watchdog's probes: local peers' lifelines, the supervisor's abort
/// flag (the network transport adds its own).
fn watch_probes(config: &Config, shm: &ShmTransport) -> Vec<Box<dyn Probe>> {
    let mut probes: Vec<Box<dyn Probe>> = vec![
        Box::new(shm.life_probe()),
        Box::new(crate::watch::Tick::new()),
    ];
    if let Some(flag) = &config.abort {
        probes.push(Box::new(crate::watch::AbortProbe {
            flag: Arc::clone(flag),
            seen: false,
        }));
    }
    probes
}

/// What the provider opens the network transport from.
fn open_plan(
    config: &Config,
    job: &JobInfo,
    plan: hosts::NetPlan,
    caps: Caps,
    targets: NetTargets,
) -> OpenPlan {
    OpenPlan {
        me: job.rank,
        size: job.size,
        job: job.job.clone(),
        secret: plan.secret,
        geometry: plan.geometry,
        listener: plan.listener,
        peers: plan.peers,
        timeout: config.timeout,
        dead_after: config.net.dead_after,
        // Lazy set-up where the wire connects late (others keep the full
        // mesh: their set-up is collective, see docs/scale.md).
        lazy: config.net.connect == ConnectMode::Lazy && caps.lazy_connect,
        targets,
    }
}

/// The wait policy, from the setting and what the network transport (its
/// capabilities `caps`, `None` without one) does.
fn wait_config(config: &Config, job: &JobInfo, caps: Option<Caps>, sleeps: bool) -> WaitConfig {
    // A wire whose placing keeps a thread busy counts two busy threads
    // per rank.
    let threads_per_rank = if caps.is_some_and(|c| c.busy_thread) {
        2
    } else {
        1
    };
    let oversubscribed = crate::topology::Cpus::probe().oversubscribed(
        job.local_size,
        threads_per_rank,
        job.launcher,
    );
    // Arrivals that ring no doorbell (RDMA writes, a provider progressed
    // only by its poll) would be noticed by a sleeper only at its
    // time-out: then `auto` never sleeps.
    let rings_no_bell = caps.is_some_and(|c| !c.rings_doorbell);
    let may_sleep = sleeps && !(rings_no_bell && config.wait == WaitPolicy::Auto);
    tracing::debug!(
        "wait policy {:?}, oversubscribed: {oversubscribed} ({} local ranks, {threads_per_rank} busy thread(s) each)",
        config.wait,
        job.local_size
    );
    WaitConfig::resolve(config.wait, oversubscribed, may_sleep)
}

/// The engine's transports and routes: local peers through shm (route
/// SHM, the default), peers the network transport reaches (other hosts;
/// with a provider named, this host's too) through it, index 1.
fn routed(size: u32, wide: Vec<AnyTransport>, shm: ShmTransport) -> Net {
    let mut route = vec![crate::endpoint::engine::net::SHM; size as usize];
    for t in &wide {
        for r in t.peers() {
            route[r.index()] = 1;
        }
    }
    Net::new(wide, shm, route)
}

/// Send this rank's handler table (`names`) to rank 0 and wait for its
/// verdict on every rank's.
fn check_tables(ep: &Endpoint, names: Vec<String>, config: &Config) -> Result<(), StartError> {
    if ep.core.rank().0 == 0 {
        ep.core.control().borrow_mut().set_own_table(names.clone());
    }
    ep.core
        .send_control(Rank(0), OP_TABLE, &encode_table(&names));
    let started = Instant::now();
    let mut waiter = Waiter::new();
    loop {
        let verdict = ep.core.control().borrow_mut().take_verdict();
        if let Some(v) = verdict {
            return v.into_result();
        }
        if started.elapsed() > config.timeout {
            return Err(StartError::Timeout {
                waited: started.elapsed(),
                what: "rank 0's verdict on the handler tables",
            });
        }
        let core = &ep.core;
        core.progress_round(&mut waiter, &mut || {
            core.control().borrow().verdict().is_some()
        })?;
    }
}
