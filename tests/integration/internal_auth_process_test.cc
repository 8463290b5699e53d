// The internal plane between real processes (issue 25 §1): workers started with a cluster
// token answer every internal method UNAUTHENTICATED to callers without it, or with another
// one; a prefill worker and a router holding the token serve as before; a router with
// another token is refused at start with the flag's name; a worker will not serve openly
// beyond loopback. Then the same over mutual TLS, with certificates made here by openssl.
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "baton/internal/v1/kv_events.grpc.pb.h"
#include "baton/internal/v1/kv_transfer.grpc.pb.h"
#include "baton/internal/v1/worker.grpc.pb.h"
#include "common/subprocess.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "service/internal_auth.h"
#include "tests/integration/router_proc.h"
#include "tests/integration/worker_proc.h"

namespace baton::service {
namespace {

namespace ipb = ::baton::internal::v1;

const std::string kModel = std::string(BATON_SOURCE_DIR) + "/models/baton-tiny";

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text << "\n";
  return path;
}

// Every method of the internal services, as /package.Service/Method paths.
std::vector<std::string> InternalMethods() {
  std::vector<std::string> out;
  // Through a message of each file: that links its descriptors in.
  for (const auto& [file, name] :
       {std::pair{ipb::GenerateRequest::descriptor()->file(), "Worker"},
        std::pair{ipb::SubscribeKvEventsRequest::descriptor()->file(), "KvEvents"},
        std::pair{ipb::ReserveRequest::descriptor()->file(), "KvTransfer"}}) {
    const google::protobuf::ServiceDescriptor* s = file->FindServiceByName(name);
    EXPECT_NE(s, nullptr) << name;
    if (s == nullptr) continue;
    for (int i = 0; i < s->method_count(); ++i) {
      out.push_back("/" + s->full_name() + "/" + s->method(i)->name());
    }
  }
  return out;
}

// Calls `method` with an empty request (valid bytes for every message) and `token` (none
// when empty); the call's final status, whatever the method's streaming shape.
grpc::Status CallRaw(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                     const std::string& token) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  // Refusals come at once; an admitted subscription waits for events until this deadline.
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  if (!token.empty()) ctx.AddMetadata(kInternalTokenKey, token);
  grpc::CompletionQueue cq;
  void* tag = nullptr;
  bool ok = false;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub.PrepareCall(&ctx, method, &cq);
  call->StartCall(reinterpret_cast<void*>(1));
  cq.Next(&tag, &ok);
  if (ok) {
    grpc::ByteBuffer empty;
    grpc::Slice slice("", 0);
    empty = grpc::ByteBuffer(&slice, 1);
    call->Write(empty, reinterpret_cast<void*>(2));
    cq.Next(&tag, &ok);
    call->WritesDone(reinterpret_cast<void*>(3));
    cq.Next(&tag, &ok);
    // A streaming answer's first message, if the call got that far.
    grpc::ByteBuffer reply;
    call->Read(&reply, reinterpret_cast<void*>(4));
    cq.Next(&tag, &ok);
    if (ok) ctx.TryCancel();  // a message came: the call got in, and might stream forever
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  while (cq.Next(&tag, &ok)) {
    if (tag == reinterpret_cast<void*>(5)) break;
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

ipb::GenerateRequest Request(int max_tokens) {
  ipb::GenerateRequest r;
  r.set_request_id("auth-1");
  for (int i = 0; i < 40; ++i) r.add_prompt_ids(5 + (i * 37) % 1200);
  r.mutable_params()->set_max_tokens(max_tokens);
  r.mutable_params()->set_temperature(0);
  return r;
}

// A Prefill through `prefill` into `decode`, then the decode stream; the tokens.
std::vector<int32_t> SplitGenerate(const std::shared_ptr<grpc::Channel>& prefill,
                                   const std::shared_ptr<grpc::Channel>& decode,
                                   const std::string& decode_target, grpc::Status* status) {
  auto p = ipb::Worker::NewStub(prefill);
  ipb::PrefillRequest pr;
  *pr.mutable_request() = Request(6);
  pr.set_decode_worker(decode_target);
  ipb::PrefillResponse presp;
  grpc::ClientContext pctx;
  pctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  *status = p->Prefill(&pctx, pr, &presp);
  if (!status->ok()) return {};
  ipb::GenerateRequest g = Request(6);
  g.set_kv_transfer_id(g.request_id());  // a transfer is named by its request
  auto d = ipb::Worker::NewStub(decode);
  grpc::ClientContext gctx;
  gctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto reader = d->Generate(&gctx, g);
  std::vector<int32_t> ids;
  ipb::GenerateResponse m;
  while (reader->Read(&m)) ids.insert(ids.end(), m.token_ids().begin(), m.token_ids().end());
  *status = reader->Finish();
  return ids;
}

// The same prompt on one colocated worker: the oracle for the split path.
std::vector<int32_t> ColocatedGenerate(const std::shared_ptr<grpc::Channel>& worker) {
  auto stub = ipb::Worker::NewStub(worker);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto reader = stub->Generate(&ctx, Request(6));
  std::vector<int32_t> ids;
  ipb::GenerateResponse m;
  while (reader->Read(&m)) ids.insert(ids.end(), m.token_ids().begin(), m.token_ids().end());
  EXPECT_TRUE(reader->Finish().ok());
  return ids;
}

InternalAuthFlags TlsFlags(const std::string& cert, const std::string& key, const std::string& ca) {
  InternalAuthFlags f;
  f.tls_cert = cert;
  f.tls_key = key;
  f.tls_ca = ca;
  return f;
}

using baton::testing::RunToExit;

TEST(InternalAuthProcess, EveryInternalMethodRefusesCallersWithoutTheClusterToken) {
  const std::string token = "the-cluster-secret-0123456789abcdef";
  const std::string file = WriteFile("cluster_token", token);
  baton::testing::WorkerProc decode({BATON_DECODE_BIN}, "tcp", {"--internal-token-file", file});
  baton::testing::WorkerProc prefill({BATON_PREFILL_BIN}, "tcp", {"--internal-token-file", file});
  ASSERT_FALSE(decode.target.empty());
  ASSERT_FALSE(prefill.target.empty());

  const std::vector<std::string> methods = InternalMethods();
  ASSERT_GE(methods.size(), 10u);
  auto bare = grpc::CreateChannel(decode.target, grpc::InsecureChannelCredentials());
  for (const std::string& m : methods) {
    const grpc::Status none = CallRaw(bare, m, "");
    EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << m << ": " << none.error_message();
    EXPECT_NE(none.error_message().find("--internal-token-file"), std::string::npos) << m;
    const grpc::Status wrong = CallRaw(bare, m, "not-the-cluster-secret-0123456789");
    EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED) << m;
    // A token one byte longer or shorter is as wrong.
    EXPECT_EQ(CallRaw(bare, m, token + "x").error_code(), grpc::StatusCode::UNAUTHENTICATED) << m;
    EXPECT_EQ(CallRaw(bare, m, token.substr(1)).error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << m;
    // With the token the call gets past the door (it may still fail on its empty request).
    const grpc::Status right = CallRaw(bare, m, token);
    EXPECT_NE(right.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << m << ": " << right.error_message();
  }

  // The prefill worker holds the token: its Reserve on the decode worker passes, and the
  // split answer equals the colocated one (the decode worker computing it alone).
  std::shared_ptr<const InternalAuth> auth = InternalAuth::WithToken(token);
  grpc::Status status;
  const std::vector<int32_t> split = SplitGenerate(
      auth->Channel(prefill.target), auth->Channel(decode.target), decode.target, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(split, ColocatedGenerate(auth->Channel(decode.target)));

  // A prefill worker with another token is refused by the decode worker's KvTransfer.
  const std::string other = WriteFile("other_token", "another-clusters-secret-0123456789");
  baton::testing::WorkerProc stranger({BATON_PREFILL_BIN}, "tcp", {"--internal-token-file", other});
  auto stranger_auth = InternalAuth::WithToken("another-clusters-secret-0123456789");
  (void)SplitGenerate(stranger_auth->Channel(stranger.target), auth->Channel(decode.target),
                      decode.target, &status);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.error_message().find("token"), std::string::npos) << status.error_message();

  // A router holding the token serves; one without it is refused at start, by name.
  baton::testing::Router router({"--prefill-worker", prefill.target, "--decode-worker",
                                 decode.target, "--internal-token-file", file});
  ASSERT_NE(router.stub, nullptr);
  ::baton::v1::GenerateRequest req;
  req.set_text("Once upon a time");
  req.mutable_sampling()->set_temperature(0);
  req.mutable_stop()->set_max_tokens(4);
  const baton::testing::Answer a = baton::testing::Generate(router, req);
  EXPECT_TRUE(a.status.ok()) << a.status.error_message();
  EXPECT_EQ(a.ids.size(), 4u);
  auto [code, err] =
      RunToExit({BATON_ROUTER_BIN, "--model", kModel, "--port", "0", "--grpc-port", "-1",
                 "--decode-worker", decode.target, "--worker-wait-seconds", "5"});
  EXPECT_NE(code, 0);
  EXPECT_NE(err.find("--internal-token-file"), std::string::npos) << err;
}

TEST(InternalAuthProcess, AWorkerWithoutACredentialServesOnlyOnLoopback) {
  auto [code, err] = RunToExit({BATON_DECODE_BIN, "--model", kModel, "--host", "0.0.0.0", "--port",
                                "0", "--kv-cache-memory", "16MiB"});
  EXPECT_NE(code, 0);
  EXPECT_NE(err.find("--internal-token-file"), std::string::npos) << err;
  EXPECT_NE(err.find("--allow-open-internal"), std::string::npos) << err;
  // A token too short to be a secret is refused, naming the flag and the bound.
  const std::string short_token = WriteFile("short_token", "abc");
  auto [code2, err2] = RunToExit(
      {BATON_DECODE_BIN, "--model", kModel, "--port", "0", "--internal-token-file", short_token});
  EXPECT_NE(code2, 0);
  EXPECT_NE(err2.find("--internal-token-file"), std::string::npos) << err2;
  EXPECT_NE(err2.find("16"), std::string::npos) << err2;
}

// A CA and two certificates for 127.0.0.1 (a cluster member and a stranger signed by
// another CA), made with the openssl command; false when it is missing.
struct Pki {
  std::string dir, ca, cert, key, other_ca, other_cert, other_key;
  bool Make() {
    dir = ::testing::TempDir() + "/pki";
    const std::string script =
        "set -e; rm -rf " + dir + "; mkdir -p " + dir + "; cd " + dir +
        "; printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext"
        "; for n in ca other_ca; do openssl req -x509 -newkey rsa:2048 -nodes -days 2"
        " -subj /CN=$n -keyout $n.key -out $n.pem 2>/dev/null; done"
        "; for p in member:ca stranger:other_ca; do n=${p%%:*}; c=${p##*:};"
        " openssl req -newkey rsa:2048 -nodes -subj /CN=$n -keyout $n.key -out $n.csr"
        " 2>/dev/null; openssl x509 -req -in $n.csr -CA $c.pem -CAkey $c.key -CAcreateserial"
        " -days 2 -extfile san.ext -out $n.pem 2>/dev/null; done";
    const std::string file = ::testing::TempDir() + "/make_pki.sh";
    std::ofstream(file) << script << "\n";
    if (std::system(("which openssl >/dev/null 2>&1 && bash " + file).c_str()) != 0) {
      return false;
    }
    ca = dir + "/ca.pem";
    cert = dir + "/member.pem";
    key = dir + "/member.key";
    other_ca = dir + "/other_ca.pem";
    other_cert = dir + "/stranger.pem";
    other_key = dir + "/stranger.key";
    return true;
  }
};

TEST(InternalAuthProcess, MutualTlsTakesOnlyPeersTheClusterCaSigned) {
  Pki pki;
  if (!pki.Make()) GTEST_SKIP() << "no openssl command to make test certificates";
  const std::vector<std::string> tls = {"--tls-cert", pki.cert,   "--tls-key",
                                        pki.key,      "--tls-ca", pki.ca};
  baton::testing::WorkerProc decode({BATON_DECODE_BIN}, "tcp", tls);
  baton::testing::WorkerProc prefill({BATON_PREFILL_BIN}, "tcp", tls);
  ASSERT_FALSE(decode.target.empty());
  ASSERT_FALSE(prefill.target.empty());

  absl::StatusOr<std::shared_ptr<const InternalAuth>> member =
      InternalAuth::Load(TlsFlags(pki.cert, pki.key, pki.ca));
  ASSERT_TRUE(member.ok()) << member.status();
  grpc::Status status;
  const std::vector<int32_t> split =
      SplitGenerate((*member)->Channel(prefill.target), (*member)->Channel(decode.target),
                    decode.target, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(split, ColocatedGenerate((*member)->Channel(decode.target)));

  // Plaintext, and a certificate another CA signed, never reach a handler.
  auto bare = grpc::CreateChannel(decode.target, grpc::InsecureChannelCredentials());
  EXPECT_FALSE(CallRaw(bare, "/baton.internal.v1.Worker/GetStats", "").ok());
  absl::StatusOr<std::shared_ptr<const InternalAuth>> stranger =
      InternalAuth::Load(TlsFlags(pki.other_cert, pki.other_key, pki.ca));
  ASSERT_TRUE(stranger.ok()) << stranger.status();
  const grpc::Status refused =
      CallRaw((*stranger)->Channel(decode.target), "/baton.internal.v1.Worker/GetStats", "");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();

  // Only some of the three flags: a clear error naming them.
  absl::StatusOr<std::shared_ptr<const InternalAuth>> half =
      InternalAuth::Load(TlsFlags(pki.cert, "", ""));
  EXPECT_FALSE(half.ok());
  EXPECT_NE(half.status().message().find("--tls-ca"), std::string::npos);
}

// `baton serve` without a credential of the user's makes its own: its workers refuse
// everyone else, and it still serves (colocated, and split across processes).
TEST(InternalAuthProcess, BatonServeAuthenticatesItsOwnWorkers) {
  for (const std::vector<std::string>& shape :
       {std::vector<std::string>{}, std::vector<std::string>{"--prefill", "1", "--decode", "1"}}) {
    std::vector<std::string> argv = {
        BATON_BIN,           "serve", "--port",    "0", "--grpc-port", "-1",
        "--kv-cache-memory", "16MiB", "--threads", "1"};
    argv.insert(argv.end(), shape.begin(), shape.end());
    baton::testing::Proc serve(argv);
    SCOPED_TRACE(serve.line);
    const int http_port = std::atoi(serve.Match(R"(http://127\.0\.0\.1:(\d+))").c_str());
    ASSERT_GT(http_port, 0);
    std::vector<std::string> workers;
    std::smatch m;
    std::string rest = serve.line;
    while (std::regex_search(rest, m, std::regex(R"((?:worker|workers) (127\.0\.0\.1:\d+))"))) {
      workers.push_back(m[1].str());
      rest = m.suffix();
    }
    ASSERT_EQ(workers.size(), shape.empty() ? 1u : 2u);
    for (const std::string& w : workers) {
      auto bare = grpc::CreateChannel(w, grpc::InsecureChannelCredentials());
      EXPECT_EQ(CallRaw(bare, "/baton.internal.v1.Worker/GetStats", "").error_code(),
                grpc::StatusCode::UNAUTHENTICATED)
          << w;
    }
    const nlohmann::json answer = baton::testing::Complete(
        http_port, {{"prompt", "Once upon a time"}, {"max_tokens", 3}, {"temperature", 0}});
    ASSERT_TRUE(answer.contains("choices")) << answer.dump();
    EXPECT_EQ(answer["usage"]["completion_tokens"], 3);
  }
}

}  // namespace
}  // namespace baton::service
