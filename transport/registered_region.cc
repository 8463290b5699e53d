#include "transport/registered_region.h"

#include "common/status.h"
#include "common/strings.h"
#include "transport/put_message.h"
#include "transport/ucx_check.h"

namespace baton::transport {

absl::Status RegisteredRegion::PackKey() {
  void* rkey = nullptr;
  size_t rkey_bytes = 0;
  BATON_UCX_RETURN_IF_ERROR(ucp_rkey_pack(ucx_->context(), memh_, &rkey, &rkey_bytes),
                            "packing the remote key");
  // Peers get the region's put key and base with UCX's key (put_message.h, RegionKey).
  packed_rkey_ = PackRegionKey(
      {put_key_, base(), std::string_view(static_cast<const char*>(rkey), rkey_bytes)});
  ucp_rkey_buffer_release(rkey);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RegisteredRegion>> RegisteredRegion::Register(
    UcxWorker& ucx, void* base, size_t bytes, ucs_memory_type_t memory_type) {
  if (base == nullptr || bytes == 0) {
    return absl::InvalidArgumentError("a registered region needs memory (base and bytes > 0)");
  }
  std::unique_ptr<RegisteredRegion> r(new RegisteredRegion());
  r->ucx_ = &ucx;
  r->base_ = base;
  r->bytes_ = bytes;
  ucp_mem_map_params_t params = {};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
  params.address = base;
  params.length = bytes;
  params.memory_type = memory_type;
  BATON_UCX_RETURN_IF_ERROR(ucp_mem_map(ucx.context(), &params, &r->memh_),
                            StrCat("registering ", bytes, " bytes with UCX"));
  // Messaged puts are copies by this process's CPU: host memory only.
  if (memory_type == UCS_MEMORY_TYPE_HOST) r->AcceptPutMessages();
  BATON_RETURN_IF_ERROR(r->PackKey());
  return r;
}

absl::StatusOr<std::unique_ptr<RegisteredRegion>> RegisteredRegion::Allocate(UcxWorker& ucx,
                                                                             size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("an allocated region needs bytes > 0");
  std::unique_ptr<RegisteredRegion> r(new RegisteredRegion());
  r->ucx_ = &ucx;
  ucp_mem_map_params_t params = {};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  params.address = nullptr;
  params.length = bytes;
  params.flags = UCP_MEM_MAP_ALLOCATE;
  BATON_UCX_RETURN_IF_ERROR(ucp_mem_map(ucx.context(), &params, &r->memh_),
                            StrCat("allocating ", bytes, " bytes through UCX"));
  ucp_mem_attr_t attr = {};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  BATON_UCX_RETURN_IF_ERROR(ucp_mem_query(r->memh_, &attr), "querying UCX's allocation");
  r->base_ = attr.address;
  r->bytes_ = bytes;
  r->AcceptPutMessages();
  BATON_RETURN_IF_ERROR(r->PackKey());
  return r;
}

void RegisteredRegion::AcceptPutMessages() {
  put_key_ = ucx_->put_targets().Add(static_cast<std::byte*>(base_), bytes_);
}

RegisteredRegion::~RegisteredRegion() {
  if (put_key_ != 0) ucx_->put_targets().Remove(put_key_);
  if (memh_ != nullptr) ucp_mem_unmap(ucx_->context(), memh_);
}

}  // namespace baton::transport
