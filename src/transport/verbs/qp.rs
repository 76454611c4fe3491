//! Thin safe-ish wrappers over rdma-sys: the device context, protection
//! domain, completion queue, memory registrations and RC queue pairs, each
//! released on drop. Every call's failure is a [`VerbsError::Call`] naming
//! the verbs function and the device.

#![allow(unsafe_code)]

use crate::error::VerbsError;
use rdma_sys::*;
use std::ffi::CStr;
use std::ptr;

fn errno() -> String {
    std::io::Error::last_os_error().to_string()
}

/// An opened device with its protection domain and one completion queue.
#[derive(Debug)]
pub(crate) struct Device {
    pub(crate) name: String,
    pub(crate) ctx: *mut ibv_context,
    pub(crate) pd: *mut ibv_pd,
    pub(crate) port: u8,
}

impl Device {
    /// Open the first device (or `FASTMSG_VERBS_DEVICE`), port
    /// `FASTMSG_VERBS_PORT` (default 1).
    pub(crate) fn open() -> Result<Device, VerbsError> {
        let mut n = 0;
        // SAFETY: `n` is a valid out-pointer; the list is freed below.
        let list = unsafe { ibv_get_device_list(&mut n) };
        if list.is_null() {
            return Err(VerbsError::NoDevice { why: errno() });
        }
        let want = crate::settings::var("FASTMSG_VERBS_DEVICE").ok();
        let mut chosen = None;
        for i in 0..n.max(0) as usize {
            // SAFETY: the list holds `n` valid device pointers.
            let dev = unsafe { *list.add(i) };
            // SAFETY: a valid device has a NUL-terminated name.
            let name = unsafe { CStr::from_ptr(ibv_get_device_name(dev)) }
                .to_string_lossy()
                .into_owned();
            if want.as_deref().is_none_or(|w| w == name) {
                chosen = Some((dev, name));
                break;
            }
        }
        let Some((dev, name)) = chosen else {
            // SAFETY: freeing the list we got.
            unsafe { ibv_free_device_list(list) };
            return Err(VerbsError::NoDevice {
                why: match want {
                    Some(w) => format!("{n} device(s), none named {w:?} (FASTMSG_VERBS_DEVICE)"),
                    None => "0 devices".into(),
                },
            });
        };
        // SAFETY: `dev` comes from the live list.
        let ctx = unsafe { ibv_open_device(dev) };
        // SAFETY: the context (if any) keeps what it needs of the device.
        unsafe { ibv_free_device_list(list) };
        let call = |call: &'static str| VerbsError::Call {
            call,
            device: name.clone(),
            why: errno(),
        };
        if ctx.is_null() {
            return Err(call("ibv_open_device"));
        }
        // SAFETY: a valid context.
        let pd = unsafe { ibv_alloc_pd(ctx) };
        if pd.is_null() {
            let e = call("ibv_alloc_pd");
            // SAFETY: closing the context we opened.
            unsafe { ibv_close_device(ctx) };
            return Err(e);
        }
        let port = crate::settings::var("FASTMSG_VERBS_PORT")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(1);
        Ok(Device {
            name,
            ctx,
            pd,
            port,
        })
    }

    pub(crate) fn call(&self, call: &'static str) -> VerbsError {
        VerbsError::Call {
            call,
            device: self.name.clone(),
            why: errno(),
        }
    }

    /// The port's LID, active MTU and GID `FASTMSG_VERBS_GID_INDEX`.
    pub(crate) fn address(&self) -> Result<(u16, ibv_mtu::Type, [u8; 16], u8), VerbsError> {
        // SAFETY: zeroed port attributes are a valid out-buffer.
        let mut attr: ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: valid context and out-pointer.
        if unsafe { ___ibv_query_port(self.ctx, self.port, &mut attr) } != 0 {
            return Err(self.call("ibv_query_port"));
        }
        let index: u8 = crate::settings::var("FASTMSG_VERBS_GID_INDEX")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        // SAFETY: a zeroed GID is a valid out-buffer.
        let mut gid: ibv_gid = unsafe { std::mem::zeroed() };
        // SAFETY: valid context and out-pointer.
        if unsafe { ibv_query_gid(self.ctx, self.port, i32::from(index), &mut gid) } != 0 {
            return Err(self.call("ibv_query_gid"));
        }
        // SAFETY: every bit pattern of the union is a valid byte array.
        Ok((attr.lid, attr.active_mtu, unsafe { gid.raw }, index))
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: everything allocated from the PD (MRs, QPs, CQs) is owned
        // by fields dropped before the device (see the field order of `RmaTransport`).
        unsafe {
            ibv_dealloc_pd(self.pd);
            ibv_close_device(self.ctx);
        }
    }
}

/// A completion queue.
#[derive(Debug)]
pub(crate) struct Cq(pub(crate) *mut ibv_cq);

impl Cq {
    pub(crate) fn new(dev: &Device, entries: i32) -> Result<Cq, VerbsError> {
        // SAFETY: valid context; no channel.
        let cq = unsafe { ibv_create_cq(dev.ctx, entries, ptr::null_mut(), ptr::null_mut(), 0) };
        if cq.is_null() {
            Err(dev.call("ibv_create_cq"))
        } else {
            Ok(Cq(cq))
        }
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: the QPs using it are destroyed first (field order).
        unsafe { ibv_destroy_cq(self.0) };
    }
}

/// A memory registration.
#[derive(Debug)]
pub(crate) struct Mr(pub(crate) *mut ibv_mr);

impl Mr {
    /// Register `len` bytes at `addr` for local and remote write.
    pub(crate) fn new(dev: &Device, addr: *mut u8, len: usize) -> Result<Mr, VerbsError> {
        let access = (ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
            | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE)
            .0 as i32;
        // SAFETY: the caller keeps the memory alive while registered.
        let mr = unsafe { ibv_reg_mr(dev.pd, addr as *mut libc::c_void, len.max(1), access) };
        if mr.is_null() {
            Err(dev.call("ibv_reg_mr"))
        } else {
            Ok(Mr(mr))
        }
    }

    pub(crate) fn lkey(&self) -> u32 {
        // SAFETY: a live registration.
        unsafe { (*self.0).lkey }
    }

    pub(crate) fn rkey(&self) -> u32 {
        // SAFETY: a live registration.
        unsafe { (*self.0).rkey }
    }

    /// The registered address (what peers add their offsets to).
    pub(crate) fn addr(&self) -> u64 {
        // SAFETY: a live registration.
        unsafe { (*self.0).addr as u64 }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: deregistering our own registration.
        unsafe { ibv_dereg_mr(self.0) };
    }
}

/// What one end tells the other to connect a queue pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct QpInfo {
    pub(crate) lid: u16,
    pub(crate) gid: [u8; 16],
    pub(crate) qpn: u32,
    pub(crate) psn: u32,
    /// The start of this end's rings area (the ring, credit and flush
    /// words are offsets into it, exchanged beside this).
    pub(crate) ring_addr: u64,
    /// Unused (kept in the wire form, always 0).
    pub(crate) credit_addr: u64,
    pub(crate) ring_rkey: u32,
    pub(crate) window_addr: u64,
    pub(crate) window_rkey: u32,
}

impl QpInfo {
    pub(crate) const BYTES: usize = 72;

    pub(crate) fn encode(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        b[0..2].copy_from_slice(&self.lid.to_le_bytes());
        b[2..18].copy_from_slice(&self.gid);
        b[20..24].copy_from_slice(&self.qpn.to_le_bytes());
        b[24..28].copy_from_slice(&self.psn.to_le_bytes());
        b[28..32].copy_from_slice(&self.ring_rkey.to_le_bytes());
        b[32..40].copy_from_slice(&self.ring_addr.to_le_bytes());
        b[40..48].copy_from_slice(&self.credit_addr.to_le_bytes());
        b[48..56].copy_from_slice(&self.window_addr.to_le_bytes());
        b[56..60].copy_from_slice(&self.window_rkey.to_le_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8; Self::BYTES]) -> QpInfo {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8"));
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[2..18]);
        QpInfo {
            lid: u16::from_le_bytes([b[0], b[1]]),
            gid,
            qpn: u32_at(20),
            psn: u32_at(24),
            ring_rkey: u32_at(28),
            ring_addr: u64_at(32),
            credit_addr: u64_at(40),
            window_addr: u64_at(48),
            window_rkey: u32_at(56),
        }
    }
}

/// An RC queue pair.
#[derive(Debug)]
pub(crate) struct Qp(pub(crate) *mut ibv_qp);

impl Qp {
    /// Create an RC QP on `cq` with room for `depth` outstanding sends and
    /// receives, 64 bytes of inline data, and move it to INIT.
    pub(crate) fn new(dev: &Device, cq: &Cq, depth: u32) -> Result<Qp, VerbsError> {
        // SAFETY: a zeroed init-attr is valid; fields set below.
        let mut init: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        init.send_cq = cq.0;
        init.recv_cq = cq.0;
        init.qp_type = ibv_qp_type::IBV_QPT_RC;
        init.cap.max_send_wr = depth;
        init.cap.max_recv_wr = depth;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        init.cap.max_inline_data = 64;
        // SAFETY: valid PD and attributes.
        let qp = unsafe { ibv_create_qp(dev.pd, &mut init) };
        if qp.is_null() {
            return Err(dev.call("ibv_create_qp"));
        }
        let qp = Qp(qp);
        // SAFETY: zeroed attributes are valid; fields set below.
        let mut a: ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ibv_qp_state::IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = dev.port;
        a.qp_access_flags = (ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
            | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE)
            .0;
        let mask = ibv_qp_attr_mask::IBV_QP_STATE
            | ibv_qp_attr_mask::IBV_QP_PKEY_INDEX
            | ibv_qp_attr_mask::IBV_QP_PORT
            | ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS;
        qp.modify(dev, &mut a, mask, "ibv_modify_qp(INIT)")?;
        Ok(qp)
    }

    pub(crate) fn num(&self) -> u32 {
        // SAFETY: a live QP.
        unsafe { (*self.0).qp_num }
    }

    fn modify(
        &self,
        dev: &Device,
        a: &mut ibv_qp_attr,
        mask: ibv_qp_attr_mask,
        what: &'static str,
    ) -> Result<(), VerbsError> {
        // SAFETY: valid QP and attributes.
        if unsafe { ibv_modify_qp(self.0, a, mask.0 as i32) } != 0 {
            Err(dev.call(what))
        } else {
            Ok(())
        }
    }

    /// INIT → RTR → RTS towards `remote`.
    pub(crate) fn connect(
        &self,
        dev: &Device,
        mtu: ibv_mtu::Type,
        gid_index: u8,
        my_psn: u32,
        remote: &QpInfo,
    ) -> Result<(), VerbsError> {
        // SAFETY: zeroed attributes are valid; fields set below.
        let mut a: ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ibv_qp_state::IBV_QPS_RTR;
        a.path_mtu = mtu;
        a.dest_qp_num = remote.qpn;
        a.rq_psn = remote.psn;
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer = 12;
        a.ah_attr.dlid = remote.lid;
        a.ah_attr.port_num = dev.port;
        if remote.gid != [0; 16] {
            // RoCE (or a routed IB fabric): address by GID.
            a.ah_attr.is_global = 1;
            a.ah_attr.grh.dgid.raw = remote.gid;
            a.ah_attr.grh.sgid_index = gid_index;
            a.ah_attr.grh.hop_limit = 1;
        }
        let mask = ibv_qp_attr_mask::IBV_QP_STATE
            | ibv_qp_attr_mask::IBV_QP_AV
            | ibv_qp_attr_mask::IBV_QP_PATH_MTU
            | ibv_qp_attr_mask::IBV_QP_DEST_QPN
            | ibv_qp_attr_mask::IBV_QP_RQ_PSN
            | ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC
            | ibv_qp_attr_mask::IBV_QP_MIN_RNR_TIMER;
        self.modify(dev, &mut a, mask, "ibv_modify_qp(RTR)")?;
        // SAFETY: as above.
        let mut a: ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ibv_qp_state::IBV_QPS_RTS;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.sq_psn = my_psn;
        a.max_rd_atomic = 1;
        let mask = ibv_qp_attr_mask::IBV_QP_STATE
            | ibv_qp_attr_mask::IBV_QP_TIMEOUT
            | ibv_qp_attr_mask::IBV_QP_RETRY_CNT
            | ibv_qp_attr_mask::IBV_QP_RNR_RETRY
            | ibv_qp_attr_mask::IBV_QP_SQ_PSN
            | ibv_qp_attr_mask::IBV_QP_MAX_QP_RD_ATOMIC;
        self.modify(dev, &mut a, mask, "ibv_modify_qp(RTS)")
    }

    /// Whether RDMA WRITEs on this QP are placed in order, so that the last
    /// word landing proves the whole write landed (rdma-core's answer; an
    /// older library or a device that cannot say counts as "no").
    pub(crate) fn writes_in_order(&self) -> bool {
        // SAFETY: a live QP; flags 0 asks the yes/no question.
        unsafe { ibv_query_qp_data_in_order(self.0, ibv_wr_opcode::IBV_WR_RDMA_WRITE, 0) > 0 }
    }

    /// Post one RDMA WRITE (`imm`: with immediate data, for the safe mode).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write(
        &self,
        wr_id: u64,
        local: u64,
        len: u32,
        lkey: u32,
        remote: u64,
        rkey: u32,
        imm: Option<u32>,
        flags: ibv_send_flags,
    ) -> Result<(), i32> {
        let mut sge = ibv_sge {
            addr: local,
            length: len,
            lkey,
        };
        // SAFETY: a zeroed work request is valid; fields set below.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.send_flags = flags.0;
        match imm {
            Some(v) => {
                wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM;
                wr.imm_data_invalidated_rkey_union.imm_data = v.to_be();
            }
            None => wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_WRITE,
        }
        wr.wr.rdma = rdma_t {
            remote_addr: remote,
            rkey,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: valid QP and work request; `sge` outlives the call (the
        // adapter reads the local bytes later, from registered memory the
        // caller keeps unchanged until the credit or completion says so;
        // inline data is copied during the call).
        let r = unsafe { ibv_post_send(self.0, &mut wr, &mut bad) };
        if r == 0 {
            Ok(())
        } else {
            Err(r)
        }
    }

    /// Post an empty receive (consumed by a write with immediate).
    pub(crate) fn post_recv(&self, wr_id: u64) -> Result<(), i32> {
        let mut wr = ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: ptr::null_mut(),
            num_sge: 0,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: valid QP and work request.
        let r = unsafe { ibv_post_recv(self.0, &mut wr, &mut bad) };
        if r == 0 {
            Ok(())
        } else {
            Err(r)
        }
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: destroying our own QP.
        unsafe { ibv_destroy_qp(self.0) };
    }
}

/// Poll up to `wc.len()` completions.
pub(crate) fn poll(cq: &Cq, wc: &mut [ibv_wc]) -> usize {
    // SAFETY: valid CQ; `wc` is valid for its length.
    let n = unsafe { ibv_poll_cq(cq.0, wc.len() as i32, wc.as_mut_ptr()) };
    n.max(0) as usize
}

/// A completion status as text.
pub(crate) fn status(s: ibv_wc_status::Type) -> String {
    // SAFETY: rdma-core returns a static string for any status.
    unsafe { CStr::from_ptr(ibv_wc_status_str(s)) }
        .to_string_lossy()
        .into_owned()
}
