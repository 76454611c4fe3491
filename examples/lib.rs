//! Shared helpers of the example programs.
