//! The libfabric transport (cargo feature `ofi`, `FASTMSG_NET=ofi`): the
//! ring protocol of [`crate::transport::net`] over a libfabric RDM
//! endpoint — the interface under MPICH, Open MPI's OFI components and
//! GASNet-EX's ofi conduit, and the portable way onto Slingshot (cxi),
//! EFA, Omni-Path (psm3) and verbs.
//!
//! - The provider is `FASTMSG_OFI_PROVIDER`, else `FI_PROVIDER` (default
//!   `tcp;ofi_rxm`), asked for RMA
//!   writes on a reliable datagram endpoint bound to the address this rank
//!   is reached on; anything else is [`OfiError::NoProvider`] at start.
//! - Addresses, keys and ring offsets travel over the authenticated TCP
//!   connections of [`super::net::mesh`], which stay open to tell a dead
//!   peer by its end.
//! - Placement order is the provider's answer: `FI_ORDER_DATA` in its
//!   completion order means a write's bytes land in order and the stamp
//!   word alone is polled; otherwise (`tcp;ofi_rxm` here) the safe mode,
//!   `fi_writedata` whose remote completion proves the write landed.
//! - Progress: on a manual-progress provider the poll drives it (every
//!   few empty polls, at once while busy), and so do credit waits.
//!
//! Exercised here over `tcp;ofi_rxm` (safe mode, manual progress); the
//! in-order mode and hardware providers are not.

use super::net::provider::{Caps, OpenPlan, Provider};
use super::AnyTransport;
use crate::error::{OfiError, StartError};

#[cfg(feature = "ofi")]
mod fabric;
#[cfg(feature = "ofi")]
mod sys;
#[cfg(feature = "ofi")]
mod wire;

#[cfg(feature = "ofi")]
pub use wire::OfiWire;

/// The provider `FASTMSG_NET=ofi` asks for: `FASTMSG_OFI_PROVIDER`, else
/// `FI_PROVIDER` (libfabric's own variable, which also filters what
/// libfabric offers), else `tcp;ofi_rxm`.
pub fn provider() -> String {
    crate::settings::env("FASTMSG_OFI_PROVIDER")
        .or_else(|| crate::settings::env("FI_PROVIDER"))
        .unwrap_or_else(|| "tcp;ofi_rxm".into())
}

/// Check that the provider can be opened; the first thing a rank asked
/// for `FASTMSG_NET=ofi` does, so a host without it fails at once.
///
/// # Errors
/// [`OfiError::NotBuilt`] in a build without the `ofi` feature.
#[cfg(not(feature = "ofi"))]
pub fn probe() -> Result<(), OfiError> {
    Err(OfiError::NotBuilt)
}

/// Check that the provider can be opened; the first thing a rank asked
/// for `FASTMSG_NET=ofi` does, so a host without it fails at once.
///
/// # Errors
/// [`OfiError::NoProvider`] when libfabric offers no such provider with
/// RMA writes, [`OfiError::Call`] when opening it fails.
#[cfg(feature = "ofi")]
pub fn probe() -> Result<(), OfiError> {
    fabric::Fabric::open(&provider(), None, 16).map(drop)
}

/// Open the wire of rank `me` of `world` on the address its network
/// connections use.
#[cfg(feature = "ofi")]
pub(crate) fn open(
    me: u32,
    world: u32,
    node: Option<std::net::IpAddr>,
    peers: usize,
    slots: u32,
) -> Result<OfiWire, OfiError> {
    let node = node.map(|a| a.to_string());
    let cq = 2 * (peers * slots as usize) + 4096;
    let wire = OfiWire::open(&provider(), node.as_deref(), me, world, cq)?;
    let (prov, domain) = wire.provider();
    tracing::debug!(
        "libfabric: provider {prov} on {domain} ({}), {} peers",
        node.as_deref().unwrap_or("any address"),
        peers
    );
    Ok(wire)
}

/// The libfabric wire as a provider (`FASTMSG_NET=ofi`, chosen only by
/// name).
pub(crate) struct OfiProvider;

impl Provider for OfiProvider {
    fn name(&self) -> &'static str {
        "ofi"
    }
    fn caps(&self) -> Caps {
        // Set-up is collective (the full mesh, see docs/scale.md); RDMA
        // writes ring no doorbell and a sleeping rank drives no manual
        // progress; the provider's progress counts as a second busy
        // thread per rank.
        Caps {
            lazy_connect: false,
            busy_thread: true,
            rings_doorbell: false,
            auto: false,
        }
    }
    fn probe(&self) -> Result<(), StartError> {
        Ok(probe()?)
    }
    fn describe(&self) -> String {
        match probe() {
            Ok(()) => format!("built; provider {} opens", provider()),
            Err(OfiError::NotBuilt) => {
                "not built (cargo feature `ofi`, needs libfabric-dev)".into()
            }
            Err(e) => e.to_string(),
        }
    }
    #[cfg(feature = "ofi")]
    fn open(&self, plan: OpenPlan) -> Result<AnyTransport, StartError> {
        let links = plan.connect_all()?;
        // The endpoint listens where peers reached us.
        let node = links
            .first()
            .and_then(|l| l.1.local_addr().ok())
            .map(|a| a.ip());
        let wire = open(plan.me.0, plan.size, node, links.len(), plan.geometry.slots)?;
        plan.open_eager(wire, links)
    }
    #[cfg(not(feature = "ofi"))]
    fn open(&self, _plan: OpenPlan) -> Result<AnyTransport, StartError> {
        Err(OfiError::NotBuilt.into())
    }
}
