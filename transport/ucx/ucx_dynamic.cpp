// Peers met at run time (TransportConfig::dynamic_peers, the agent of rwin/agent.h): add_peer,
// local_endpoint, connect_peer (the handshake in transport.h), and caller memory exposed to peers.
//
// Every run-time peer is reached in am mode, whatever UCX_TLS selects (tcp or shared memory):
//  * the am target applies every write itself and checks [addr, addr+len) against the live
//    exposed regions (Registry), so once an exposed region is destroyed no peer operation can
//    land in it, even from a peer that still holds the old key: it is dropped with a log line
//    and the sender's next Flush fails;
//  * native RMA on caller memory is applied without the owner: UCX's tcp emulation writes
//    wherever the request says, and cma (process_vm_writev) or a knem/xpmem mapping are done by
//    the initiator's process directly, neither checking that the memory is still registered;
//  * direct mode needs memory UCX allocated (posix/sysv): caller memory never maps.
// Its price is target progress (the agent's progress thread or its calls) and one copy at the
// target for eager messages.
#include <cstring>

#include "common/blob.h"
#include "common/log.h"
#include "transport/ucx/ucx_blob.h"
#include "transport/ucx/ucx_transport_impl.h"

namespace rwin::transport::ucx {

namespace {

constexpr uint32_t kEndpointMagic = 0x52574555;  // "RWEU": rwin endpoint, ucx (run-time peers)
constexpr uint16_t kEndpointVersion = 1;

// Caller memory exposed to peers: a ucp_mem_map of [addr, addr+bytes) (no allocation), its packed
// key, and its entry in the transport's registry of live ranges, which the am target consults.
class UcxExposed final : public UcxRegion {
 public:
  UcxExposed(ucp_context_h ctx, void* addr, size_t bytes, std::shared_ptr<Registry> registry)
      : ctx_(ctx), registry_(std::move(registry)) {
    const uint64_t base = reinterpret_cast<uint64_t>(addr);
    if (bytes - 1 > UINT64_MAX - base) {
      throw TransportError("ucx: cannot expose " + std::to_string(bytes) + " bytes at 0x" + hex(base) + ": the range wraps");
    }
    // Overlapping exposures would share one registry entry: the first to go would unprotect the
    // other's bytes, or leave its own exposed. Refused.
    auto it = registry_->ranges.upper_bound(base + bytes - 1);
    if (it != registry_->ranges.begin()) {
      --it;
      if (it->first + it->second > base) {
        throw TransportError("ucx: cannot expose " + std::to_string(bytes) + " bytes at 0x" + hex(base) +
                             ": they overlap the exposed range at 0x" + hex(it->first) + " (" +
                             std::to_string(it->second) + " bytes)");
      }
    }
    ucp_mem_map_params_t p{};
    p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    p.address = addr;
    p.length = bytes;
    ucs_status_t s = ucp_mem_map(ctx_, &p, &memh_);
    if (s != UCS_OK) {
      throw TransportError("ucx: ucp_mem_map of caller memory at 0x" + hex(base) + ", " + std::to_string(bytes) +
                           " bytes failed: " + status_text(s));
    }
    void* packed = nullptr;
    size_t packed_len = 0;
    s = ucp_rkey_pack(ctx_, memh_, &packed, &packed_len);
    if (s != UCS_OK) {
      ucp_mem_unmap(ctx_, memh_);
      throw TransportError("ucx: ucp_rkey_pack of caller memory at 0x" + hex(base) + " failed: " + status_text(s));
    }
    const auto* pb = static_cast<const uint8_t*>(packed);
    key_ = ucx_blob::pack_key(base, bytes, std::span(pb, packed_len));
    ucp_rkey_buffer_release(packed);
    addr_ = addr;
    bytes_ = bytes;
    registry_->ranges[base] = bytes;
  }
  ~UcxExposed() override {
    // First out of the registry: from here the am target refuses the range.
    registry_->ranges.erase(reinterpret_cast<uint64_t>(addr_));
    const ucs_status_t s = ucp_mem_unmap(ctx_, memh_);
    if (s != UCS_OK) RWIN_LOG(Warn, Ucx, "rwin: ucx: ucp_mem_unmap of exposed memory failed: %s", ucs_status_string(s));
  }
  UcxExposed(const UcxExposed&) = delete;
  UcxExposed& operator=(const UcxExposed&) = delete;
  std::vector<uint8_t> packed_key() const override { return key_; }

 private:
  ucp_context_h ctx_;
  std::shared_ptr<Registry> registry_;
  std::vector<uint8_t> key_;
};

}  // namespace

int UcxTransport::add_peer() {
  if (quiesced_) throw TransportError("ucx(" + tls_ + "): add_peer after the transport was closed");
  if (rma_mode_ == "native") {
    throw TransportError("ucx(" + tls_ + "): run-time peers need the am mode (rma mode is 'native'): see ucx_dynamic.cpp");
  }
  dynamic_ = true;
  const int p = nranks_;
  // Indices stay valid as the vectors grow: nothing keeps a Peer& or Inbound& across calls, and
  // add_peer never runs inside a UCX callback (the caller adds peers between transport calls).
  peers_.emplace_back();
  inbound_.emplace_back();
  peers_.back().error = "ucx(" + tls_ + "): run-time peer " + std::to_string(p) + " is not connected yet";
  ++nranks_;
  return p;
}

std::vector<uint8_t> UcxTransport::local_endpoint(int peer) {
  if (!dynamic_ || peer < 0 || peer >= nranks_) {
    throw TransportError("ucx(" + tls_ + "): local_endpoint(" + std::to_string(peer) + "): no such run-time peer (" +
                         std::to_string(nranks_) + " added)");
  }
  ucp_address_t* addr = nullptr;
  size_t addr_len = 0;
  const ucs_status_t s = ucp_worker_get_address(worker_.get(), &addr, &addr_len);
  if (s != UCS_OK) throw TransportError("ucx(" + tls_ + "): ucp_worker_get_address failed: " + status_text(s));
  // magic u32 | version u16 | our index for this peer u32 | addr_len u32 | worker address
  blob::Writer w(16 + addr_len);
  w.u32(kEndpointMagic);
  w.u16(kEndpointVersion);
  w.u32(static_cast<uint32_t>(peer));
  w.u32(static_cast<uint32_t>(addr_len));
  w.bytes(addr, addr_len);
  ucp_worker_release_address(worker_.get(), addr);
  return w.take();
}

void UcxTransport::connect_peer(int p, std::span<const uint8_t> remote) {
  if (!dynamic_ || p < 0 || p >= nranks_) {
    throw TransportError("ucx(" + tls_ + "): connect_peer(" + std::to_string(p) + "): no such run-time peer");
  }
  Peer& peer = peers_[static_cast<size_t>(p)];
  if (peer.ep) throw TransportError("ucx(" + tls_ + "): connect_peer(" + std::to_string(p) + "): already connected");
  blob::Reader r(remote);
  uint32_t magic = 0, index = 0, alen = 0;
  uint16_t version = 0;
  std::span<const uint8_t> address;
  if (!r.u32(magic) || !r.u16(version) || !r.u32(index) || !r.u32(alen) || !r.take(alen, address) || !r.done() ||
      magic != kEndpointMagic || version != kEndpointVersion || index > INT32_MAX || alen == 0) {
    throw TransportError("ucx(" + tls_ + "): connect_peer(" + std::to_string(p) + "): malformed endpoint (" +
                         std::to_string(remote.size()) + " bytes, magic 0x" + hex(magic) + ", version " +
                         std::to_string(version) + "; expected magic 0x" + hex(kEndpointMagic) + " version " +
                         std::to_string(kEndpointVersion) + ")");
  }
  // Peer-failure handling where the transports allow it (tcp); shared memory in UCX 1.13 has no
  // failure handler, and MODE_PEER would move it onto tcp: there the agent's keepalive and control
  // connection find a dead peer (fail_peer).
  // Asked only where UCX_TLS may select tcp (otherwise UCX logs an error for every attempt), and
  // not for our own worker (an agent importing its own region): MODE_PEER would move that from
  // UCX's self transport onto tcp loopback (measured: an 8-byte get ~30-160 us instead of ~1 us).
  ucp_address_t* own = nullptr;
  size_t own_len = 0;
  bool self = false;
  if (ucp_worker_get_address(worker_.get(), &own, &own_len) == UCS_OK) {
    self = own_len == address.size() && std::memcmp(own, address.data(), own_len) == 0;
    ucp_worker_release_address(worker_.get(), own);
  }
  const bool maybe_tcp = !self && (tls_ == "all" || tls_.find("tcp") != std::string::npos || tls_.front() == '^');
  ucp_ep_h ep = maybe_tcp ? create_ep(p, address.data(), UCP_ERR_HANDLING_MODE_PEER, /*may_fail=*/true) : nullptr;
  if (!ep) ep = create_ep(p, address.data());
  peer.ep = ep;
  peer.am = true;
  peer.direct = false;
  peer.self_id = static_cast<int32_t>(index);
  peer.error.clear();
  any_am_ = true;
  RWIN_LOG(Debug, Ucx, "ucx(%s): run-time peer %d connected (its index for us %u, %u-byte worker address), am rma",
           tls_.c_str(), p, index, alen);
}

std::unique_ptr<MemoryRegion> UcxTransport::expose_memory(void* addr, size_t bytes) {
  if (addr == nullptr || bytes == 0) {
    throw TransportError("ucx(" + tls_ + "): cannot expose caller memory at 0x" + hex(reinterpret_cast<uint64_t>(addr)) +
                         ", " + std::to_string(bytes) + " bytes: empty range");
  }
  if (quiesced_) throw TransportError("ucx(" + tls_ + "): expose_memory after the transport was closed");
  return std::make_unique<UcxExposed>(context_.get(), addr, bytes, registry_);
}

}  // namespace rwin::transport::ucx
