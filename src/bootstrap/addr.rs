//! Which address a rank publishes for its peers when the launcher's
//! key-value exchange (`kvs`: PMIx or PMI-2), not `FASTMSG_ROOT`, carries
//! the wire-up.
//!
//! In order: the interface `FASTMSG_NET_IF` names (its first IPv4
//! address, else its first address); else the address this host's name
//! resolves to, when an interface here holds it and it is not a loopback;
//! else the first IPv4 address of an interface that is up, not a loopback
//! and not a local bridge (`docker*`, `virbr*`, `br-*`, `veth*`: the same
//! addresses exist on every host); else the loopback (a one-host job).

use crate::error::ConfigError;
use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs};

const BRIDGES: &[&str] = &["docker", "virbr", "br-", "veth"];

/// The address to listen on and publish (`FASTMSG_NET_IF` read here).
///
/// # Errors
/// As [`pick`].
pub(crate) fn listen_ip() -> Result<IpAddr, ConfigError> {
    pick(crate::settings::var("FASTMSG_NET_IF").ok().as_deref())
}

/// The address to listen on, on interface `named` if given.
///
/// # Errors
/// [`ConfigError::BadEnv`] if `named` is an interface with no address (or
/// none at all); [`ConfigError::Invalid`] if the interfaces cannot be
/// listed.
fn pick(named: Option<&str>) -> Result<IpAddr, ConfigError> {
    let ifs = if_addrs::get_if_addrs().map_err(|e| ConfigError::Invalid {
        what: "network interfaces",
        why: format!("cannot list them: {e}"),
    })?;
    if let Some(want) = named {
        let mine: Vec<IpAddr> = ifs
            .iter()
            .filter(|i| i.name == want)
            .map(|i| i.ip())
            .collect();
        return mine
            .iter()
            .find(|a| a.is_ipv4())
            .or(mine.first())
            .copied()
            .ok_or_else(|| ConfigError::BadEnv {
                var: "FASTMSG_NET_IF",
                value: want.to_owned(),
                why: format!(
                    "no interface of that name has an address (interfaces here: {})",
                    ifs.iter()
                        .map(|i| i.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
    }
    let held = |a: &IpAddr| ifs.iter().any(|i| i.ip() == *a);
    // The kernel's host name (Linux: the UTS namespace's).
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    if let Some(a) = (host.trim(), 0)
        .to_socket_addrs()
        .ok()
        .into_iter()
        .flatten()
        .map(|s| s.ip())
        .find(|a| !a.is_loopback() && held(a))
    {
        return Ok(a);
    }
    Ok(ifs
        .iter()
        .filter(|i| !i.is_loopback() && i.ip().is_ipv4())
        .find(|i| !BRIDGES.iter().any(|b| i.name.starts_with(b)))
        .map(|i| i.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_loopback_interface_gives_its_address() {
        assert_eq!(pick(Some("lo")).unwrap(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    }

    #[test]
    fn unknown_interface_is_a_typed_error_listing_the_real_ones() {
        match pick(Some("no-such-if0")) {
            Err(ConfigError::BadEnv { var, value, why }) => {
                assert_eq!(var, "FASTMSG_NET_IF");
                assert_eq!(value, "no-such-if0");
                assert!(why.contains("lo"), "names the interfaces here: {why}");
            }
            other => panic!("expected BadEnv, got {other:?}"),
        }
    }

    #[test]
    fn default_choice_is_an_address_of_this_host() {
        let a = pick(None).unwrap();
        let ifs = if_addrs::get_if_addrs().unwrap();
        assert!(
            a.is_loopback() || ifs.iter().any(|i| i.ip() == a && !i.is_loopback()),
            "{a} is not an address of an interface here"
        );
        // A bound listener there works.
        std::net::TcpListener::bind((a, 0)).expect("listen on the chosen address");
    }
}
