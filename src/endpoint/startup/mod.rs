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

pub(crate) mod fds;
pub(crate) mod hosts;
#[cfg(test)]
mod tests;

use super::config::Config;
use super::control::OP_TABLE;
use super::core::{Core, CoreSetup};
use super::handler::{encode_table, Registry};
use super::hook::Hook;
use super::net::Net;
use super::wait::{WaitConfig, WaitPolicy, Waiter};
use super::{ConnectMode, Endpoint, NetMode};
use crate::error::StartError;
use crate::id::Rank;
use crate::transport::rma::connect::LazyJob;
use crate::transport::shm::{ShmJob, ShmTransport};
use crate::transport::tcp::mesh::{self, MeshJob};
use crate::transport::tcp::NetTargets;
use crate::transport::AnyTransport;
use crate::window::WindowTable;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

/// Join the job with the handlers of `registry`, the windows of `windows`
/// and the idle `hooks` (see `EndpointBuilder::start` for the errors).
pub(super) fn start(
    config: Config,
    registry: Registry,
    windows: WindowTable,
    hooks: Vec<Hook>,
) -> Result<Endpoint, StartError> {
    config.validate()?;
    super::report::print_if_verbose(&config);
    registry.check_unique()?;
    registry.check_table_size()?;
    registry.check_defined()?;
    let mut job = config.job.clone();
    if config.net.mode == NetMode::Verbs {
        // Fail at once on a host without RDMA (or a build without it).
        crate::transport::verbs::probe()?;
    }
    if config.net.mode == NetMode::Ofi {
        // Fail at once where the provider is missing (or the build has no
        // libfabric transport).
        crate::transport::ofi::probe()?;
    }
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
    let shm = ShmTransport::connect(
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
            abort: config.abort.as_deref().or(watch.flag()),
        },
        &config.shm,
    )
    .map_err(|e| watch.explain(e.into()))?;
    drop(watch);
    let my_window = shm.own_window();
    let local = shm.local_ranks();
    // The watchdog's probes: local peers' lifelines, the network's
    // links (added below), the supervisor's abort flag.
    let mut probes: Vec<Box<dyn crate::watch::Probe>> = vec![Box::new(shm.life_probe())];
    if let Some(flag) = &config.abort {
        probes.push(Box::new(crate::watch::AbortProbe {
            flag: Arc::clone(flag),
            seen: false,
        }));
    }
    let mut transports = Vec::new();
    let mut route = vec![super::net::SHM; job.size as usize];
    let mut net_peers = Vec::new();
    if let Some(plan) = plan.filter(|p| !p.peers.is_empty()) {
        let mesh_job = MeshJob {
            me: job.rank,
            size: job.size,
            job: &job.job,
            secret: &plan.secret,
            params: [
                u64::from(plan.geometry.slots),
                u64::from(plan.geometry.slot_bytes),
            ],
            timeout: config.timeout,
        };
        let targets = NetTargets {
            window: my_window.clone(),
            bell: sleeps.then(|| shm.doorbell_ref()),
        };
        // Lazy set-up: the TCP transport connects each pair on first use
        // (libfabric and verbs keep the full mesh: their set-up is
        // collective, see docs/scale.md).
        let lazy = config.net.connect == ConnectMode::Lazy
            && !matches!(config.net.mode, NetMode::Ofi | NetMode::Verbs);
        let links = if lazy {
            Vec::new()
        } else {
            mesh::connect(&plan.listener, &mesh_job, &plan.peers)?
        };
        if config.net.mode == NetMode::Ofi {
            #[cfg(feature = "ofi")]
            {
                // The endpoint listens where peers reached us.
                let node = links
                    .first()
                    .and_then(|l| l.1.local_addr().ok())
                    .map(|a| a.ip());
                let wire = crate::transport::ofi::open(
                    job.rank.0,
                    job.size,
                    node,
                    links.len(),
                    plan.geometry.slots,
                )?;
                let t = crate::transport::OfiTransport::new(
                    wire,
                    job.size,
                    plan.geometry,
                    links,
                    targets,
                    config.net.dead_after,
                )?;
                net_peers = t.peers();
                transports.push(AnyTransport::Ofi(t));
            }
        } else if config.net.mode == NetMode::Verbs {
            #[cfg(feature = "verbs")]
            {
                let wire =
                    crate::transport::verbs::VerbsWire::open(links.len(), plan.geometry.slots)?;
                let v = crate::transport::VerbsTransport::new(
                    wire,
                    job.size,
                    plan.geometry,
                    links,
                    targets,
                    config.net.dead_after,
                )?;
                net_peers = v.peers();
                transports.push(AnyTransport::Verbs(v));
            }
        } else {
            let tcp = if lazy {
                let lazy_job = LazyJob {
                    me: job.rank,
                    size: job.size,
                    job: job.job.clone(),
                    secret: plan.secret.clone(),
                    params: mesh_job.params,
                    timeout: config.timeout,
                    dead_after: config.net.dead_after,
                };
                crate::transport::tcp::start_lazy(
                    job.rank,
                    job.size,
                    plan.geometry,
                    plan.peers.clone(),
                    plan.listener,
                    lazy_job,
                    targets,
                )
            } else {
                crate::transport::tcp::start(
                    job.rank,
                    job.size,
                    plan.geometry,
                    links,
                    targets,
                    config.net.dead_after,
                )
            }
            .map_err(|source| crate::error::ConnectError::Io {
                op: if lazy {
                    "set up the network transport (rings, NIC and accepting threads) of"
                } else {
                    "set up the network transport (rings, NIC thread) of"
                },
                peer: format!("rank {}", job.rank),
                source,
            })?;
            net_peers = tcp.peers();
            if let Some(probe) = tcp.link_probe() {
                probes.push(Box::new(probe));
            }
            transports.push(AnyTransport::Tcp(tcp));
        }
    }
    let has_network = !transports.is_empty();
    // Local peers go through shm (route SHM, the default); peers
    // reached over the network (other hosts; with FASTMSG_NET forced,
    // this host's too) through the network transport, index 1.
    for r in &net_peers {
        route[r.index()] = 1;
    }
    let mut net = Net::new(transports, shm, route);
    let mut names = registry.names().to_vec();
    names.extend(windows.describe());
    // An RDMA network transport (verbs, ofi) counts as a second busy
    // thread per rank, as it did when TCP's NIC thread placed every
    // record. TCP's NIC thread now sleeps while its rank polls (the rank
    // reads its own sockets) and works only while the rank sleeps or
    // stands still, so TCP ranks count one thread each.
    let nic_busy = has_network && matches!(config.net.mode, NetMode::Verbs | NetMode::Ofi);
    let threads_per_rank = if nic_busy { 2 } else { 1 };
    let oversubscribed = crate::topology::Cpus::probe().oversubscribed(
        job.local_size,
        threads_per_rank,
        job.launcher,
    );
    // RDMA writes ring no doorbell, and a rank asleep drives no libfabric
    // progress: under verbs and ofi `auto` never sleeps (a sleeper would
    // notice arrivals only at its time-out).
    let rings_no_bell = matches!(config.net.mode, NetMode::Verbs | NetMode::Ofi);
    let may_sleep = sleeps && !(rings_no_bell && config.wait == WaitPolicy::Auto);
    let wait = WaitConfig::resolve(config.wait, oversubscribed, may_sleep);
    tracing::debug!(
        "wait policy {:?}, oversubscribed: {oversubscribed} ({} local ranks, {threads_per_rank} busy thread(s) each)",
        config.wait,
        job.local_size
    );
    let watchdog = crate::watch::Watchdog::start(format!("fastmsg-watch-{}", job.rank), probes)
        .map_err(|source| crate::error::ConnectError::Io {
            op: "start the watchdog thread for",
            peer: format!("rank {}", job.rank),
            source,
        })?;
    net.shm.set_alarm(watchdog.alarm_handle());
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
    };
    let core = Rc::new(Core::new(job.rank, job.size, net, registry, setup));
    let ep = Endpoint { core };
    if job.rank.0 == 0 {
        ep.core.control.borrow_mut().set_own_table(names.clone());
    }
    ep.core
        .send_control(Rank(0), OP_TABLE, &encode_table(&names));
    let started = Instant::now();
    let mut waiter = Waiter::new();
    loop {
        let verdict = ep.core.control.borrow_mut().verdict.take();
        if let Some(v) = verdict {
            v.into_result()?;
            tracing::info!(
                "rank {} of {} started (job {}, {} on this host, launcher {:?}, network: {has_network})",
                job.rank,
                job.size,
                job.job,
                job.local_size,
                job.launcher
            );
            return Ok(ep);
        }
        if started.elapsed() > config.timeout {
            return Err(StartError::Timeout {
                waited: started.elapsed(),
                what: "rank 0's verdict on the handler tables",
            });
        }
        let core = &ep.core;
        core.progress_round(&mut waiter, &mut || core.control.borrow().verdict.is_some())?;
    }
}
