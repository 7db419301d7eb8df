// The graph-server's membership rules (daemons/graph_server/membership.h)
// without a server: ranks, jobs and one-job servers.
#include <catch2/catch.hpp>

#include "daemons/graph_server/membership.h"

namespace dgld::graph_server {
namespace {

int register_trainer(Membership& m) {
  auto r = m.register_client(ClientRole::trainer, 0, 1, "h", 0, -1);
  REQUIRE(r.is_ok());
  return r->client_id;
}

int rank_of_next(Membership& m) {
  auto r = m.register_client(ClientRole::trainer, 0, 1, "h", 0, -1);
  REQUIRE(r.is_ok());
  return r->rank;
}

}  // namespace

TEST_CASE("membership: a long-lived server starts a new job when everyone left, reusing ranks") {
  Membership m(MembershipOptions{});
  const int a = register_trainer(m);
  REQUIRE(m.leave(a).is_ok());
  CHECK(rank_of_next(m) == 0);  // a new job: rank 0 again
}

TEST_CASE("membership: a one-job server gives every client a rank of its own, even after others left") {
  // DGL's DistGraphServer (keep_alive False) told of 4 clients that come one
  // after another: ranks 0..3, as DGL's clients (which all join first) get.
  MembershipOptions o;
  o.one_job = true;
  o.expected_trainers = 4;
  Membership m(o);
  for (int expect = 0; expect < 4; ++expect) {
    auto r = m.register_client(ClientRole::trainer, 0, 1, "h", 0, -1);
    REQUIRE(r.is_ok());
    CHECK(r->rank == expect);
    REQUIRE(m.leave(r->client_id).is_ok());
  }
  auto fifth = m.register_client(ClientRole::trainer, 0, 1, "h", 0, -1);
  REQUIRE_FALSE(fifth.is_ok());
  CHECK_THAT(fifth.status().message(), Catch::Contains("beyond the 4 the coordinator expects"));
}

}  // namespace dgld::graph_server
