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

use crate::error::OfiError;

#[cfg(feature = "ofi")]
mod fabric;
#[cfg(feature = "ofi")]
mod sys;
#[cfg(feature = "ofi")]
mod wire;

#[cfg(feature = "ofi")]
pub use wire::OfiWire;

/// The libfabric transport: the ring transport over an [`OfiWire`].
#[cfg(feature = "ofi")]
pub type OfiTransport = super::net::RmaTransport<OfiWire>;

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
