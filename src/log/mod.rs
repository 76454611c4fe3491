//! Diagnostics: every line the library prints goes through [`tracing`].
//!
//! `FASTMSG_LOG` chooses what is printed: a level (`error`, `warn`, `info`,
//! `debug`, `trace`; default `warn`) or a filter per module in
//! `tracing-subscriber`'s `EnvFilter` syntax, e.g.
//! `FASTMSG_LOG=warn,fastmsg::transport=debug`. Each line is written to
//! stderr in one `write` and tagged with the rank that printed it:
//!
//! ```text
//! fastmsg[rank 3] WARN fastmsg::copy: cannot read the copy plan …; using plain copies
//! ```
//!
//! [`init`] installs that subscriber once per process, and only when no
//! global subscriber is set: a program that installs its own (before it
//! builds an endpoint) keeps it and receives fastmsg's events under the
//! `fastmsg` target. The library calls [`init`] itself when an
//! [`EndpointBuilder`](crate::EndpointBuilder) is made; nothing on a send,
//! receive or extract path logs.
//!
//! Which rank a line belongs to: the rank set on the printing thread by
//! building an endpoint on it, else the
//! process's rank from its launcher ([`set_process_rank`]), else the
//! process label (`fastmsg`, or e.g. `fmrun` for the launcher).
//!
//! A wait that may last long logs that it still waits on one clock,
//! [`LongWait`]: after a first delay, then at each doubling.

mod long_wait;

pub use long_wait::LongWait;

use std::cell::Cell;
use std::fmt;
use std::sync::{Once, OnceLock};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// The variable that sets the filter.
pub const LOG_VAR: &str = "FASTMSG_LOG";

/// The filter when `FASTMSG_LOG` is unset: warnings and errors.
pub const DEFAULT_FILTER: &str = "warn";

static INIT: Once = Once::new();
static LABEL: OnceLock<String> = OnceLock::new();
static PROCESS_RANK: OnceLock<u32> = OnceLock::new();

thread_local! {
    static THREAD_RANK: Cell<Option<u32>> = const { Cell::new(None) };
}

/// Tag this thread's lines with `rank` (ranks run as threads of one
/// process in [`crate::threads`]).
pub(crate) fn set_thread_rank(rank: u32) {
    THREAD_RANK.with(|r| r.set(Some(rank)));
}

/// Tag every thread's lines with `rank` unless the thread has its own
/// (first call wins: one process, one launcher rank).
pub fn set_process_rank(rank: u32) {
    let _ = PROCESS_RANK.set(rank);
}

/// The tag lines carry, e.g. `fastmsg[rank 3]`.
pub fn tag() -> String {
    let label = LABEL.get().map_or("fastmsg", String::as_str);
    match THREAD_RANK.with(Cell::get).or(PROCESS_RANK.get().copied()) {
        Some(r) => format!("{label}[rank {r}]"),
        None => label.to_owned(),
    }
}

/// Install fastmsg's subscriber (see the module docs) unless one is set.
/// Idempotent and cheap after the first call.
pub fn init() {
    init_as("fastmsg");
}

/// [`init`], labelling lines without a rank `label` (the first call's
/// label stays).
pub fn init_as(label: &str) {
    INIT.call_once(|| {
        let _ = LABEL.set(label.to_owned());
        let (filter, bad) = filter_from_env();
        if !tracing::dispatcher::has_been_set() {
            let subscriber = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .event_format(RankFormat)
                .finish();
            // A subscriber set meanwhile by another thread wins; that is fine.
            let _ = tracing::subscriber::set_global_default(subscriber);
        }
        if let Some((value, why)) = bad {
            tracing::warn!(
                "{LOG_VAR}={value:?} is not a valid filter ({why}); using {DEFAULT_FILTER:?}"
            );
        }
    });
}

/// The filter from `FASTMSG_LOG`, with the rejected value and why when it
/// does not parse.
fn filter_from_env() -> (EnvFilter, Option<(String, String)>) {
    match crate::settings::var(LOG_VAR) {
        Ok(v) if !v.trim().is_empty() => match parse_filter(v.trim()) {
            Ok(f) => (f, None),
            Err(why) => (EnvFilter::new(DEFAULT_FILTER), Some((v, why))),
        },
        _ => (EnvFilter::new(DEFAULT_FILTER), None),
    }
}

/// The levels a bare directive may name.
const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

/// `text` as a filter. `EnvFilter` takes a bare word that is not a level
/// for a target to show at every level, so a misspelt level (`wran`)
/// would silence every line of the library, the warning about the
/// misspelling included: a bare word must be a level or name a module of
/// fastmsg (`fastmsg::…`, `fastmsg_handlers::…`) or fmrun.
fn parse_filter(text: &str) -> Result<EnvFilter, String> {
    for d in text.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        // `0` … `5`: tracing's numeric levels.
        let bare = !d.contains('=') && !d.contains('[') && d.parse::<u8>().is_err();
        if bare
            && !LEVELS.contains(&d.to_ascii_lowercase().as_str())
            && !d.starts_with("fastmsg")
            && !d.starts_with("fmrun")
        {
            return Err(format!(
                "{d:?} is neither a level ({}) nor a module of fastmsg (fastmsg::…)",
                LEVELS.join(", ")
            ));
        }
    }
    EnvFilter::try_new(text).map_err(|e| e.to_string())
}

/// `tag LEVEL target: message fields`, one line.
struct RankFormat;

impl<S, N> FormatEvent<S, N> for RankFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let label = LABEL.get().map_or("fastmsg", String::as_str);
        // A program's own events (fmrun's) need no target beside its label.
        if meta.target() == label {
            write!(writer, "{} {}: ", tag(), meta.level())?;
        } else {
            write!(writer, "{} {} {}: ", tag(), meta.level(), meta.target())?;
        }
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_level_is_refused_not_taken_for_a_target() {
        for bad in ["wran", "warn,bogus", "verbose"] {
            let e = parse_filter(bad).unwrap_err();
            assert!(e.contains("neither a level"), "{bad}: {e}");
        }
        for good in [
            "warn",
            "DEBUG",
            "4",
            "info,h2=off",
            "warn,fastmsg::transport=debug",
            "fastmsg",
            "off",
        ] {
            assert!(parse_filter(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn thread_rank_wins_over_process_rank() {
        std::thread::spawn(|| {
            assert!(!tag().contains("rank 7"));
            set_thread_rank(7);
            assert!(tag().ends_with("[rank 7]"), "{}", tag());
        })
        .join()
        .unwrap();
    }
}
