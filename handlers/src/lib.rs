//! Collectives for fastmsg, written only against its public API.
