// Fuzz target: every message handler of the graph-server
// (daemons/graph_server), driven in process through GraphServer::handle, the
// same verification and dispatcher a socket feeds, with no network. Two
// servers serve a tiny two-partition graph generated at start: machine 0's
// (the coordinator: membership handlers too) and machine 1's.
//
// Input (fuzz_support.h): a flags byte, then request frames as one client
// connection would send them. kRegisterFirst has the harness register the
// caller first; bit 1 picks machine 1's server.
//
// Beyond "no crash", every request that is not one-way gets exactly one reply
// by the end of the input (a barrier's when its clients leave), with the
// request's id, the reply kind that belongs to the request or an ErrorReply,
// and a payload that passes the FlatBuffers verifier of that kind; every
// reply byte (zero-copy pieces of shared memory included) is readable.
//
// State stays bounded between inputs: after each input the harness makes
// every client this input registered leave, ends the caller's session as a
// closed connection would, and deletes the tensors the input created
// (restarting a server whose partition tensors were deleted). An input that
// registers clients gets a freshly started coordinator, so client ids replay.
// The servers run with --max-tensor-bytes 64 MiB, so a KvCreate cannot
// make the fuzzer run out of memory.

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include "common/dtype.h"
#include "common/net/frame.h"
#include "common/net/message.h"
#include "common/net/rpc_server.h"
#include "daemons/graph_server/server.h"
#include "schemas/cluster_generated.h"
#include "schemas/graph_generated.h"
#include "schemas/kvstore_generated.h"
#include "schemas/rpc_generated.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/fuzz/fuzz_target.h"

using namespace dgld;
using namespace dgld::net;
using graph_server::GraphServer;
using graph_server::GraphServerOptions;
using K = fbs::MessageKind;

namespace {

constexpr uint64_t kMaxTensorBytes = 64ull << 20;
constexpr uint64_t kHarnessIds = 1ull << 63;  // request ids the harness uses itself

struct Reply {
  uint16_t kind;
  uint32_t flags;
  uint64_t request_id;
  std::vector<uint8_t> payload;
  std::vector<std::vector<uint8_t>> blobs;
};

// Collects the replies to one caller; copying every byte checks that each
// reply (shared-memory pieces included) is readable.
struct Collector {
  std::mutex mu;
  std::vector<Reply> replies;
  // `keep` (this collector, when shared) lives as long as the caller does.
  std::shared_ptr<InProcessCaller> caller(const std::string& name, std::shared_ptr<Collector> keep = nullptr) {
    auto c = std::make_shared<InProcessCaller>();
    c->peer = name;
    c->on_reply = [this, keep](OutMessage m) {
      Reply r{m.kind, m.flags, m.request_id, {m.payload.data(), m.payload.data() + m.payload.size()}, {}};
      for (const OutBlob& b : m.blobs) {
        std::vector<uint8_t> bytes;
        if (b.pieces) {
          for (const OutPiece& p : *b.pieces) {
            bytes.insert(bytes.end(), static_cast<const uint8_t*>(p.data), static_cast<const uint8_t*>(p.data) + p.size);
          }
        } else if (b.size) {
          bytes.assign(static_cast<const uint8_t*>(b.data), static_cast<const uint8_t*>(b.data) + b.size);
        }
        FUZZ_CHECK(bytes.size() == b.size, "a reply blob's pieces do not add up to its size");
        r.blobs.push_back(std::move(bytes));
      }
      std::lock_guard lock(mu);
      replies.push_back(std::move(r));
    };
    return c;
  }
  std::vector<Reply> take() {
    std::lock_guard lock(mu);
    return std::exchange(replies, {});
  }
};

template <typename T>
bool verifies(const std::vector<uint8_t>& p) {
  flatbuffers::Verifier v(p.data(), p.size());
  return !p.empty() && v.VerifyBuffer<T>(nullptr);
}

// The payload of a reply of `kind` passes its verifier.
bool reply_verifies(uint16_t kind, const std::vector<uint8_t>& p) {
  switch (static_cast<K>(kind)) {
    case K::ErrorReply: return verifies<fbs::ErrorReply>(p);
    case K::Pong: return verifies<fbs::Pong>(p);
    case K::RegisterReply: return verifies<fbs::RegisterReply>(p);
    case K::HelloReply: return verifies<fbs::HelloReply>(p);
    case K::HeartbeatReply: return verifies<fbs::HeartbeatReply>(p);
    case K::BarrierReply: return verifies<fbs::BarrierReply>(p);
    case K::LeaveReply: return verifies<fbs::LeaveReply>(p);
    case K::ShutdownReply: return verifies<fbs::ShutdownReply>(p);
    case K::StatsReply: return verifies<fbs::StatsReply>(p);
    case K::KvPullReply: return verifies<fbs::KvPullReply>(p);
    case K::KvPushReply: return verifies<fbs::KvPushReply>(p);
    case K::KvCreateReply: return verifies<fbs::KvCreateReply>(p);
    case K::KvDeleteReply: return verifies<fbs::KvDeleteReply>(p);
    case K::KvListReply: return verifies<fbs::KvListReply>(p);
    case K::GraphInfoReply: return verifies<fbs::GraphInfoReply>(p);
    case K::DegreesReply: return verifies<fbs::DegreesReply>(p);
    case K::FindEdgesReply: return verifies<fbs::FindEdgesReply>(p);
    case K::SampleNeighborsReply: return verifies<fbs::SampleNeighborsReply>(p);
    default: return false;
  }
}

Message to_message(const FrameHeader& h, std::span<const uint8_t> payload,
                   const std::vector<std::span<const uint8_t>>& blobs) {
  Message m;
  m.header = h;
  m.payload = ByteBuffer(payload.size());
  if (!payload.empty()) std::memcpy(m.payload.data(), payload.data(), payload.size());
  for (auto b : blobs) {
    ByteBuffer bb(b.size());
    if (!b.empty()) std::memcpy(bb.data(), b.data(), b.size());
    m.blobs.push_back(std::move(bb));
  }
  return m;
}

Message harness_request(K kind, flatbuffers::FlatBufferBuilder& fbb, uint64_t id) {
  FrameHeader h;
  h.kind = static_cast<uint16_t>(kind);
  h.request_id = kHarnessIds | id;
  return to_message(h, {fbb.GetBufferPointer(), fbb.GetSize()}, {});
}

struct Served {
  int machine = 0;
  std::unique_ptr<GraphServer> server;
  Collector admin_replies;
  std::shared_ptr<InProcessCaller> admin;
  std::set<std::string> initial_tensors;
};

struct State {
  fuzz::ScratchDir dir{"dgld-fuzz-server"};
  std::filesystem::path json, ip;
  Served served[2];
  uint64_t next_id = 0;
};
State* state = nullptr;

std::vector<Reply> admin_call(Served& s, K kind, flatbuffers::FlatBufferBuilder& fbb) {
  s.server->handle(RequestContext(s.admin, FrameHeader{}), harness_request(kind, fbb, ++state->next_id));
  return s.admin_replies.take();
}

std::vector<std::string> tensor_names(Served& s) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::CreateKvList(fbb));
  auto replies = admin_call(s, K::KvList, fbb);
  FUZZ_CHECK(replies.size() == 1 && replies[0].kind == static_cast<uint16_t>(K::KvListReply), "KvList failed");
  std::vector<std::string> names;
  const auto* r = flatbuffers::GetRoot<fbs::KvListReply>(replies[0].payload.data());
  if (r->tensors()) {
    for (const auto* t : *r->tensors()) names.push_back(t->name() ? t->name()->str() : "");
  }
  return names;
}

// Starts machine `s.machine`'s server and gives the harness an admin session
// on it (registered and left again at the coordinator, so it holds up no
// barrier and no new job).
void start(Served& s) {
  s.server.reset();
  GraphServerOptions o;
  o.part_config = state->json;
  o.ip_config = state->ip;
  o.server_id = s.machine;
  o.num_servers = 1;
  o.job_id = "fuzz-" + std::to_string(::getpid());
  o.listen = false;
  o.max_tensor_bytes = kMaxTensorBytes;
  auto created = GraphServer::create(o);
  FUZZ_CHECK(created.is_ok(), created.status().message().c_str());
  s.server = std::move(*created);
  s.admin = s.admin_replies.caller("fuzz harness");
  if (s.machine == 0) {
    flatbuffers::FlatBufferBuilder fbb;
    fbb.Finish(fbs::CreateRegisterClient(fbb, fbs::Role::Trainer, 0, 1, fbb.CreateString("harness")));
    auto r = admin_call(s, K::RegisterClient, fbb);
    FUZZ_CHECK(r.size() == 1 && r[0].kind == static_cast<uint16_t>(K::RegisterReply), "harness registration");
    const int id = flatbuffers::GetRoot<fbs::RegisterReply>(r[0].payload.data())->client_id();
    flatbuffers::FlatBufferBuilder leave;
    leave.Finish(fbs::CreateLeave(leave, id));
    admin_call(s, K::Leave, leave);
  } else {
    flatbuffers::FlatBufferBuilder fbb;
    fbb.Finish(fbs::CreateHello(fbb, 0, fbs::Role::Trainer, 1));
    auto r = admin_call(s, K::Hello, fbb);
    FUZZ_CHECK(r.size() == 1 && r[0].kind == static_cast<uint16_t>(K::HelloReply), "harness hello");
  }
  auto names = tensor_names(s);
  s.initial_tensors = {names.begin(), names.end()};
}

// DGLD_FUZZ_TRACE=1 prints every reply (what a seed or finding reaches).
const bool trace = std::getenv("DGLD_FUZZ_TRACE") != nullptr;

// `asked`: the requests still waiting for a reply, by id (a client may reuse
// an id); a reply takes the first of its id whose kind it answers.
void check_reply(const Reply& r, std::multimap<uint64_t, uint16_t>& asked) {
  if (trace) {
    std::string what;
    if (r.kind == static_cast<uint16_t>(K::ErrorReply) && verifies<fbs::ErrorReply>(r.payload)) {
      const auto* e = flatbuffers::GetRoot<fbs::ErrorReply>(r.payload.data());
      what = e->message() ? e->message()->str() : "";
    }
    std::fprintf(stderr, "reply to %llu: %s %s\n", static_cast<unsigned long long>(r.request_id & ~kHarnessIds),
                 fbs::EnumNameMessageKind(static_cast<K>(r.kind)), what.c_str());
  }
  FUZZ_CHECK(r.flags & kFlagResponse, "a reply without the response flag");
  const bool error = r.flags & kFlagError;
  FUZZ_CHECK(error == (r.kind == static_cast<uint16_t>(K::ErrorReply)), "error flag and ErrorReply kind disagree");
  auto [first, last] = asked.equal_range(r.request_id);
  auto it = first;
  while (it != last && !error && r.kind != it->second + 1) ++it;
  FUZZ_CHECK(it != last, "a reply to no request of its id and kind");
  asked.erase(it);
  FUZZ_CHECK(reply_verifies(r.kind, r.payload), "a reply payload that does not verify");
  if (r.kind == static_cast<uint16_t>(K::SampleNeighborsReply)) {
    // Neighbours and edge ids, one per edge; then each seed's edge count.
    FUZZ_CHECK(r.blobs.size() == 3 && r.blobs[0].size() == r.blobs[1].size() && r.blobs[2].size() % 8 == 0,
               "SampleNeighbors reply blobs");
    uint64_t edges = 0;
    for (size_t i = 0; i + 8 <= r.blobs[2].size(); i += 8) {
      int64_t c;
      std::memcpy(&c, r.blobs[2].data() + i, 8);
      FUZZ_CHECK(c >= 0, "a negative edge count in a SampleNeighbors reply");
      edges += static_cast<uint64_t>(c);
    }
    FUZZ_CHECK(edges * 8 == r.blobs[0].size(), "SampleNeighbors reply counts disagree with its edges");
  }
  if (r.kind == static_cast<uint16_t>(K::FindEdgesReply)) {
    FUZZ_CHECK(r.blobs.size() == 2 && r.blobs[0].size() == r.blobs[1].size(), "FindEdges reply blobs");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logging();
  state = new State();
  auto json = fuzz::write_tiny_partition(state->dir.path());
  FUZZ_CHECK(json.is_ok(), json.status().message().c_str());
  state->json = *json;
  state->ip = state->dir.path() / "ip_config.txt";
  std::ofstream(state->ip) << "127.0.0.1 30050\n127.0.0.1 30060\n";
  fuzz::quiet_logging();
  for (int m = 0; m < 2; ++m) {
    state->served[m].machine = m;
    start(state->served[m]);
  }
  // Unlinks the servers' shared memory and removes the scratch directory on a
  // normal exit.
  std::atexit([] {
    delete state;
    state = nullptr;
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (state == nullptr) LLVMFuzzerInitialize(nullptr, nullptr);
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  Served& s = state->served[(flags >> 1) & 1];
  // Shared with the caller: a reply that came after the input ended must
  // find it alive (and then fails the reply count of this input).
  auto collector = std::make_shared<Collector>();
  auto caller = collector->caller("fuzz client", collector);
  std::multimap<uint64_t, uint16_t> asked;  // request id -> kind, of requests that want a reply
  size_t expected = 0;
  auto send = [&](Message&& m) {
    if (!(m.header.flags & kFlagOneWay)) {
      asked.emplace(m.request_id(), m.kind());
      ++expected;
    }
    s.server->handle(RequestContext(caller, m.header), std::move(m));
  };
  std::span<const uint8_t> in(data + 1, size - 1);
  if (s.machine == 0) {
    // Client ids count up over the coordinator's life: an input that
    // registers clients gets a fresh coordinator, so its ids are always
    // 1, 2, ... (0 is the harness's) and a finding replays alike.
    bool registers = flags & fuzz::kRegisterFirst;
    for (auto rest = in; !registers && !rest.empty();) {
      auto f = decode_frame(rest, FrameLimits{});
      if (!f.is_ok()) break;
      registers = f->header.kind == static_cast<uint16_t>(K::RegisterClient);
      rest = rest.subspan(f->total_size);
    }
    if (registers) start(s);
  }
  if ((flags & fuzz::kRegisterFirst) && s.machine == 0) {
    flatbuffers::FlatBufferBuilder fbb;
    fbb.Finish(fbs::CreateRegisterClient(fbb, fbs::Role::Trainer, 0, 4242, fbb.CreateString("fuzz")));
    send(harness_request(K::RegisterClient, fbb, ++state->next_id));
  }
  while (!in.empty()) {
    auto f = decode_frame(in, FrameLimits{});
    if (!f.is_ok()) break;  // a connection would close here
    in = in.subspan(f->total_size);
    if (f->header.flags & kFlagResponse) continue;  // servers ignore responses
    Message m = to_message(f->header, f->payload, f->blobs);
    send(std::move(m));
  }

  // Every client this input registered leaves; the caller's connection closes.
  std::vector<Reply> replies = collector->take();
  for (const Reply& r : replies) {
    if (r.kind == static_cast<uint16_t>(K::RegisterReply) && verifies<fbs::RegisterReply>(r.payload)) {
      flatbuffers::FlatBufferBuilder fbb;
      fbb.Finish(fbs::CreateLeave(fbb, flatbuffers::GetRoot<fbs::RegisterReply>(r.payload.data())->client_id()));
      admin_call(s, K::Leave, fbb);
    }
  }
  s.server->end_session(caller.get(), closed_error("fuzz input ended"));
  for (Reply& r : collector->take()) replies.push_back(std::move(r));  // barriers completed by the leaves
  FUZZ_CHECK(replies.size() == expected, "a request got no reply, or more than one");
  for (const Reply& r : replies) check_reply(r, asked);

  // Tensors: drop what the input created; restart if it deleted the partition's.
  auto names = tensor_names(s);
  std::set<std::string> now(names.begin(), names.end());
  bool lost = false;
  for (const auto& n : s.initial_tensors) lost = lost || !now.count(n);
  if (lost) {
    start(s);
    return 0;
  }
  for (const auto& n : now) {
    if (s.initial_tensors.count(n)) continue;
    flatbuffers::FlatBufferBuilder fbb;
    fbb.Finish(fbs::CreateKvDelete(fbb, fbb.CreateString(n)));
    auto r = admin_call(s, K::KvDelete, fbb);
    FUZZ_CHECK(r.size() == 1 && r[0].kind == static_cast<uint16_t>(K::KvDeleteReply), "deleting a tensor failed");
  }
  return 0;
}
