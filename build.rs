//! Build script: with the `pmix` feature, generate bindings to the few
//! functions, types and constants of the system's `pmix.h` that
//! `src/bootstrap/pmix/` uses (found with pkg-config: Debian's
//! `libpmix-dev` puts it under `/usr/lib/<triple>/pmix2/include`); with
//! the `ofi` feature, compile the libfabric shim. Without either it does
//! nothing.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "pmix")]
    pmix::generate();
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

#[cfg(feature = "pmix")]
mod pmix {
    use std::path::PathBuf;

    const FUNCTIONS: &[&str] = &[
        "PMIx_Init",
        "PMIx_Finalize",
        "PMIx_Get",
        "PMIx_Put",
        "PMIx_Commit",
        "PMIx_Fence",
        "PMIx_Error_string",
        "PMIx_Value_load",
        "PMIx_Value_destruct",
        "PMIx_Info_load",
    ];

    const VARS: &[&str] = &[
        "PMIX_SUCCESS",
        "PMIX_MAX_NSLEN",
        "PMIX_GLOBAL",
        "PMIX_BOOL",
        "PMIX_STRING",
        "PMIX_SIZE",
        "PMIX_INT",
        "PMIX_INT32",
        "PMIX_UINT",
        "PMIX_UINT8",
        "PMIX_UINT16",
        "PMIX_UINT32",
        "PMIX_PROC_RANK",
        "PMIX_JOB_SIZE",
        "PMIX_LOCAL_RANK",
        "PMIX_LOCAL_SIZE",
        "PMIX_COLLECT_DATA",
        "PMIX_TIMEOUT",
    ];

    pub fn generate() {
        let lib = pkg_config::Config::new()
            .atleast_version("3")
            .probe("pmix")
            .unwrap_or_else(|e| {
                panic!(
                    "feature `pmix` needs the PMIx library and its pkg-config file \
                     (Debian: apt-get install libpmix-dev): {e}"
                )
            });
        let mut b = bindgen::Builder::default()
            .header_contents("wrapper.h", "#include <pmix.h>\n")
            .allowlist_type("pmix_proc_t")
            .allowlist_type("pmix_value_t")
            .allowlist_type("pmix_info_t")
            .derive_default(true)
            .layout_tests(false)
            .parse_callbacks(Box::new(bindgen::CargoCallbacks));
        for f in FUNCTIONS {
            b = b.allowlist_function(f);
        }
        for v in VARS {
            b = b.allowlist_var(v);
        }
        for dir in &lib.include_paths {
            b = b.clang_arg(format!("-I{}", dir.display()));
        }
        let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
        b.generate()
            .expect("bindgen could not parse pmix.h (libclang-dev installed?)")
            .write_to_file(out.join("pmix_bindings.rs"))
            .expect("write the PMIx bindings");
    }
}
