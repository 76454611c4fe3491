//! The generated bindings to `pmix.h` (build.rs: only the functions,
//! types and constants `client` uses).

#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code,
    unsafe_code,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]

include!(concat!(env!("OUT_DIR"), "/pmix_bindings.rs"));

/// `PMIX_RANK_WILDCARD` (`UINT32_MAX-1`, which bindgen does not evaluate):
/// the job as a whole, for job-level keys.
pub const RANK_WILDCARD: pmix_rank_t = u32::MAX - 1;
