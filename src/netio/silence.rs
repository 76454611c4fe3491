//! Judging, from what the kernel knows of a connection (`TCP_INFO`),
//! whether the peer's *host* has gone silent — for connections that carry
//! bulk data, where the kernel's own verdict (`TCP_USER_TIMEOUT`) cannot
//! be used.
//!
//! **Why not the kernel's.** `TCP_USER_TIMEOUT` also ends a connection
//! whose peer advertised a zero window for that long, *even when the
//! peer's kernel answers every zero-window probe* (Linux's
//! `tcp_probe_timer`: the user time-out counts from the first probe).
//! A peer process that is stopped — in a debugger, by `SIGSTOP`, swapped
//! out — while a sender has more for it than the sockets hold is such a
//! peer: alive, and it will read again. Measured on the loopback: a
//! sender with 4 MiB queued to a reader that does not read lost its
//! connection 3.47 s after the window closed, with a 3 s user time-out.
//!
//! **The rule** ([`judge`]): a host is silent when something has been
//! asked of it — data it has not acknowledged, or two probes in a row
//! (keepalive or zero-window) it has not answered — and nothing at all
//! (an acknowledgement, a probe's answer, data) has come from it for
//! `dead_after`; the question must also have stood for [`GRACE`], so that
//! one sent a moment ago is not taken for one unanswered. A live host's
//! kernel answers whatever its process does: a stopped peer's zero
//! window is probed and answered (never two unanswered probes), so it is
//! waited for however long.
//!
//! **The cost.** One `getsockopt(TCP_INFO)` per connection per look; the
//! software NIC looks every [`LOOK_EVERY`].
//!
//! What is not seen: a host lost while a sender waits on its zero window
//! is judged once two of the kernel's zero-window probes go unanswered,
//! and those back off exponentially (up to two minutes apart), so that
//! case is reported late — it takes a stopped process *and* a lost host.

#![allow(unsafe_code)]

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// How long a question to the peer's host must have stood unanswered
/// before its silence counts: Linux's smallest retransmission time-out,
/// so an answer that has not come in this long was lost, not slow.
pub(crate) const GRACE: Duration = Duration::from_millis(200);

/// How often a wait on a peer looks at its connection: the software NIC
/// (every connection), a dial waiting for a live peer's answer
/// ([`super::patience`]), a network write waiting for its completion
/// (`transport::net::wire::Lateness`).
pub(crate) const LOOK_EVERY: Duration = Duration::from_millis(100);

/// What the kernel knows of one connection's peer host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hearing {
    /// Since anything came from the peer's host (the later of the last
    /// acknowledgement or probe answer and the last data), milliseconds.
    pub(crate) silent_ms: u32,
    /// Data sent and not acknowledged, in segments.
    pub(crate) unacked: u32,
    /// Probes (keepalive or zero-window) sent since the last answer.
    pub(crate) probes: u8,
}

impl Hearing {
    /// Whether something has been asked of the host and not answered:
    /// data in flight, or two probes in a row.
    pub(crate) fn asked(&self) -> bool {
        self.unacked > 0 || self.probes >= 2
    }
}

/// What the kernel knows of connection `fd` (`TCP_INFO`); `None` if it
/// cannot say (not a TCP socket, closed).
pub(crate) fn hear(fd: RawFd) -> Option<Hearing> {
    // SAFETY: `tcp_info` is plain integers; all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is writable for `len` bytes; the kernel writes at
    // most that many and says how many in `len`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    // The fields used all lie in the first 104 bytes, which every kernel
    // since 2.6 fills.
    if r < 0 || (len as usize) < 104 {
        return None;
    }
    Some(Hearing {
        silent_ms: info.tcpi_last_ack_recv.min(info.tcpi_last_data_recv),
        unacked: info.tcpi_unacked,
        probes: info.tcpi_probes,
    })
}

/// The rule of the module docs: whether `h`, looked at with its question
/// standing for `asked_for`, says the host is silent after `dead_after`.
pub(crate) fn judge(h: Hearing, asked_for: Duration, dead_after: Duration) -> bool {
    h.asked() && asked_for >= GRACE && Duration::from_millis(u64::from(h.silent_ms)) >= dead_after
}

/// The watch over one connection: remembers since when a question stands.
#[derive(Debug, Clone)]
pub(crate) struct SilenceWatch {
    dead_after: Duration,
    asked_since: Option<Instant>,
}

impl SilenceWatch {
    /// A watch that judges a host silent after `dead_after`.
    pub(crate) fn new(dead_after: Duration) -> SilenceWatch {
        SilenceWatch {
            dead_after,
            asked_since: None,
        }
    }

    /// Look at connection `fd` at `now`: `Some(why)` once its host is
    /// silent (see [`judge`]), `why` saying what went unanswered.
    pub(crate) fn look(&mut self, fd: RawFd, now: Instant) -> Option<String> {
        let h = hear(fd)?;
        self.look_at(h, now)
    }

    /// [`look`](Self::look) with the hearing given.
    pub(crate) fn look_at(&mut self, h: Hearing, now: Instant) -> Option<String> {
        if !h.asked() {
            self.asked_since = None;
            return None;
        }
        let since = *self.asked_since.get_or_insert(now);
        if !judge(h, now.duration_since(since), self.dead_after) {
            return None;
        }
        let what = if h.unacked > 0 {
            format!("{} segments unacknowledged", h.unacked)
        } else {
            format!("{} probes unanswered", h.probes)
        };
        Some(format!(
            "nothing from it for {} ms, {what} (FASTMSG_NET_DEAD_AFTER_MS is {} ms)",
            h.silent_ms,
            self.dead_after.as_millis()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEAD: Duration = Duration::from_secs(3);

    fn h(silent_ms: u32, unacked: u32, probes: u8) -> Hearing {
        Hearing {
            silent_ms,
            unacked,
            probes,
        }
    }

    #[test]
    fn a_stopped_peer_answering_zero_window_probes_is_not_silent() {
        // Nothing but probe answers for a long time; between probes no
        // question stands, and at most one probe is out at a time.
        let mut w = SilenceWatch::new(DEAD);
        let t = Instant::now();
        for (i, p) in [0u8, 1, 0, 1, 1, 0].into_iter().enumerate() {
            let at = t + Duration::from_secs(i as u64 * 10);
            assert_eq!(w.look_at(h(60_000, 0, p), at), None, "look {i}");
        }
    }

    #[test]
    fn unacknowledged_data_counts_only_once_the_question_stood() {
        let mut w = SilenceWatch::new(DEAD);
        let t = Instant::now();
        // Data just sent after a long quiet: not silence yet.
        assert_eq!(w.look_at(h(5000, 3, 0), t), None);
        assert_eq!(w.look_at(h(5100, 3, 0), t + GRACE / 2), None);
        let why = w.look_at(h(5200, 3, 0), t + GRACE).expect("silent");
        assert!(why.contains("3 segments unacknowledged"), "{why}");
        // Answered: the question is gone, and so is the verdict.
        assert_eq!(w.look_at(h(0, 0, 0), t + GRACE * 2), None);
        assert_eq!(w.look_at(h(5000, 1, 0), t + GRACE * 3), None);
    }

    #[test]
    fn a_host_heard_within_dead_after_is_not_silent() {
        let mut w = SilenceWatch::new(DEAD);
        let t = Instant::now();
        for i in 0..50u32 {
            let at = t + Duration::from_millis(u64::from(i) * 100);
            assert_eq!(w.look_at(h(2999, 8, 0), at), None);
        }
    }

    #[test]
    fn two_unanswered_keepalive_probes_after_dead_after_are_silence() {
        let mut w = SilenceWatch::new(DEAD);
        let t = Instant::now();
        assert_eq!(w.look_at(h(2000, 0, 2), t), None, "not silent long enough");
        assert_eq!(w.look_at(h(3000, 0, 2), t + Duration::from_secs(1)), Some(
            "nothing from it for 3000 ms, 2 probes unanswered (FASTMSG_NET_DEAD_AFTER_MS is 3000 ms)".into()
        ));
    }

    #[test]
    fn a_live_loopback_connection_is_heard() {
        use std::io::{Read, Write};
        use std::os::fd::AsRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(b"ping").unwrap();
        let mut b = [0u8; 4];
        s.read_exact(&mut b).unwrap();
        // The acknowledgement may still be on its way for a moment.
        let t = Instant::now();
        let got = loop {
            let got = hear(c.as_raw_fd()).expect("TCP_INFO of a TCP socket");
            if got.unacked == 0 || t.elapsed() > Duration::from_secs(5) {
                break got;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!((got.unacked, got.probes), (0, 0));
        assert!(got.silent_ms < 5000, "{got:?}");
        assert_eq!(hear(-1), None, "not a socket");
    }
}
