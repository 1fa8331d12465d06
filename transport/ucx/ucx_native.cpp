// Native mode of the UCX transport: ucp_put/get/atomic_op/ep_flush_nbx.
#include "transport/ucx/ucx_transport_impl.h"

namespace rwin::transport::ucx {

void UcxTransport::post_native(Peer& peer, Pending* p, const Work& w) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &UcxTransport::on_send_done;
  param.user_data = p;
  ucp_rkey_h rkey = w.rkey ? static_cast<const UcxRemoteKey*>(w.rkey)->get() : nullptr;
  const ucp_mem_h memh = w.local_mr ? static_cast<const UcxRegion*>(w.local_mr)->memh() : nullptr;
  if (memh && (w.op == Op::Write || w.op == Op::Read)) {
    // Window memory is UCX's own: passing its handle skips a registration-cache lookup. Caller
    // memory (no handle) goes without one: UCX looks it up or copies.
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    param.memh = memh;
  }
  ucs_status_ptr_t req = nullptr;
  switch (w.op) {
    case Op::Write:
      req = ucp_put_nbx(peer.ep, w.local, w.bytes, w.remote_addr, rkey, &param);
      break;
    case Op::Read:
      req = ucp_get_nbx(peer.ep, w.local, w.bytes, w.remote_addr, rkey, &param);
      break;
    case Op::AtomicAdd:
    case Op::FetchAdd:
    case Op::Swap:
    case Op::CompareSwap: {
      param.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
      param.datatype = ucp_dt_make_contig(8);
      ucp_atomic_op_t opcode = UCP_ATOMIC_OP_ADD;
      p->operand = w.operand;
      if (w.op != Op::AtomicAdd) {
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
        param.reply_buffer = &p->reply;
        p->user_reply = w.local;  // copied out on completion (may be null for Swap)
      }
      if (w.op == Op::Swap) opcode = UCP_ATOMIC_OP_SWAP;
      if (w.op == Op::CompareSwap) {
        // CSWAP: buffer holds the expected value, reply_buffer the new value in, the old one out.
        opcode = UCP_ATOMIC_OP_CSWAP;
        p->operand = w.compare;
        p->reply = w.operand;
      }
      req = ucp_atomic_op_nbx(peer.ep, opcode, &p->operand, 1, w.remote_addr, rkey, &param);
      break;
    }
    case Op::Flush:
      req = ucp_ep_flush_nbx(peer.ep, &param);
      break;
    case Op::Accumulate:  // refused in post()
      break;
  }
  sent(p, req);
}

}  // namespace rwin::transport::ucx
