//! Network i/o shared by start-up and the network transports, below both:
//! authenticating a TCP connection with the job secret ([`auth`]),
//! admitting many incoming handshakes at once under one deadline each
//! ([`gate`]), and connecting with retries until the start-up deadline
//! ([`connect`]), arming the kernel's watch that turns a silent host into
//! a socket error ([`alive`]), and judging a bulk connection's silence
//! from what the kernel knows of it ([`silence`]), waiting for a known
//! peer's first answer while its host lives ([`patience`]); and the error of a
//! network thread that could not start ([`thread_error`]). It knows
//! sockets, the secret and deadlines; nothing of ranks' roles, rings or
//! endpoints.

pub(crate) mod alive;
pub(crate) mod auth;
pub(crate) mod connect;
pub(crate) mod gate;
pub(crate) mod patience;
pub(crate) mod silence;

/// A thread the network needs (a NIC, an accepting thread) could not
/// start: the error says which, and where the limit may be (the OS's
/// error alone, "Resource temporarily unavailable", names nothing).
pub(crate) fn thread_error(which: &str, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(
        e.kind(),
        format!("cannot start its {which} thread: {e} (a limit on threads or memory: ulimit -u, ulimit -v, a cgroup's pids.max?)"),
    )
}
