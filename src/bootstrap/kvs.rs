//! The wire-up through a launcher's key-value store (PMIx, PMI-2): what
//! the rendezvous at `FASTMSG_ROOT` exchanges, exchanged instead through
//! put / fence / get. Every rank puts its host identity and the address of
//! a listener on a port the kernel picked (`addr`); rank 0 puts a fresh
//! job secret (unless `FASTMSG_SECRET` gives one); all fence; everybody
//! reads the table. Nothing has to be exported.
//!
//! The secret travels through the launcher's servers, which serve only
//! the processes of this job (and their user).

use super::addr;
use super::rendezvous::Member;
use super::JobInfo;
use crate::error::{ConnectError, StartError};
use crate::id::Rank;
use std::net::{SocketAddr, TcpListener};
use std::sync::Mutex;
use std::time::Duration;

/// A launcher's key-value store, as the wire-up uses it.
pub(crate) trait KeyValue {
    /// Publish this rank's `value` under `key` (seen by all after a fence).
    fn put(&mut self, key: &str, value: &str) -> Result<(), StartError>;
    /// Wait for every rank of the job; give up after `timeout`.
    fn fence(&mut self, timeout: Duration) -> Result<(), StartError>;
    /// Read what `rank` published under `key`.
    fn get(&mut self, rank: u32, key: &str) -> Result<String, StartError>;
}

/// What [`wire_up`] produced: the job table, this rank's listener, the
/// job secret.
pub(crate) type WireUp = (Vec<Member>, TcpListener, Vec<u8>);

/// A fresh job secret: 128 random bits, hex.
fn fresh_secret() -> Result<String, StartError> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| ConnectError::Io {
        op: "draw a job secret from",
        peer: "the OS random source".into(),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Exchange host identities, listening addresses and the job secret
/// through `kv`; `secret` is the one the user gave (`FASTMSG_SECRET`), if
/// any, and `timeout` bounds the fence. Every rank of the job must call it
/// (it fences).
///
/// # Errors
/// The store's errors (a put, fence or get failed); a peer that published
/// an address that does not parse ([`ConnectError::Rendezvous`]); a
/// listener that cannot be opened.
pub(crate) fn wire_up(
    kv: &mut impl KeyValue,
    secret: Option<&str>,
    timeout: Duration,
    job: &JobInfo,
) -> Result<WireUp, StartError> {
    // Keys carry a round number: a process that starts a second endpoint
    // must not read the first one's addresses (every rank counts alike).
    static ROUND: Mutex<u32> = Mutex::new(0);
    let round = {
        let mut r = ROUND.lock().unwrap_or_else(|p| p.into_inner());
        *r += 1;
        *r
    };
    let (k_addr, k_host, k_secret) = (
        format!("fastmsg.{round}.addr"),
        format!("fastmsg.{round}.host"),
        format!("fastmsg.{round}.secret"),
    );
    let ip = addr::listen_ip()?;
    let io = |source| ConnectError::Io {
        op: "listen for peers on",
        peer: ip.to_string(),
        source,
    };
    let listener = crate::netio::connect::listen((ip, 0)).map_err(io)?;
    let me = listener.local_addr().map_err(io)?;
    kv.put(&k_addr, &me.to_string())?;
    kv.put(&k_host, &job.host)?;
    let mut secret = secret.map(str::to_owned);
    if secret.is_none() && job.rank.0 == 0 {
        let fresh = fresh_secret()?;
        kv.put(&k_secret, &fresh)?;
        secret = Some(fresh);
    }
    kv.fence(timeout)?;
    let secret = match secret {
        Some(k) => k,
        None => kv.get(0, &k_secret)?,
    };
    let mut table = Vec::with_capacity(job.size as usize);
    for r in 0..job.size {
        let text = kv.get(r, &k_addr)?;
        let addr: SocketAddr = text.parse().map_err(|_| {
            ConnectError::Rendezvous(format!(
                "rank {r} published {text:?} as its address ({k_addr}), which is not an address"
            ))
        })?;
        table.push(Member {
            rank: Rank(r),
            host: kv.get(r, &k_host)?,
            addr,
        });
    }
    Ok((table, listener, secret.into_bytes()))
}
