//! Build script: with the `ofi` feature, compile the libfabric shim;
//! otherwise it does nothing.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "ofi")]
    ofi_shim();
}

/// The `ofi` feature: libfabric's data-path calls are static inline
/// functions; `src/transport/ofi/shim.c` gives the ones we use a symbol.
#[cfg(feature = "ofi")]
fn ofi_shim() {
    println!("cargo:rerun-if-changed=src/transport/ofi/shim.c");
    if !std::path::Path::new("/usr/include/rdma/fabric.h").exists()
        && std::env::var_os("CPATH").is_none()
    {
        println!(
            "cargo:warning=feature `ofi` needs libfabric's headers (Debian: apt-get install libfabric-dev)"
        );
    }
    cc::Build::new()
        .file("src/transport/ofi/shim.c")
        .warnings(true)
        .compile("fastmsg_ofi_shim");
    println!("cargo:rustc-link-lib=fabric");
}
