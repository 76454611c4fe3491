//! Loom models of fastmsg's lock-free code; run with `RUSTFLAGS="--cfg loom"`.
