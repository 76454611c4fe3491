//! Counters of one endpoint (cargo feature `stats`): per peer, messages and
//! bytes sent and received, the rounds a sender waited for credit and the
//! time spent in them, the high-water marks of parked sends; per endpoint,
//! plain-function handler calls and their time, and `extract` calls that
//! found nothing. `Endpoint::stats()` reads them; `FASTMSG_STATS=1`
//! prints a table per rank when it closes.
//!
//! Without the feature the `Tally` the engine updates is an empty type
//! whose methods do nothing, so the counters cost nothing; with it each
//! event is a few non-atomic additions (the engine is single-threaded),
//! and each handler call two clock reads.
//!
//! What is counted where: a message is sent when its last fragment goes to
//! a transport (parked sends count when they leave the pending queue),
//! received when its first fragment arrives; bytes are payload bytes of
//! user and control fragments alike. Async handlers' polls are not timed.

use crate::endpoint::Endpoint;
use std::time::Duration;

/// Counters towards and from one peer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerStats {
    /// Messages whose last fragment went out to this peer.
    pub messages_sent: u64,
    /// Payload bytes sent to this peer.
    pub bytes_sent: u64,
    /// Messages whose first fragment arrived from this peer.
    pub messages_received: u64,
    /// Payload bytes received from this peer.
    pub bytes_received: u64,
    /// Rounds a sender spent waiting for credit towards this peer.
    pub credit_waits: u64,
    /// Time spent in those rounds.
    pub credit_wait_time: Duration,
    /// Most sends parked for this peer at once.
    pub parked_high_water: usize,
    /// Most bytes parked for this peer at once.
    pub parked_bytes_high_water: usize,
}

/// Counters of one endpoint (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Per peer, indexed by rank.
    pub peers: Vec<PeerStats>,
    /// Plain-function handler calls (one per piece).
    pub handler_calls: u64,
    /// Time spent in them.
    pub handler_time: Duration,
    /// `extract` calls that found nothing.
    pub empty_extracts: u64,
}

impl Stats {
    /// A table, one line per peer with any traffic, then the totals.
    pub fn table(&self, rank: u32) -> String {
        use std::fmt::Write as _;
        let mut out = format!(
            "fastmsg stats, rank {rank}: {} handler calls in {:.3?}, {} empty extracts\n",
            self.handler_calls, self.handler_time, self.empty_extracts
        );
        let _ = writeln!(
            out,
            "  {:>5} {:>10} {:>12} {:>10} {:>12} {:>11} {:>12} {:>7} {:>12}",
            "peer",
            "msgs out",
            "bytes out",
            "msgs in",
            "bytes in",
            "credit wait",
            "wait time",
            "parked",
            "parked bytes"
        );
        for (r, p) in self.peers.iter().enumerate() {
            if *p == PeerStats::default() {
                continue;
            }
            let _ = writeln!(
                out,
                "  {r:>5} {:>10} {:>12} {:>10} {:>12} {:>11} {:>12} {:>7} {:>12}",
                p.messages_sent,
                p.bytes_sent,
                p.messages_received,
                p.bytes_received,
                p.credit_waits,
                format!("{:.3?}", p.credit_wait_time),
                p.parked_high_water,
                p.parked_bytes_high_water
            );
        }
        out
    }
}

/// What the engine updates (a no-op without the `stats` feature).
#[derive(Debug, Default)]
pub(in crate::endpoint) struct Tally {
    #[cfg(feature = "stats")]
    inner: std::cell::RefCell<Stats>,
}

/// A handler call's start.
#[cfg(feature = "stats")]
pub(in crate::endpoint) struct CallStart {
    at: std::time::Instant,
}

#[cfg(feature = "stats")]
impl Tally {
    pub(in crate::endpoint) fn new(ranks: usize) -> Self {
        Tally {
            inner: std::cell::RefCell::new(Stats {
                peers: vec![PeerStats::default(); ranks],
                ..Stats::default()
            }),
        }
    }

    fn peer(&self, rank: usize, f: impl FnOnce(&mut PeerStats)) {
        if let Some(p) = self.inner.borrow_mut().peers.get_mut(rank) {
            f(p);
        }
    }

    #[inline]
    pub(in crate::endpoint) fn sent(&self, dest: usize, bytes: u32, last: bool) {
        self.peer(dest, |p| {
            p.bytes_sent += u64::from(bytes);
            p.messages_sent += u64::from(last);
        });
    }

    #[inline]
    pub(in crate::endpoint) fn received(&self, src: usize, bytes: u32, first: bool) {
        self.peer(src, |p| {
            p.bytes_received += u64::from(bytes);
            p.messages_received += u64::from(first);
        });
    }

    pub(in crate::endpoint) fn parked(&self, dest: usize, sends: usize, bytes: usize) {
        self.peer(dest, |p| {
            p.parked_high_water = p.parked_high_water.max(sends);
            p.parked_bytes_high_water = p.parked_bytes_high_water.max(bytes);
        });
    }

    pub(in crate::endpoint) fn credit_wait(&self, dest: usize, took: Duration) {
        self.peer(dest, |p| {
            p.credit_waits += 1;
            p.credit_wait_time += took;
        });
    }

    #[inline]
    pub(in crate::endpoint) fn call_start(&self) -> CallStart {
        CallStart {
            at: std::time::Instant::now(),
        }
    }

    #[inline]
    pub(in crate::endpoint) fn call_end(&self, start: CallStart) {
        let mut s = self.inner.borrow_mut();
        s.handler_calls += 1;
        s.handler_time += start.at.elapsed();
    }

    #[inline]
    pub(in crate::endpoint) fn empty_extract(&self) {
        self.inner.borrow_mut().empty_extracts += 1;
    }

    pub(in crate::endpoint) fn snapshot(&self) -> Stats {
        self.inner.borrow().clone()
    }
}

#[cfg(not(feature = "stats"))]
impl Tally {
    pub(in crate::endpoint) fn new(_ranks: usize) -> Self {
        Tally {}
    }
    #[inline(always)]
    pub(in crate::endpoint) fn sent(&self, _dest: usize, _bytes: u32, _last: bool) {}
    #[inline(always)]
    pub(in crate::endpoint) fn parked(&self, _dest: usize, _sends: usize, _bytes: usize) {}
}

/// Whether the counters are kept at all (the `stats` feature).
pub const ENABLED: bool = cfg!(feature = "stats");

impl Endpoint {
    /// This endpoint's counters so far (see [`Stats`]).
    #[cfg(feature = "stats")]
    pub fn stats(&self) -> Stats {
        self.core.net().borrow().tally().snapshot()
    }

    /// `FASTMSG_STATS=1`: print the table to stderr (called by `close`).
    pub(in crate::endpoint) fn print_stats_if_asked(&self) {
        let asked = crate::settings::var("FASTMSG_STATS").is_ok_and(|v| !v.is_empty() && v != "0");
        if !asked {
            return;
        }
        #[cfg(feature = "stats")]
        {
            use std::io::Write;
            let table = self.stats().table(self.core.rank().0);
            let _ = std::io::stderr().write_all(table.as_bytes());
        }
        #[cfg(not(feature = "stats"))]
        tracing::warn!(
            "FASTMSG_STATS is set, but fastmsg was built without the `stats` feature (cargo build --features fastmsg/stats)"
        );
    }
}
