// The channel one Baton process opens to another (router to worker, prefill worker to
// decode worker), with the settings they all need: keepalive pings that notice a peer
// that vanished without a FIN, under long-lived token streams, and reconnection within
// a second after a restart instead of gRPC's default backoff of up to two minutes.
#pragma once

#include <memory>
#include <string>

#include "grpcpp/channel.h"

namespace baton::service {

std::shared_ptr<grpc::Channel> InternalChannel(const std::string& target);

}  // namespace baton::service
