// The rendezvous store of a group whose ranks run on several hosts (`--group-leader
// HOST:PORT`): rank 0 serves it over TCP, the other ranks connect to it. It holds what
// FileStore holds on one host (each rank's gloo address), and nothing else.
//
// The port is reachable from the network, so every connection must first present the
// group's token (the contents of --internal-token-file, compared in constant time);
// anything else is refused with UNAUTHENTICATED and the connection closed. Keys, values,
// their number and total size, waits and connections are all bounded
// (parallel/store_frame.h, TcpStoreServerOptions).
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "parallel/store.h"

namespace baton::parallel {

struct TcpStoreServerOptions {
  std::string host = "127.0.0.1";  // the address to bind (a name is resolved)
  int port = 0;                    // 0: any free port (tests)
  std::string token;  // required: kMinTokenBytes to kMaxTokenBytes (common/secret_token.h)
  int max_connections = 256;
  size_t max_keys = 65536;
  size_t max_total_bytes = size_t{64} << 20;
  std::chrono::milliseconds hello_timeout{5000};  // to present the token
};

class TcpStoreServer : public Store {
 public:
  // Binds and starts serving. InvalidArgument for a short token; Unavailable naming the
  // address when it cannot bind.
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(const TcpStoreServerOptions& o);
  ~TcpStoreServer() override;  // closes every connection and waits for their threads

  int port() const { return port_; }

  // The leader's own use of the store, in process.
  absl::Status Set(const std::string& key, std::string_view value) override;
  absl::StatusOr<std::string> Get(const std::string& key,
                                  std::chrono::milliseconds timeout) override;

  int64_t refused() const;  // connections refused for their token or their bytes

 private:
  explicit TcpStoreServer(TcpStoreServerOptions o) : options_(std::move(o)) {}
  void AcceptLoop();
  void Serve(int fd);
  bool Authenticate(int fd);

  TcpStoreServerOptions options_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread accept_;

  mutable std::mutex mu_;
  std::condition_variable changed_;  // a key was set, a connection ended, or stop
  std::map<std::string, std::string> values_;
  size_t total_bytes_ = 0;
  int connections_ = 0;
  std::map<int, bool> open_fds_;  // to shut down on stop
  int64_t refused_ = 0;
  bool stop_ = false;
};

class TcpStore : public Store {
 public:
  // Connects to the leader at "HOST:PORT" and presents `token`, retrying while the leader
  // is not up yet, for up to `timeout`. Unauthenticated when the leader refuses the token.
  static absl::StatusOr<std::unique_ptr<TcpStore>> Connect(const std::string& leader,
                                                           const std::string& token,
                                                           std::chrono::milliseconds timeout);
  ~TcpStore() override;

  absl::Status Set(const std::string& key, std::string_view value) override;
  absl::StatusOr<std::string> Get(const std::string& key,
                                  std::chrono::milliseconds timeout) override;

  // This host's address on the connection to the leader: the interface the group talks
  // over, where this rank's gloo listener binds.
  const std::string& local_address() const { return local_address_; }

 private:
  TcpStore() = default;
  absl::StatusOr<std::string> Call(const std::string& body, std::chrono::milliseconds timeout);

  std::mutex mu_;
  int fd_ = -1;
  std::string leader_;
  std::string local_address_;
};

// "HOST:PORT" (HOST may be a name or "[v6]") into its parts; InvalidArgument naming
// `flag` otherwise.
absl::Status SplitHostPort(const std::string& address, const char* flag, std::string* host,
                           int* port);

}  // namespace baton::parallel
