//! The functions of `shim.c` (compiled by `build.rs` with the `ofi`
//! feature) and the one libfabric structure read from Rust. libfabric's
//! own data-path calls are static inline functions over operations tables
//! and cannot be linked; the shim gives each call used here a symbol.

#![allow(unsafe_code)]

use libc::{c_char, c_int, c_void, size_t, ssize_t};

/// Opaque: the shim's fabric, domain, address vector, CQ and endpoint.
#[repr(C)]
pub(crate) struct FmOfi {
    _private: [u8; 0],
}

/// Opaque: `struct fid_mr`.
#[repr(C)]
pub(crate) struct FidMr {
    _private: [u8; 0],
}

/// `struct fm_ofi_attr`: what the provider promised.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct FmOfiAttr {
    pub(crate) mr_mode: u64,
    pub(crate) msg_order: u64,
    pub(crate) comp_order: u64,
    pub(crate) max_order_waw_size: u64,
    pub(crate) inject_size: u64,
    pub(crate) cq_data_size: u64,
    pub(crate) tx_size: u64,
    pub(crate) manual_progress: u64,
    pub(crate) delivery_complete: u64,
    pub(crate) prov_name: [c_char; 64],
    pub(crate) domain_name: [c_char; 64],
}

/// `struct fi_cq_data_entry` (libfabric's ABI since 1.0).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct CqDataEntry {
    pub(crate) op_context: *mut c_void,
    pub(crate) flags: u64,
    pub(crate) len: size_t,
    pub(crate) buf: *mut c_void,
    pub(crate) data: u64,
}

/// `FI_MR_VIRT_ADDR`: remote addresses are virtual addresses (else
/// offsets from the registration's start).
pub(crate) const FI_MR_VIRT_ADDR: u64 = 1 << 4;
/// `FI_ORDER_DATA` (completion order): a write's bytes are placed in
/// order, so its last word landing proves the whole write landed.
pub(crate) const FI_ORDER_DATA: u64 = 1 << 16;
/// `FI_REMOTE_CQ_DATA`: a completion carries a peer's write-with-data.
pub(crate) const FI_REMOTE_CQ_DATA: u64 = 1 << 17;
/// `FI_EAGAIN`, `FI_EAVAIL`, `FI_ENODATA` (positive errno values).
pub(crate) const FI_EAGAIN: isize = 11;
pub(crate) const FI_EAVAIL: isize = 259;
pub(crate) const FI_ENODATA: c_int = 61;

extern "C" {
    pub(crate) fn fm_ofi_open(
        prov: *const c_char,
        node: *const c_char,
        cq_size: size_t,
        out: *mut *mut FmOfi,
        attr: *mut FmOfiAttr,
        what: *mut *const c_char,
    ) -> c_int;
    pub(crate) fn fm_ofi_close(o: *mut FmOfi);
    pub(crate) fn fm_ofi_getname(o: *mut FmOfi, buf: *mut c_void, len: *mut size_t) -> c_int;
    pub(crate) fn fm_ofi_av_insert(o: *mut FmOfi, name: *const c_void, addr: *mut u64) -> c_int;
    pub(crate) fn fm_ofi_mr_reg(
        o: *mut FmOfi,
        buf: *mut c_void,
        len: size_t,
        mr: *mut *mut FidMr,
        key: *mut u64,
        desc: *mut *mut c_void,
    ) -> c_int;
    pub(crate) fn fm_ofi_mr_close(mr: *mut FidMr);
    pub(crate) fn fm_ofi_writedata(
        o: *mut FmOfi,
        buf: *const c_void,
        len: size_t,
        desc: *mut c_void,
        data: u64,
        dest: u64,
        addr: u64,
        key: u64,
        ctx: *mut c_void,
    ) -> ssize_t;
    pub(crate) fn fm_ofi_write(
        o: *mut FmOfi,
        buf: *const c_void,
        len: size_t,
        desc: *mut c_void,
        dest: u64,
        addr: u64,
        key: u64,
        ctx: *mut c_void,
    ) -> ssize_t;
    pub(crate) fn fm_ofi_inject_write(
        o: *mut FmOfi,
        buf: *const c_void,
        len: size_t,
        dest: u64,
        addr: u64,
        key: u64,
    ) -> ssize_t;
    pub(crate) fn fm_ofi_cq_read(o: *mut FmOfi, buf: *mut c_void, count: size_t) -> ssize_t;
    pub(crate) fn fm_ofi_cq_readerr(
        o: *mut FmOfi,
        ctx: *mut *mut c_void,
        msg: *mut c_char,
        msg_len: size_t,
    ) -> c_int;
    pub(crate) fn fm_ofi_strerror(err: c_int) -> *const c_char;
    pub(crate) fn fm_ofi_cq_entry_size() -> size_t;
}
