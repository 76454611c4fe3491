//! The wait policy (`FASTMSG_WAIT`, [`Config::wait`](crate::Config::wait))
//! and what it resolves to on this host at start ([`WaitConfig`], which
//! the engine keeps). How a wait applies it is the waiter's
//! (`crate::endpoint::wait`); why each number is what it is, too.

use crate::error::ConfigError;
use std::time::Duration;

/// How a rank waits when a blocking call finds nothing to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WaitPolicy {
    /// Spin with the pause hint (one core per rank).
    Spin,
    /// Spin briefly, then yield the core each round.
    Yield,
    /// Spin, yield, then sleep until rung (futex).
    Sleep,
    /// Spin while nothing else wants the core; when something does, or
    /// the host has fewer cores than ranks, back off (sleep on the
    /// doorbell, or yield).
    #[default]
    Auto,
}

impl std::str::FromStr for WaitPolicy {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s {
            "spin" => Ok(WaitPolicy::Spin),
            "yield" => Ok(WaitPolicy::Yield),
            "sleep" => Ok(WaitPolicy::Sleep),
            "auto" => Ok(WaitPolicy::Auto),
            _ => Err(ConfigError::BadEnv {
                var: "FASTMSG_WAIT",
                value: s.to_owned(),
                why: "expected spin, yield, sleep or auto".into(),
            }),
        }
    }
}

/// Idle µs after which a rank sleeps when ranks outnumber cores (`sleep`,
/// and `auto` with doorbells on): measured at 4 and 8 ranks on 2 cores,
/// sleeping made the collectives both faster and steadier than yielding
/// (BENCHMARKS.md, oversubscribed collectives).
const OVERSUBSCRIBED_SLEEP_AFTER_US: u64 = 20;

/// Idle time after which an uncontended `auto` rank sleeps (doorbells on).
pub const AUTO_SLEEP_AFTER: Duration = Duration::from_millis(2);

/// The resolved parameters of a policy on this host.
#[derive(Clone, Copy, Debug)]
pub(in crate::endpoint) struct WaitConfig {
    /// Idle rounds spent spinning before yielding.
    pub(in crate::endpoint) spin_rounds: u32,
    /// Yield once idle past the spin rounds.
    pub(in crate::endpoint) yield_: bool,
    /// Sleep once idle this long (None: never).
    pub(in crate::endpoint) sleep_after: Option<Duration>,
    /// `auto`: watch whether the core is wanted, and back off while it
    /// is.
    pub(in crate::endpoint) adaptive: bool,
    /// `auto` where ranks outnumber cores: every wait backs off after its
    /// short spin.
    pub(in crate::endpoint) always_back_off: bool,
    /// Whether senders ring doorbells, so this rank may sleep.
    pub(in crate::endpoint) bells: bool,
}

impl WaitConfig {
    /// `oversubscribed`: whether this host's ranks have fewer CPUs than
    /// busy threads (see [`crate::topology::Cpus::oversubscribed`]);
    /// `bells`: whether senders ring doorbells ([`Self::sleeps`]).
    pub(in crate::endpoint) fn resolve(
        policy: WaitPolicy,
        oversubscribed: bool,
        bells: bool,
    ) -> WaitConfig {
        let plain = |spin_rounds, yield_, sleep_after| WaitConfig {
            spin_rounds,
            yield_,
            sleep_after,
            adaptive: false,
            always_back_off: false,
            bells,
        };
        match policy {
            WaitPolicy::Spin => plain(u32::MAX, false, None),
            WaitPolicy::Yield => plain(16, true, None),
            WaitPolicy::Sleep => plain(
                if oversubscribed { 16 } else { 4096 },
                true,
                Some(Duration::from_micros(if oversubscribed {
                    OVERSUBSCRIBED_SLEEP_AFTER_US
                } else {
                    200
                })),
            ),
            // Ranks outnumber cores: the rank waited for may need this
            // very core, so every wait backs off after a brief spin, in
            // the way measured to be faster here.
            WaitPolicy::Auto if oversubscribed => WaitConfig {
                spin_rounds: 16,
                yield_: true,
                sleep_after: bells.then_some(AUTO_SLEEP_AFTER),
                adaptive: true,
                always_back_off: true,
                bells,
            },
            WaitPolicy::Auto => WaitConfig {
                spin_rounds: 1 << 16,
                yield_: true,
                sleep_after: bells.then_some(AUTO_SLEEP_AFTER),
                adaptive: true,
                always_back_off: false,
                bells,
            },
        }
    }

    /// Whether senders must ring doorbells under this policy: `sleep`
    /// always; `auto` where the kernel makes a ring cheap (the same answer
    /// on every rank of a host, as the shared segment requires). When
    /// rings are on, this process also registers for the cheap ring.
    pub(in crate::endpoint) fn sleeps(policy: WaitPolicy) -> bool {
        let on = match policy {
            WaitPolicy::Sleep => true,
            WaitPolicy::Auto => crate::wake::Doorbell::cheap_wakers(),
            WaitPolicy::Spin | WaitPolicy::Yield => false,
        };
        if on {
            // Failing only costs this process a fence per ring.
            crate::wake::Doorbell::register_waker();
        }
        on
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_watches_the_machine_and_backs_off_at_once_where_ranks_outnumber_cores() {
        let quiet = WaitConfig::resolve(WaitPolicy::Auto, false, true);
        assert!(quiet.adaptive && !quiet.always_back_off);
        assert_eq!(quiet.sleep_after, Some(AUTO_SLEEP_AFTER));
        let crowded = WaitConfig::resolve(WaitPolicy::Auto, true, true);
        assert!(crowded.adaptive && crowded.always_back_off);
        assert!(crowded.spin_rounds <= 16 && crowded.yield_);
        // The fixed policies do not watch.
        for p in [WaitPolicy::Spin, WaitPolicy::Yield, WaitPolicy::Sleep] {
            let c = WaitConfig::resolve(p, true, true);
            assert!(!c.adaptive && !c.always_back_off, "{p:?}");
        }
        // Without doorbells nothing sleeps.
        assert_eq!(
            WaitConfig::resolve(WaitPolicy::Auto, true, false).sleep_after,
            None
        );
    }
}
