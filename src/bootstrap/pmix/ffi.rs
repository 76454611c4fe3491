//! The few types, constants and functions of the PMIx client library
//! that `client` uses, declared by hand after PMIx 4.x's `pmix_common.h`
//! and `pmix.h`, and the library itself, loaded at run time with `dlopen`
//! ([`lib`]): a build needs neither the headers nor the library, and a
//! process that is not started by a PMIx server never loads it.
//!
//! The structs are laid out as the C headers lay them out (sizes and
//! offsets asserted below and, against the installed headers when there
//! are some, by the tests in `layout_tests`).

#![allow(non_camel_case_types, unsafe_code)]

use crate::error::PmixError;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;

/// `pmix_status_t`.
pub type pmix_status_t = c_int;
/// `pmix_rank_t`.
pub type pmix_rank_t = u32;
/// `pmix_data_type_t`.
pub type pmix_data_type_t = u16;
/// `pmix_scope_t`.
pub type pmix_scope_t = u8;

/// `PMIX_MAX_NSLEN`.
pub const PMIX_MAX_NSLEN: usize = 255;
/// `PMIX_MAX_KEYLEN`.
pub const PMIX_MAX_KEYLEN: usize = 511;
/// `PMIX_SUCCESS`.
pub const PMIX_SUCCESS: pmix_status_t = 0;
/// `PMIX_RANK_WILDCARD` (`UINT32_MAX-1`): the job as a whole, for
/// job-level keys.
pub const RANK_WILDCARD: pmix_rank_t = u32::MAX - 1;
/// `PMIX_GLOBAL`: share with every process of the job.
pub const PMIX_GLOBAL: pmix_scope_t = 3;

/// Data types (`PMIX_BOOL` …) of the values read or written here.
pub const PMIX_BOOL: pmix_data_type_t = 1;
/// `PMIX_STRING`.
pub const PMIX_STRING: pmix_data_type_t = 3;
/// `PMIX_SIZE`.
pub const PMIX_SIZE: pmix_data_type_t = 4;
/// `PMIX_INT`.
pub const PMIX_INT: pmix_data_type_t = 6;
/// `PMIX_INT32`.
pub const PMIX_INT32: pmix_data_type_t = 9;
/// `PMIX_UINT`.
pub const PMIX_UINT: pmix_data_type_t = 11;
/// `PMIX_UINT8`.
pub const PMIX_UINT8: pmix_data_type_t = 12;
/// `PMIX_UINT16`.
pub const PMIX_UINT16: pmix_data_type_t = 13;
/// `PMIX_UINT32`.
pub const PMIX_UINT32: pmix_data_type_t = 14;
/// `PMIX_PROC_RANK`.
pub const PMIX_PROC_RANK: pmix_data_type_t = 40;

/// Keys read or passed as info.
pub const PMIX_JOB_SIZE: &CStr = c"pmix.job.size";
/// `PMIX_LOCAL_RANK` (uint16).
pub const PMIX_LOCAL_RANK: &CStr = c"pmix.lrank";
/// `PMIX_LOCAL_SIZE` (uint32).
pub const PMIX_LOCAL_SIZE: &CStr = c"pmix.local.size";
/// `PMIX_COLLECT_DATA` (bool).
pub const PMIX_COLLECT_DATA: &CStr = c"pmix.collect";
/// `PMIX_TIMEOUT` (int, seconds).
pub const PMIX_TIMEOUT: &CStr = c"pmix.timeout";

/// `pmix_proc_t`: a namespace and a rank.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_proc_t {
    /// `pmix_nspace_t`, NUL-terminated.
    pub nspace: [c_char; PMIX_MAX_NSLEN + 1],
    /// The rank.
    pub rank: pmix_rank_t,
}

impl Default for pmix_proc_t {
    fn default() -> Self {
        pmix_proc_t {
            nspace: [0; PMIX_MAX_NSLEN + 1],
            rank: 0,
        }
    }
}

/// The union of `pmix_value_t`: the members read or written here, and
/// its size and alignment (its largest member is `pmix_envar_t`, two
/// pointers and a char: 24 bytes on 64-bit targets).
#[repr(C)]
#[derive(Clone, Copy)]
pub union pmix_value_data {
    /// `bool flag`.
    pub flag: bool,
    /// `char *string`.
    pub string: *mut c_char,
    /// `size_t size`.
    pub size: usize,
    /// `int integer`.
    pub integer: c_int,
    /// `int32_t int32`.
    pub int32: i32,
    /// `unsigned int uint`.
    pub uint: c_uint,
    /// `uint8_t uint8`.
    pub uint8: u8,
    /// `uint16_t uint16`.
    pub uint16: u16,
    /// `uint32_t uint32`.
    pub uint32: u32,
    /// `pmix_rank_t rank`.
    pub rank: pmix_rank_t,
    /// Room of the largest member (`pmix_envar_t`).
    pub room: [*mut c_void; 3],
}

/// `pmix_value_t`: a type tag and the union.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_value_t {
    /// `pmix_data_type_t type`.
    pub type_: pmix_data_type_t,
    /// The value.
    pub data: pmix_value_data,
}

/// `pmix_info_t`: a key, directive flags and a value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_info_t {
    /// `pmix_key_t`, NUL-terminated.
    pub key: [c_char; PMIX_MAX_KEYLEN + 1],
    /// `pmix_info_directives_t flags`.
    pub flags: u32,
    /// The value.
    pub value: pmix_value_t,
}

impl Default for pmix_info_t {
    fn default() -> Self {
        pmix_info_t {
            key: [0; PMIX_MAX_KEYLEN + 1],
            flags: 0,
            value: pmix_value_t {
                type_: 0,
                data: pmix_value_data {
                    room: [std::ptr::null_mut(); 3],
                },
            },
        }
    }
}

// PMIx 4.x's layout on 64-bit Linux (`sizeof`/`offsetof` from the C
// headers; `layout_tests` compares with the installed headers).
#[cfg(target_pointer_width = "64")]
mod layout {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};
    static_assertions::const_assert_eq!(size_of::<pmix_proc_t>(), 260);
    static_assertions::const_assert_eq!(align_of::<pmix_proc_t>(), 4);
    static_assertions::const_assert_eq!(offset_of!(pmix_proc_t, rank), 256);
    static_assertions::const_assert_eq!(size_of::<pmix_value_t>(), 32);
    static_assertions::const_assert_eq!(align_of::<pmix_value_t>(), 8);
    static_assertions::const_assert_eq!(offset_of!(pmix_value_t, data), 8);
    static_assertions::const_assert_eq!(size_of::<pmix_info_t>(), 552);
    static_assertions::const_assert_eq!(align_of::<pmix_info_t>(), 8);
    static_assertions::const_assert_eq!(offset_of!(pmix_info_t, flags), 512);
    static_assertions::const_assert_eq!(offset_of!(pmix_info_t, value), 520);
}

/// The functions of the PMIx client library used here.
#[derive(Debug)]
pub struct Lib {
    /// `PMIx_Init(proc, info, ninfo)`.
    pub init: unsafe extern "C" fn(*mut pmix_proc_t, *mut pmix_info_t, usize) -> pmix_status_t,
    /// `PMIx_Finalize(info, ninfo)`.
    pub finalize: unsafe extern "C" fn(*const pmix_info_t, usize) -> pmix_status_t,
    /// `PMIx_Get(proc, key, info, ninfo, &val)`.
    pub get: unsafe extern "C" fn(
        *const pmix_proc_t,
        *const c_char,
        *const pmix_info_t,
        usize,
        *mut *mut pmix_value_t,
    ) -> pmix_status_t,
    /// `PMIx_Put(scope, key, val)`.
    pub put: unsafe extern "C" fn(pmix_scope_t, *const c_char, *mut pmix_value_t) -> pmix_status_t,
    /// `PMIx_Commit()`.
    pub commit: unsafe extern "C" fn() -> pmix_status_t,
    /// `PMIx_Fence(procs, nprocs, info, ninfo)`.
    pub fence:
        unsafe extern "C" fn(*const pmix_proc_t, usize, *const pmix_info_t, usize) -> pmix_status_t,
    /// `PMIx_Error_string(status)`.
    pub error_string: unsafe extern "C" fn(pmix_status_t) -> *const c_char,
    /// `PMIx_Value_destruct(val)`.
    pub value_destruct: unsafe extern "C" fn(*mut pmix_value_t),
    /// `PMIx_Info_load(info, key, data, type)`.
    pub info_load: unsafe extern "C" fn(
        *mut pmix_info_t,
        *const c_char,
        *const c_void,
        pmix_data_type_t,
    ) -> pmix_status_t,
    /// `PMIx_Get_version()`.
    pub get_version: unsafe extern "C" fn() -> *const c_char,
}

/// The names tried, in order: the run-time library of PMIx 2 to 5
/// (Debian's `libpmix2`), then the development link.
pub const LIBRARY_NAMES: &[&CStr] = &[c"libpmix.so.2", c"libpmix.so"];

fn dlerror_text() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until
    // the next dl* call of this thread.
    let p = unsafe { libc::dlerror() };
    if p.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-NULL and NUL-terminated (above).
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// Open the first of `names` that loads and look up every function.
///
/// # Errors
/// [`PmixError::NoLibrary`] naming what was tried and the package that
/// provides the library; [`PmixError::Symbol`] if a function is missing
/// (a PMIx too old).
// Each transmute's target type is the `Lib` field it is stored in, which
// spells the C signature once; repeating it at each call would be noise.
#[allow(clippy::missing_transmute_annotations)]
pub fn load(names: &[&CStr]) -> Result<Lib, PmixError> {
    let mut why = Vec::new();
    let mut handle = std::ptr::null_mut();
    for name in names {
        // SAFETY: `name` is NUL-terminated. RTLD_GLOBAL: the library's own
        // plugins, which it dlopens, resolve their symbols against it. The
        // handle is never closed (the functions stay valid for the life of
        // the process).
        handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if !handle.is_null() {
            break;
        }
        why.push(dlerror_text());
    }
    if handle.is_null() {
        return Err(PmixError::NoLibrary {
            tried: names
                .iter()
                .map(|n| n.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(", "),
            why: why.join("; "),
        });
    }
    let sym = |name: &CStr| -> Result<*mut c_void, PmixError> {
        // SAFETY: `handle` is a live handle from dlopen; `name` is
        // NUL-terminated.
        let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
        if p.is_null() {
            Err(PmixError::Symbol {
                name: name.to_string_lossy().into_owned(),
                why: dlerror_text(),
            })
        } else {
            Ok(p)
        }
    };
    let f = |name: &CStr| sym(name);
    // SAFETY: each symbol is the PMIx function of that name, whose C
    // signature (pmix.h, PMIx 2 to 5) is the one of the field it is stored
    // in; function and data pointers have one size and representation on
    // the targets dlopen serves.
    unsafe {
        Ok(Lib {
            init: std::mem::transmute::<*mut c_void, _>(f(c"PMIx_Init")?),
            finalize: std::mem::transmute::<*mut c_void, _>(f(c"PMIx_Finalize")?),
            get: std::mem::transmute::<*mut c_void, _>(f(c"PMIx_Get")?),
            put: std::mem::transmute::<*mut c_void, _>(f(c"PMIx_Put")?),
            commit: std::mem::transmute::<*mut c_void, _>(f(c"PMIx_Commit")?),
            fence: std::mem::transmute::<*mut c_void, _>(f(c"PMIx_Fence")?),
            error_string: std::mem::transmute::<*mut c_void, _>(f(c"PMIx_Error_string")?),
            value_destruct: std::mem::transmute::<*mut c_void, _>(f(c"PMIx_Value_destruct")?),
            info_load: std::mem::transmute::<*mut c_void, _>(f(c"PMIx_Info_load")?),
            get_version: std::mem::transmute::<*mut c_void, _>(f(c"PMIx_Get_version")?),
        })
    }
}

/// The PMIx library, loaded on first use ([`LIBRARY_NAMES`]).
///
/// # Errors
/// As [`load`], on every call once it failed.
pub fn lib() -> Result<&'static Lib, PmixError> {
    static LIB: OnceLock<Result<Lib, PmixError>> = OnceLock::new();
    LIB.get_or_init(|| load(LIBRARY_NAMES))
        .as_ref()
        .map_err(Clone::clone)
}
