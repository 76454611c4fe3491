/*
 * The libfabric calls the `ofi` transport makes (cargo feature `ofi`).
 *
 * libfabric's data-path functions (fi_write, fi_cq_read, fi_mr_reg, ...)
 * are static inline wrappers over the provider's operations tables, so
 * they have no symbol to link against. This file gives each call the
 * transport needs a real function with plain arguments; the Rust side
 * (`sys.rs`) declares exactly these. Set-up (fi_getinfo to fi_enable)
 * is one call, `fm_ofi_open`, which also reports what the provider
 * promised (ordering, memory-registration mode, sizes).
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fm_ofi {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	uint64_t next_key;
};

/* What the chosen provider promised; filled by fm_ofi_open. */
struct fm_ofi_attr {
	uint64_t mr_mode;
	uint64_t msg_order;
	uint64_t comp_order;
	uint64_t max_order_waw_size;
	uint64_t inject_size;
	uint64_t cq_data_size;
	uint64_t tx_size;
	uint64_t manual_progress;
	uint64_t delivery_complete;
	char prov_name[64];
	char domain_name[64];
};

static void fm_close_all(struct fm_ofi *o)
{
	if (o->ep)
		fi_close(&o->ep->fid);
	if (o->cq)
		fi_close(&o->cq->fid);
	if (o->av)
		fi_close(&o->av->fid);
	if (o->domain)
		fi_close(&o->domain->fid);
	if (o->fabric)
		fi_close(&o->fabric->fid);
	if (o->info)
		fi_freeinfo(o->info);
	free(o);
}

/*
 * Open provider `prov` (NULL: libfabric's choice) with an RDM endpoint
 * bound to address `node` (NULL: any). Returns 0, or a negative fi_errno
 * with `what` naming the call that failed (-FI_ENODATA from fi_getinfo:
 * no provider matched).
 */
int fm_ofi_open(const char *prov, const char *node, size_t cq_size, struct fm_ofi **out,
		struct fm_ofi_attr *attr, const char **what)
{
	struct fi_info *hints = fi_allocinfo();
	struct fm_ofi *o = calloc(1, sizeof(*o));
	int ret;
	*out = NULL;
	if (!hints || !o) {
		*what = "fi_allocinfo";
		fi_freeinfo(hints);
		free(o);
		return -FI_ENOMEM;
	}
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
	hints->mode = 0;
	/* Every registration mode this code handles. */
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	if (prov) {
		hints->fabric_attr->prov_name = strdup(prov);
	}
	*what = "fi_getinfo";
	ret = fi_getinfo(FI_VERSION(1, 9), node, NULL, node ? FI_SOURCE : 0, hints, &o->info);
	fi_freeinfo(hints);
	if (ret) {
		free(o);
		return ret;
	}
	struct fi_info *i = o->info;
	uint64_t waw = FI_ORDER_WAW | FI_ORDER_RMA_WAW;
	attr->mr_mode = (uint64_t)i->domain_attr->mr_mode;
	attr->msg_order = i->tx_attr->msg_order;
	attr->comp_order = i->tx_attr->comp_order;
	attr->max_order_waw_size = i->ep_attr->max_order_waw_size;
	attr->inject_size = i->tx_attr->inject_size;
	attr->cq_data_size = i->domain_attr->cq_data_size;
	attr->tx_size = i->tx_attr->size;
	attr->manual_progress = i->domain_attr->data_progress == FI_PROGRESS_MANUAL;
	/* Writes not ordered after each other: each completes only once
	 * delivered, so a write issued after a completion lands after. */
	attr->delivery_complete = (i->tx_attr->msg_order & waw) == 0;
	if (attr->delivery_complete)
		i->tx_attr->op_flags |= FI_DELIVERY_COMPLETE;
	snprintf(attr->prov_name, sizeof(attr->prov_name), "%s",
		 i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "?");
	snprintf(attr->domain_name, sizeof(attr->domain_name), "%s",
		 i->domain_attr->name ? i->domain_attr->name : "?");

	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA, .size = cq_size,
				      .wait_obj = FI_WAIT_NONE };
	*what = "fi_fabric";
	if ((ret = fi_fabric(i->fabric_attr, &o->fabric, NULL)))
		goto fail;
	*what = "fi_domain";
	if ((ret = fi_domain(o->fabric, i, &o->domain, NULL)))
		goto fail;
	*what = "fi_av_open";
	if ((ret = fi_av_open(o->domain, &av_attr, &o->av, NULL)))
		goto fail;
	*what = "fi_cq_open";
	if ((ret = fi_cq_open(o->domain, &cq_attr, &o->cq, NULL)))
		goto fail;
	*what = "fi_endpoint";
	if ((ret = fi_endpoint(o->domain, i, &o->ep, NULL)))
		goto fail;
	*what = "fi_ep_bind(av)";
	if ((ret = fi_ep_bind(o->ep, &o->av->fid, 0)))
		goto fail;
	*what = "fi_ep_bind(cq)";
	if ((ret = fi_ep_bind(o->ep, &o->cq->fid, FI_TRANSMIT | FI_RECV)))
		goto fail;
	*what = "fi_enable";
	if ((ret = fi_enable(o->ep)))
		goto fail;
	o->next_key = 1;
	*out = o;
	return 0;
fail:
	fm_close_all(o);
	return ret;
}

void fm_ofi_close(struct fm_ofi *o)
{
	if (o)
		fm_close_all(o);
}

/* The endpoint's address, `*len` bytes at most; sets `*len`. */
int fm_ofi_getname(struct fm_ofi *o, void *buf, size_t *len)
{
	return fi_getname(&o->ep->fid, buf, len);
}

/* Insert one peer address; 0 and `*addr` set, or a negative fi_errno. */
int fm_ofi_av_insert(struct fm_ofi *o, const void *name, uint64_t *addr)
{
	fi_addr_t a = FI_ADDR_UNSPEC;
	int n = fi_av_insert(o->av, name, 1, &a, 0, NULL);
	if (n != 1)
		return n < 0 ? n : -FI_EADDRNOTAVAIL;
	*addr = a;
	return 0;
}

/*
 * Register `len` bytes at `buf` for local and remote writes. Sets the
 * registration, its remote key and its local descriptor.
 */
int fm_ofi_mr_reg(struct fm_ofi *o, void *buf, size_t len, struct fid_mr **mr, uint64_t *key,
		  void **desc)
{
	uint64_t access = FI_WRITE | FI_REMOTE_WRITE;
	int ret = fi_mr_reg(o->domain, buf, len, access, 0, o->next_key++, 0, mr, NULL);
	if (ret)
		return ret;
	if (o->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		if ((ret = fi_mr_bind(*mr, &o->ep->fid, 0)) || (ret = fi_mr_enable(*mr))) {
			fi_close(&(*mr)->fid);
			return ret;
		}
	}
	*key = fi_mr_key(*mr);
	*desc = fi_mr_desc(*mr);
	return 0;
}

void fm_ofi_mr_close(struct fid_mr *mr)
{
	fi_close(&mr->fid);
}

ssize_t fm_ofi_write(struct fm_ofi *o, const void *buf, size_t len, void *desc, uint64_t dest,
		     uint64_t addr, uint64_t key, void *ctx)
{
	return fi_write(o->ep, buf, len, desc, dest, addr, key, ctx);
}

ssize_t fm_ofi_writedata(struct fm_ofi *o, const void *buf, size_t len, void *desc,
			 uint64_t data, uint64_t dest, uint64_t addr, uint64_t key, void *ctx)
{
	return fi_writedata(o->ep, buf, len, desc, data, dest, addr, key, ctx);
}

/* A small write copied during the call (no completion). */
ssize_t fm_ofi_inject_write(struct fm_ofi *o, const void *buf, size_t len, uint64_t dest,
			    uint64_t addr, uint64_t key)
{
	return fi_inject_write(o->ep, buf, len, dest, addr, key);
}

/*
 * Read up to `count` completions into `buf` (struct fi_cq_data_entry:
 * op_context, flags, len, buf, data). Returns how many, -FI_EAGAIN for
 * none, or -FI_EAVAIL when an error entry waits (fm_ofi_cq_readerr).
 */
ssize_t fm_ofi_cq_read(struct fm_ofi *o, void *buf, size_t count)
{
	return fi_cq_read(o->cq, buf, count);
}

/* Take one error completion: its context and a message. */
int fm_ofi_cq_readerr(struct fm_ofi *o, void **ctx, char *msg, size_t msg_len)
{
	struct fi_cq_err_entry e;
	memset(&e, 0, sizeof(e));
	ssize_t n = fi_cq_readerr(o->cq, &e, 0);
	if (n != 1)
		return n < 0 ? (int)n : -FI_EAGAIN;
	*ctx = e.op_context;
	snprintf(msg, msg_len, "%s (%s)", fi_strerror(e.err),
		 fi_cq_strerror(o->cq, e.prov_errno, e.err_data, NULL, 0));
	return 0;
}

const char *fm_ofi_strerror(int err)
{
	return fi_strerror(err < 0 ? -err : err);
}

size_t fm_ofi_cq_entry_size(void)
{
	return sizeof(struct fi_cq_data_entry);
}
