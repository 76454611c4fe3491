//! Errors of the launchers' key-value services: PMI-1/PMI-2 over
//! `PMI_FD` ([`Pmi2Error`]) and PMIx loaded at run time ([`PmixError`]).

/// A PMI-2 or PMI-1 exchange with the launcher (over `PMI_FD`) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call}: {why}")]
pub struct Pmi2Error {
    /// The protocol and command (`PMI-2 fullinit`, `PMI-2 kvs-fence`,
    /// `PMI-1 barrier_in`…).
    pub call: String,
    /// What went wrong: the launcher's return code and message, or what it
    /// sent that is not PMI-2, or the I/O error.
    pub why: String,
}

/// A call into the PMIx client library failed, or the library could not
/// be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PmixError {
    /// A PMIx server started this process (`PMIX_RANK`, `PMIX_SERVER_URI*`
    /// are set) but its client library is not installed.
    #[error("a PMIx server started this process (PMIX_RANK / PMIX_SERVER_URI* are set), but the PMIx library could not be loaded (tried {tried}: {why}); install it (Debian/Ubuntu: apt-get install libpmix2; Fedora/RHEL: dnf install pmix)")]
    NoLibrary {
        /// The library names tried.
        tried: String,
        /// What the dynamic loader said.
        why: String,
    },
    /// The PMIx library lacks a function fastmsg calls (a PMIx older than
    /// 2.0).
    #[error("the PMIx library has no {name} ({why}); fastmsg needs PMIx 3 or later")]
    Symbol {
        /// The function.
        name: String,
        /// What the dynamic loader said.
        why: String,
    },
    /// The call returned an error status.
    #[error("{call} failed: PMIx status {status} ({text})")]
    Call {
        /// The PMIx function (and the key, for gets and puts).
        call: String,
        /// The status code it returned.
        status: i32,
        /// PMIx's text for that status.
        text: String,
    },
    /// The call succeeded but returned a value that is not what the key
    /// should hold.
    #[error("{call} returned {what}")]
    Value {
        /// The PMIx function and the key.
        call: String,
        /// What came back instead.
        what: String,
    },
}
