// Memory of the UCX transport: window allocation (ucp_mem_map, rkey packing), caller memory,
// unpacking peers' keys (and their mapping for direct peers), and the direct-mode pointer.
#include <cstring>

#include "common/log.h"
#include "transport/ucx/ucx_blob.h"
#include "transport/ucx/ucx_transport_impl.h"

namespace rwin::transport::ucx {

UcxMemory::UcxMemory(ucp_context_h ctx, size_t bytes, std::shared_ptr<Registry> registry)
    : ctx_(ctx), registry_(std::move(registry)) {
  ucp_mem_map_params_t p{};
  p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  p.address = nullptr;
  p.length = bytes;
  p.flags = UCP_MEM_MAP_ALLOCATE;
  ucs_status_t s = ucp_mem_map(ctx, &p, &memh_);
  if (s != UCS_OK) {
    throw TransportError("ucx: ucp_mem_map(ALLOCATE, " + std::to_string(bytes) + " bytes) failed: " + status_text(s));
  }
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  s = ucp_mem_query(memh_, &attr);
  if (s != UCS_OK) {
    ucp_mem_unmap(ctx_, memh_);
    throw TransportError("ucx: ucp_mem_query failed: " + status_text(s));
  }
  addr_ = attr.address;
  bytes_ = bytes;
  std::memset(addr_, 0, bytes_);
  void* packed = nullptr;
  size_t packed_len = 0;
  s = ucp_rkey_pack(ctx_, memh_, &packed, &packed_len);
  if (s != UCS_OK) {
    ucp_mem_unmap(ctx_, memh_);
    throw TransportError("ucx: ucp_rkey_pack failed: " + status_text(s));
  }
  const auto* pb = static_cast<const uint8_t*>(packed);
  raw_key_.assign(pb, pb + packed_len);
  ucp_rkey_buffer_release(packed);
  key_ = ucx_blob::pack_key(reinterpret_cast<uint64_t>(addr_), bytes_, raw_key_);
  if (registry_) registry_->ranges[reinterpret_cast<uint64_t>(addr_)] = bytes_;
}

UcxMemory::~UcxMemory() {
  if (registry_) registry_->ranges.erase(reinterpret_cast<uint64_t>(addr_));
  ucs_status_t s = ucp_mem_unmap(ctx_, memh_);
  if (s != UCS_OK) RWIN_LOG(Warn, Ucx, "rwin: ucx: ucp_mem_unmap failed: %s", ucs_status_string(s));
}

std::unique_ptr<MemoryRegion> UcxTransport::allocate(size_t bytes) {
  return std::make_unique<UcxMemory>(context_.get(), bytes, registry_);
}

std::unique_ptr<MemoryRegion> UcxTransport::register_memory(void* addr, size_t bytes) {
  if (addr == nullptr || bytes == 0) {
    char where[64];
    std::snprintf(where, sizeof where, "%p", addr);
    throw TransportError("ucx: rank " + std::to_string(rank_) + ": cannot register caller memory at " + where +
                         ", " + std::to_string(bytes) + " bytes: empty range");
  }
  return std::make_unique<UcxCallerMemory>(addr, bytes);
}

std::unique_ptr<RemoteKey> UcxTransport::unpack_key(int peer, std::span<const uint8_t> b) {
  if (peer < 0 || peer >= nranks_ || !peers_[static_cast<size_t>(peer)].ep) {
    throw TransportError("ucx: unpack_key for unknown peer " + std::to_string(peer));
  }
  const auto k = ucx_blob::parse_key(b);
  if (!k) {
    throw TransportError("ucx: rank " + std::to_string(rank_) + ": malformed memory key from rank " +
                         std::to_string(peer) + " (" + std::to_string(b.size()) + " bytes)");
  }
  ucp_rkey_h rkey = nullptr;
  ucs_status_t s = ucp_ep_rkey_unpack(peers_[static_cast<size_t>(peer)].ep, k->raw.data(), &rkey);
  if (s != UCS_OK) {
    throw TransportError("ucx: rank " + std::to_string(rank_) + ": ucp_ep_rkey_unpack for rank " +
                         std::to_string(peer) + " failed: " + status_text(s));
  }
  auto key = std::make_unique<UcxRemoteKey>(rkey, k->base, k->bytes);
  if (peers_[static_cast<size_t>(peer)].direct) {
    void* ptr = nullptr;
    s = ucp_rkey_ptr(rkey, key->base(), &ptr);
    if (s != UCS_OK) {  // the probe of this peer mapped; a window that does not is a UCX surprise
      throw TransportError("ucx: rank " + std::to_string(rank_) + ": window of rank " + std::to_string(peer) +
                           " is not mapped (ucp_rkey_ptr: " + status_text(s) +
                           ") though the peer's probe region was; set RWIN_UCX_RMA=native");
    }
    key->set_mapped(ptr);
  }
  return key;
}

void* UcxTransport::mapped(int peer, const RemoteKey& key, uint64_t remote_addr, size_t bytes) const noexcept {
  if (peer < 0 || peer >= nranks_ || !peers_[static_cast<size_t>(peer)].direct) return nullptr;
  const auto& rk = static_cast<const UcxRemoteKey&>(key);
  if (!rk.mapped() || remote_addr < rk.base() || remote_addr - rk.base() > rk.bytes() ||
      bytes > rk.bytes() - (remote_addr - rk.base())) {
    return nullptr;
  }
  return rk.mapped() + (remote_addr - rk.base());
}

}  // namespace rwin::transport::ucx
