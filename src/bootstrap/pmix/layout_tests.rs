//! The hand-declared PMIx structs against the installed C headers: a
//! small C program prints `sizeof`, `_Alignof` and `offsetof` of
//! `pmix_proc_t`, `pmix_value_t` and `pmix_info_t` and the constants used,
//! and the test compares them with `ffi`'s. Skips (saying why) where the
//! headers (`libpmix-dev`) or a C compiler are missing; the sizes of PMIx
//! 4.x are asserted at compile time in `ffi` either way. Also: a library
//! that is not there gives the typed error naming the package.

use super::ffi::{self, pmix_info_t, pmix_proc_t, pmix_value_t};
use crate::error::PmixError;
use std::mem::{align_of, offset_of, size_of};
use std::process::Command;

const PROGRAM: &str = r#"
#include <stdio.h>
#include <stddef.h>
#include <pmix.h>
int main(void) {
    printf("%zu %zu %zu\n", sizeof(pmix_proc_t), _Alignof(pmix_proc_t), offsetof(pmix_proc_t, rank));
    printf("%zu %zu %zu\n", sizeof(pmix_value_t), _Alignof(pmix_value_t), offsetof(pmix_value_t, data));
    printf("%zu %zu %zu %zu\n", sizeof(pmix_info_t), _Alignof(pmix_info_t), offsetof(pmix_info_t, flags), offsetof(pmix_info_t, value));
    printf("%d %d %d %d %d %d %d %d %d %d %d\n", PMIX_MAX_NSLEN, PMIX_MAX_KEYLEN, PMIX_BOOL, PMIX_STRING, PMIX_SIZE,
           PMIX_INT, PMIX_INT32, PMIX_UINT, PMIX_UINT8, PMIX_UINT16, PMIX_UINT32);
    printf("%d %d %u\n", PMIX_PROC_RANK, PMIX_GLOBAL, (unsigned)PMIX_RANK_WILDCARD);
    printf("%s %s %s %s %s\n", PMIX_JOB_SIZE, PMIX_LOCAL_RANK, PMIX_LOCAL_SIZE, PMIX_COLLECT_DATA, PMIX_TIMEOUT);
    return 0;
}
"#;

/// The include directory of the installed headers, if any.
fn include_dir() -> Option<String> {
    if let Ok(o) = Command::new("pkg-config")
        .args(["--variable=includedir", "pmix"])
        .output()
    {
        let d = String::from_utf8_lossy(&o.stdout).trim().to_owned();
        if o.status.success() && std::path::Path::new(&d).join("pmix.h").exists() {
            return Some(d);
        }
    }
    ["/usr/include", "/usr/lib/x86_64-linux-gnu/pmix2/include"]
        .into_iter()
        .find(|d| std::path::Path::new(d).join("pmix.h").exists())
        .map(str::to_owned)
}

#[test]
fn structs_match_the_installed_headers() {
    let Some(inc) = include_dir() else {
        eprintln!("skipped: no pmix.h (apt-get install libpmix-dev)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("fastmsg-pmix-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let (src, exe) = (dir.join("layout.c"), dir.join("layout"));
    std::fs::write(&src, PROGRAM).expect("write the C program");
    let cc = match Command::new("cc")
        .arg(format!("-I{inc}"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            eprintln!("skipped: no C compiler ({e})");
            return;
        }
    };
    assert!(
        cc.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(&exe).output().expect("run the C program");
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let ours = format!(
        "{} {} {}\n{} {} {}\n{} {} {} {}\n{} {} {} {} {} {} {} {} {} {} {}\n{} {} {}\n{} {} {} {} {}\n",
        size_of::<pmix_proc_t>(),
        align_of::<pmix_proc_t>(),
        offset_of!(pmix_proc_t, rank),
        size_of::<pmix_value_t>(),
        align_of::<pmix_value_t>(),
        offset_of!(pmix_value_t, data),
        size_of::<pmix_info_t>(),
        align_of::<pmix_info_t>(),
        offset_of!(pmix_info_t, flags),
        offset_of!(pmix_info_t, value),
        ffi::PMIX_MAX_NSLEN,
        ffi::PMIX_MAX_KEYLEN,
        ffi::PMIX_BOOL,
        ffi::PMIX_STRING,
        ffi::PMIX_SIZE,
        ffi::PMIX_INT,
        ffi::PMIX_INT32,
        ffi::PMIX_UINT,
        ffi::PMIX_UINT8,
        ffi::PMIX_UINT16,
        ffi::PMIX_UINT32,
        ffi::PMIX_PROC_RANK,
        ffi::PMIX_GLOBAL,
        ffi::RANK_WILDCARD,
        ffi::PMIX_JOB_SIZE.to_str().unwrap(),
        ffi::PMIX_LOCAL_RANK.to_str().unwrap(),
        ffi::PMIX_LOCAL_SIZE.to_str().unwrap(),
        ffi::PMIX_COLLECT_DATA.to_str().unwrap(),
        ffi::PMIX_TIMEOUT.to_str().unwrap(),
    );
    assert_eq!(text, ours, "the C headers (left) and ffi.rs (right) differ");
}

#[test]
fn a_missing_library_is_a_typed_error_naming_the_package() {
    let e = ffi::load(&[c"libpmix-not-installed.so.9"]).expect_err("no such library");
    assert!(matches!(e, PmixError::NoLibrary { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("libpmix-not-installed.so.9"), "{text}");
    assert!(text.contains("apt-get install libpmix2"), "{text}");
}

#[test]
fn the_installed_library_loads_with_every_function() {
    match ffi::load(ffi::LIBRARY_NAMES) {
        Ok(_) => {
            let v = super::library_version().expect("loaded above");
            assert!(v.contains("PMIx"), "version string {v:?}");
        }
        Err(PmixError::NoLibrary { why, .. }) => {
            eprintln!("skipped: no PMIx library here ({why})");
        }
        Err(e) => panic!("{e}"),
    }
}
