//! Benchmarks of fastmsg (criterion in benches/).
