//! [`EndpointBuilder`]: register handlers, then `start`.
//!
//! `start` joins the job: a job that needs the network meets at the
//! rendezvous first (which also says which ranks share this host), then
//! the shared-memory transport attaches to the host's segment, then the
//! network transport connects to the other peers by rank order. The
//! network transport goes first in the endpoint's transport list: its NIC
//! thread writes into the segment, so it must be dropped before it.

#![allow(unsafe_code)]

use super::config::Config;
use super::control::OP_TABLE;
use super::core::{Core, CoreSetup};
use super::hook::Hook;
use super::net::Net;
use super::wait::{WaitConfig, Waiter};
use super::{Ctx, Endpoint, Message, Piece};
use crate::bootstrap::hosts;
use crate::endpoint::NetMode;
use crate::error::{ConfigError, StartError};
use crate::handler::{encode_table, whole, HandlerResult, Registry};
use crate::id::{HandlerId, Rank, WindowId};
use crate::transport::shm::{ShmJob, ShmTransport};
use crate::transport::tcp::mesh::{self, MeshJob};
use crate::transport::tcp::{NetTargets, TcpTransport};
use crate::transport::{AnyTransport, Transport};
use crate::window::WindowTable;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

/// Registers handlers, then joins the job with [`start`](Self::start).
///
/// ```no_run
/// use fastmsg::{EndpointBuilder, Rank};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut b = EndpointBuilder::from_env()?;          // fmrun, srun or mpirun
/// let hello = b.register("hello", |_ctx, mut msg| async move {
///     let text = msg.receive_vec().await?;
///     println!("from {}: {}", msg.source(), String::from_utf8_lossy(&text));
///     Ok(())
/// });
/// let mut ep = b.start()?;                           // tables checked equal
/// let next = Rank((ep.rank().0 + 1) % ep.size());
/// ep.send(next, hello, &[b"hi"])?;
/// # Ok(()) }
/// ```
pub struct EndpointBuilder {
    config: Config,
    registry: Registry,
    windows: WindowTable,
    hooks: Vec<Hook>,
}

impl std::fmt::Debug for EndpointBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointBuilder")
            .field("config", &self.config)
            .field("registry", &self.registry)
            .field("windows", &self.windows)
            .field("hooks", &self.hooks.len())
            .finish()
    }
}

impl EndpointBuilder {
    /// A builder for the job described by `config`.
    pub fn new(config: Config) -> Self {
        crate::log::init();
        crate::log::set_thread_rank(config.job.rank.0);
        EndpointBuilder {
            config,
            registry: Registry::default(),
            windows: WindowTable::default(),
            hooks: Vec::new(),
        }
    }

    /// A builder for the job this process was launched into
    /// ([`Config::from_env`]).
    ///
    /// # Errors
    /// [`ConfigError`] if no launcher environment is found or a `FASTMSG_*`
    /// variable is malformed.
    pub fn from_env() -> Result<Self, ConfigError> {
        Ok(EndpointBuilder::new(Config::from_env()?))
    }

    /// This rank.
    pub fn rank(&self) -> Rank {
        self.config.job.rank
    }

    /// Ranks in the job.
    pub fn size(&self) -> u32 {
        self.config.job.size
    }

    /// The configuration (may be adjusted before `start`).
    pub fn config_mut(&mut self) -> &mut Config {
        &mut self.config
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Register `handler` under `name`; ids are dense in registration order.
    /// Every rank must register the same names in the same order.
    ///
    /// The handler gets a [`Ctx`] (to send) and the [`Message`] (to receive
    /// from) and returns a future; it starts when the first fragment of a
    /// message arrives.
    pub fn register<F, Fut>(&mut self, name: &str, handler: F) -> HandlerId
    where
        F: FnMut(Ctx, Message) -> Fut + 'static,
        Fut: Future<Output = HandlerResult> + 'static,
    {
        self.registry.register(name, handler)
    }

    /// Register a plain-function handler under `name`: it is called once
    /// per arriving piece of a message (once for a message that fits one
    /// frame), runs to completion, and reads the piece's bytes in place.
    /// The cheapest kind of handler; see [`Piece`].
    ///
    /// ```no_run
    /// # fn f(b: &mut fastmsg::EndpointBuilder) {
    /// let total = std::rc::Rc::new(std::cell::Cell::new(0u64));
    /// let t = total.clone();
    /// b.register_fn("count", move |_ctx, piece| {
    ///     t.set(t.get() + piece.data().len() as u64);
    ///     Ok(())
    /// });
    /// # }
    /// ```
    pub fn register_fn<F>(&mut self, name: &str, handler: F) -> HandlerId
    where
        F: FnMut(&Ctx, &Piece<'_>) -> HandlerResult + 'static,
    {
        self.registry.register_fn(name, handler)
    }

    /// Register a whole-message handler under `name`: called once per
    /// message with all of its bytes as one contiguous slice, however many
    /// frames it spanned (a message that fits one frame is not copied; a
    /// longer one is gathered in a buffer kept per source). A message
    /// longer than `max_len` bytes is refused: the handler is not called
    /// and `extract` reports [`ReceiveError::TooLong`](crate::error::ReceiveError::TooLong)
    /// as the handler's error. An aborted message is dropped the same way
    /// ([`ReceiveError::Aborted`](crate::error::ReceiveError::Aborted)).
    ///
    /// ```no_run
    /// # fn f(b: &mut fastmsg::EndpointBuilder) {
    /// b.register_whole("records", 1 << 20, |_ctx, src, bytes| {
    ///     for rec in bytes.chunks_exact(12) {
    ///         let _ = (src, rec); // every record whole, wherever frames end
    ///     }
    ///     Ok(())
    /// });
    /// # }
    /// ```
    pub fn register_whole<F>(&mut self, name: &str, max_len: usize, handler: F) -> HandlerId
    where
        F: FnMut(&Ctx, Rank, &[u8]) -> HandlerResult + 'static,
    {
        let entry = crate::handler::Entry::Fn(whole::whole(max_len, handler));
        self.registry.register_entry(name, entry)
    }

    /// Reserve the id of a handler under `name` (the next dense id) and
    /// give its function later with [`define`](Self::define),
    /// [`define_fn`](Self::define_fn) or
    /// [`define_whole`](Self::define_whole): handlers that send to each
    /// other can then hold each other's ids.
    ///
    /// ```no_run
    /// # fn f(b: &mut fastmsg::EndpointBuilder) {
    /// let ping = b.declare("ping");
    /// let pong = b.register_fn("pong", move |ctx, p| {
    ///     ctx.send(p.source(), ping, &[p.data()])?;      // names `ping`
    ///     Ok(())
    /// });
    /// b.define_fn(ping, move |ctx, p| {
    ///     if p.data()[0] > 0 {
    ///         ctx.send(p.source(), pong, &[&[p.data()[0] - 1]])?;  // and back
    ///     }
    ///     Ok(())
    /// });
    /// # }
    /// ```
    ///
    /// `start` fails with [`StartError::UndefinedHandler`] if a declared id
    /// is never defined, and with [`StartError::BadDefinition`] if a
    /// `define*` names an id that is not declared or defines one twice.
    pub fn declare(&mut self, name: &str) -> HandlerId {
        self.registry.declare(name)
    }

    /// Give declared handler `id` an async function (as
    /// [`register`](Self::register)).
    pub fn define<F, Fut>(&mut self, id: HandlerId, handler: F)
    where
        F: FnMut(Ctx, Message) -> Fut + 'static,
        Fut: Future<Output = HandlerResult> + 'static,
    {
        self.registry.define(id, Registry::async_entry(handler));
    }

    /// Give declared handler `id` a plain function (as
    /// [`register_fn`](Self::register_fn)).
    pub fn define_fn<F>(&mut self, id: HandlerId, handler: F)
    where
        F: FnMut(&Ctx, &Piece<'_>) -> HandlerResult + 'static,
    {
        self.registry
            .define(id, crate::handler::Entry::Fn(Box::new(handler)));
    }

    /// Give declared handler `id` a whole-message function (as
    /// [`register_whole`](Self::register_whole)).
    pub fn define_whole<F>(&mut self, id: HandlerId, max_len: usize, handler: F)
    where
        F: FnMut(&Ctx, Rank, &[u8]) -> HandlerResult + 'static,
    {
        let entry = crate::handler::Entry::Fn(whole::whole(max_len, handler));
        self.registry.define(id, entry);
    }

    /// Add an idle hook: `hook` runs when this rank waits or polls idle
    /// while the idle-work flag is up ([`Ctx::note_idle_work`]); see the
    /// rules in [`Ctx::note_idle_work`]. An aggregation library flushes
    /// its partly filled buffers here, so that no item waits in a buffer
    /// while its sender is idle. A hook's error is reported by the wait or
    /// `extract` that ran it ([`ExtractError::IdleHook`](crate::error::ExtractError::IdleHook)).
    pub fn on_idle<F>(&mut self, hook: F)
    where
        F: FnMut(&Ctx) -> HandlerResult + 'static,
    {
        self.hooks.push(Box::new(hook));
    }

    /// Register a one-sided window of `bytes` bytes under `name`: memory
    /// of this rank that every rank may write with
    /// [`Ctx::put`] / [`Ctx::put_u64`] (also on [`Endpoint`]). Every rank
    /// must register the same windows in the same order.
    pub fn window(&mut self, name: &str, bytes: usize) -> WindowId {
        self.windows.register(name, bytes)
    }

    /// Join the job: connect the transports, then check with rank 0 that
    /// every rank registered the same handlers.
    ///
    /// # Errors
    /// [`StartError::HandlerMismatch`] naming the first differing handler;
    /// [`StartError::DuplicateHandler`]; [`StartError::UndefinedHandler`],
    /// [`StartError::BadDefinition`]; configuration, segment or network
    /// errors; [`StartError::Timeout`] if peers do not appear.
    pub fn start(self) -> Result<Endpoint, StartError> {
        let EndpointBuilder {
            config,
            registry,
            windows,
            hooks,
        } = self;
        config.validate()?;
        crate::settings::report::print_if_verbose(&config);
        registry.check_unique()?;
        registry.check_defined()?;
        let mut job = config.job.clone();
        if config.net.mode == NetMode::Verbs {
            // Fail at once on a host without RDMA (or a build without it).
            crate::transport::verbs::probe()?;
        }
        if config.net.mode == NetMode::Ofi {
            // Fail at once where the provider is missing (or the build
            // has no libfabric transport).
            crate::transport::ofi::probe()?;
        }
        // A job that needs the network meets at the rendezvous first: the
        // job table says which ranks share this host.
        let plan = if hosts::needs_network(&config) {
            Some(hosts::meet(&config, &mut job)?)
        } else {
            None
        };
        let sleeps = WaitConfig::sleeps(config.wait);
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
                abort: config.abort.as_deref(),
            },
            &config.shm,
        )?;
        let my_window = shm.own_window();
        let local = shm.local_ranks();
        // The watchdog's probes: local peers' lifelines, the network's
        // links (added below), the supervisor's abort flag.
        // SAFETY: the watchdog is stopped before the transports are
        // dropped (it is declared before `net` in the engine).
        let mut probes: Vec<Box<dyn crate::watch::Probe>> =
            vec![Box::new(unsafe { shm.life_probe() })];
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
            let links = mesh::connect(&plan.listener, &mesh_job, &plan.peers)?;
            let targets = NetTargets {
                window: my_window.raw(),
                bell: if sleeps { shm.doorbell() } else { None },
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
                    // SAFETY: the window area lives in the shm segment,
                    // which outlives this transport (placed before `shm`).
                    let t = unsafe {
                        crate::transport::OfiTransport::new(
                            wire,
                            job.size,
                            plan.geometry,
                            links,
                            targets,
                        )
                    }?;
                    net_peers = t.peers();
                    transports.push(AnyTransport::Ofi(t));
                }
            } else if config.net.mode == NetMode::Verbs {
                #[cfg(feature = "verbs")]
                {
                    let wire =
                        crate::transport::verbs::VerbsWire::open(links.len(), plan.geometry.slots)?;
                    // SAFETY: the window area lives in the shm segment, which
                    // outlives this transport (placed before `shm` below).
                    let v = unsafe {
                        crate::transport::VerbsTransport::new(
                            wire,
                            job.size,
                            plan.geometry,
                            links,
                            targets,
                        )
                    }?;
                    net_peers = v.peers();
                    transports.push(AnyTransport::Verbs(v));
                }
            } else {
                // SAFETY: the window area and the doorbell live in the shm
                // segment, which `shm` keeps mapped; the network transport
                // is placed before `shm` in the transport list, so it is
                // dropped (and its NIC thread joined) first.
                let tcp =
                    unsafe { TcpTransport::new(job.rank, job.size, plan.geometry, links, targets) }
                        .map_err(|source| crate::error::ConnectError::Io {
                            op: "set up the network transport (rings, NIC thread) of",
                            peer: format!("rank {}", job.rank),
                            source,
                        })?;
                net_peers = tcp.peers();
                probes.push(Box::new(tcp.link_probe()));
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
        let net = Net::new(transports, shm, route);
        let mut names = registry.names().to_vec();
        names.extend(windows.describe());
        // A network transport adds a NIC thread per rank: with those, the
        // host may have more runnable threads than cores, and a rank that
        // spins would keep its NIC thread from running.
        let threads_per_rank = if has_network { 2 } else { 1 };
        let oversubscribed = crate::topology::Cpus::probe().oversubscribed(
            job.local_size,
            threads_per_rank,
            job.launcher,
        );
        let wait = WaitConfig::resolve(config.wait, oversubscribed);
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
}
