// dgl-launch's pure parts: flags (DGL's spellings too), the job plan (every
// variable each process gets), the agent protocol's encoding.
#include <catch2/catch.hpp>

#include "launcher/launch/agent_impl.h"  // version_of
#include "launcher/launch/plan.h"
#include "launcher/launch/protocol.h"
#include "launcher/launch/restarts.h"
#include "launcher/launch/subprocess.h"

using namespace dgld;
using namespace dgld::launch;

namespace {

ParsedLaunchOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "dgl-launch");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_launch_options(static_cast<int>(argv.size()), argv.data());
}

PartitionConfig two_parts() {
  PartitionConfig c;
  c.graph_name = "products";
  c.num_parts = 2;
  c.parts = {{"part0/node_feat.dgld", "part0/edge_feat.dgld", "part0/graph.dgld"},
             {"part1/node_feat.dgld", "part1/edge_feat.dgld", "part1/graph.dgld"}};
  return c;
}

std::vector<MachineAddress> machines(int n) {
  std::vector<MachineAddress> v;
  for (int i = 0; i < n; ++i) v.push_back({"10.0.0." + std::to_string(i + 1), 30050, i + 1});
  return v;
}

}  // namespace

TEST_CASE("launch options: DGL's underscore flags, extra envs, the command after --", "[launch]") {
  auto p = parse({"--workspace", "/ws", "--num_trainers", "2", "--num_samplers", "1", "--num_servers", "2",
                  "--part_config", "data/g.json", "--ip_config", "ip.txt", "--extra_envs", "A=1", "B=x y",
                  "--num_omp_threads", "3", "--ssh_port", "2222", "--", "trainer-host", "--num-epochs", "5"});
  REQUIRE(p.exit_code == -1);
  const auto& o = p.options;
  CHECK(o.workspace == "/ws");
  CHECK(o.num_trainers == 2);
  CHECK(o.num_samplers == 1);
  CHECK(o.num_servers == 2);
  CHECK(o.part_config == "data/g.json");
  CHECK(o.extra_envs == std::vector<std::string>{"A=1", "B=x y"});
  CHECK(o.num_omp_threads == 3);
  CHECK(o.ssh_port == 2222);
  CHECK(o.command == std::vector<std::string>{"trainer-host", "--num-epochs", "5"});
}

TEST_CASE("launch options: a DGL-style quoted command is split into words", "[launch]") {
  auto p = parse({"--workspace", "/ws", "--part-config", "g.json", "--ip-config", "ip.txt", "--",
                  "trainer-host --metrics-out 'out dir/m.json' --lr 0.01"});
  REQUIRE(p.exit_code == -1);
  CHECK(p.options.command == std::vector<std::string>{"trainer-host", "--metrics-out", "out dir/m.json", "--lr", "0.01"});
  CHECK(find_metrics_out(p.options.command) == "out dir/m.json");
}

TEST_CASE("launch options: bad input is refused with the flag named", "[launch]") {
  CHECK(parse({"--part-config", "g.json", "--ip-config", "ip.txt", "--", "t"}).exit_code == 2);        // no workspace
  CHECK(parse({"--workspace", "rel", "--part-config", "g.json", "--ip-config", "ip.txt", "--", "t"}).exit_code == 2);
  CHECK(parse({"--workspace", "/ws", "--part-config", "g.json", "--ip-config", "ip.txt"}).exit_code == 2);  // no command
  CHECK(parse({"--workspace", "/ws", "--part-config", "g.json", "--ip-config", "ip.txt", "--num-trainerz", "2", "--",
               "t"}).exit_code == 2);  // a typo is not taken for the command
  LaunchOptions o;
  o.workspace = "/ws";
  o.part_config = "g.json";
  o.ip_config = "ip.txt";
  o.command = {"t"};
  o.extra_envs = {"1BAD=x"};
  CHECK_THAT(validate_launch_options(o).message(), Catch::Contains("--extra-envs: '1BAD=x'"));
  o.extra_envs = {};
  o.job_id = "a/b";
  CHECK_THAT(validate_launch_options(o).message(), Catch::Contains("--job-id 'a/b'"));
  o.job_id = "";
  o.copy_method = "ftp";
  CHECK_THAT(validate_launch_options(o).message(), Catch::Contains("--copy-method"));
  // --local takes a relative workspace.
  CHECK(parse({"--local", "--workspace", "rel", "--part-config", "g.json", "--ip-config", "ip.txt", "--", "t"})
            .exit_code == -1);
}

TEST_CASE("job plan: every process gets the environment the daemons read", "[launch]") {
  LaunchOptions o;
  o.workspace = "/ws";
  o.part_config = "data/g.json";
  o.ip_config = "ip.txt";
  o.num_trainers = 2;
  o.num_samplers = 1;
  o.num_servers = 2;
  o.num_server_threads = 3;
  o.graph_server_bin = "/opt/dgld/graph-server";
  o.extra_envs = {"FOO=bar", "DGL_NUM_SAMPLER=1"};
  o.job_id = "job7";
  o.command = {"trainer-host", "--metrics-out", "m.json"};
  auto plan = make_job_plan(o, machines(2), two_parts());
  REQUIRE(plan.is_ok());
  CHECK(plan->job_id == "job7");
  CHECK(plan->log_dir == "dgld-logs/job7");
  CHECK(plan->metrics_out == "m.json");
  REQUIRE(plan->machines.size() == 2);
  const auto& m1 = plan->machines[1];
  CHECK(m1.label == "10.0.0.2");
  REQUIRE(m1.servers.size() == 2);
  const auto& s = m1.servers[1];
  CHECK(s.rank == 3);  // machine 1, server 1: 1 * 2 + 1
  CHECK(s.argv == std::vector<std::string>{"/opt/dgld/graph-server", "--num-server-threads", "3"});
  CHECK(s.env.at("DGL_ROLE") == "server");
  CHECK(s.env.at("DGL_SERVER_ID") == "3");
  CHECK(s.env.at("DGL_NUM_SERVER") == "2");
  CHECK(s.env.at("DGL_NUM_CLIENT") == "8");  // 2 trainers x 2 machines x (1 + 1 sampler)
  CHECK(s.env.at("DGL_NUM_SAMPLER") == "1");
  CHECK(s.env.at("DGL_CONF_PATH") == "data/g.json");
  CHECK(s.env.at("DGL_IP_CONFIG") == "ip.txt");
  CHECK(s.env.at("DGLD_JOB_ID") == "job7");
  CHECK(s.env.at("FOO") == "bar");
  REQUIRE(m1.trainers.size() == 2);
  const auto& t = m1.trainers[1];
  CHECK(t.rank == 3);
  CHECK(t.argv == o.command);
  CHECK(t.env.at("DGL_ROLE") == "trainer");
  CHECK(t.env.at("DGLD_MACHINE_ID") == "1");
  CHECK(t.env.at("DGLD_TRAINER_RANK") == "3");
  CHECK(t.env.at("DGLD_NUM_TRAINERS") == "4");
  // torch.distributed's env:// rendezvous on machine 0's base port + 900.
  CHECK(t.env.at("MASTER_ADDR") == plan->machines[0].address.host);
  CHECK(t.env.at("MASTER_PORT") == "30950");
  CHECK(t.env.at("RANK") == "3");
  CHECK(t.env.at("WORLD_SIZE") == "4");
  CHECK(t.env.at("LOCAL_RANK") == "1");
  CHECK(t.env.at("DGLD_JOB_ID") == "job7");
  CHECK(t.env.count("OMP_NUM_THREADS") == 0);  // the agent fills it in from its cores
  CHECK(t.env.at("FOO") == "bar");
  // Only this machine's partition, plus the two configs.
  CHECK(m1.files == std::vector<std::string>{"ip.txt", "data/g.json", "data/part1/graph.dgld",
                                             "data/part1/node_feat.dgld", "data/part1/edge_feat.dgld"});
  CHECK(m1.server_ports.size() == 2);
  CHECK(m1.server_ports[1].port == 30051);
  CHECK(m1.other_ports.empty());
  REQUIRE(plan->machines[0].other_ports.size() == 1);
  CHECK(plan->machines[0].other_ports[0].port == 30950);  // the trainers' rendezvous
  // A link split's held-out edges travel with the partition.
  PartitionConfig linked = two_parts();
  linked.link_split.present = true;
  for (int i = 0; i < 2; ++i) linked.parts[i].link_split = "part" + std::to_string(i) + "/link_split.dgld";
  CHECK(make_job_plan(o, machines(2), linked)->machines[1].files ==
        std::vector<std::string>{"ip.txt", "data/g.json", "data/part1/graph.dgld", "data/part1/node_feat.dgld",
                                 "data/part1/edge_feat.dgld", "data/part1/link_split.dgld"});
  o.num_omp_threads = 4;
  CHECK(make_job_plan(o, machines(2), two_parts())->machines[0].trainers[0].env.at("OMP_NUM_THREADS") == "4");
}

TEST_CASE("job plan: machines and partitions must match; a host listed twice is labelled by port", "[launch]") {
  LaunchOptions o;
  o.part_config = "g.json";
  o.ip_config = "ip.txt";
  o.command = {"t"};
  auto bad = make_job_plan(o, machines(3), two_parts());
  REQUIRE_FALSE(bad.is_ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("ip.txt lists 3 machine(s) but g.json has num_parts=2"));
  auto local = machines(2);
  local[0].host = local[1].host = "127.0.0.1";
  local[1].base_port = 30060;
  auto plan = make_job_plan(o, local, two_parts());
  REQUIRE(plan.is_ok());
  CHECK(plan->machines[0].label == "127.0.0.1:30050");
  CHECK(plan->machines[1].label == "127.0.0.1:30060");
  CHECK(plan->job_id.rfind("products-", 0) == 0);
  CHECK(validate_job_id(plan->job_id).is_ok());
}

TEST_CASE("job plan: metrics ports of the servers started here and of trainer-host, checked apart", "[launch]") {
  LaunchOptions o;
  o.part_config = "g.json";
  o.ip_config = "ip.txt";
  o.num_servers = 2;
  o.num_trainers = 2;
  o.server_metrics_port = 9500;
  o.command = {"trainer-host"};
  auto local = machines(2);
  local[0].host = local[1].host = "127.0.0.1";
  local[1].base_port = 30060;
  auto plan = make_job_plan(o, local, two_parts());
  REQUIRE(plan.is_ok());
  // Each server adds its index: machine 1, the second of its host, starts after machine 0's two.
  CHECK(plan->machines[0].servers[1].argv ==
        std::vector<std::string>{"", "--num-server-threads", "2", "--metrics-port", "9500"});
  CHECK(plan->machines[1].servers[0].argv.back() == "9502");
  auto ports_of = [](const MachinePlan& m) {
    std::vector<int> ports;
    for (const auto& e : m.other_ports) ports.push_back(e.port);
    return ports;
  };
  CHECK(ports_of(plan->machines[1]) == std::vector<int>{9502, 9503});
  // trainer-host's N + LOCAL_RANK: the machine's trainers' ports, checked free by its agent.
  o.command = {"trainer-host", "--metrics-port", "9600"};
  auto apart = make_job_plan(o, machines(2), two_parts());
  REQUIRE(apart.is_ok());
  CHECK(ports_of(apart->machines[1]) == std::vector<int>{9500, 9501, 9600, 9601});
  CHECK_THAT(apart->machines[1].other_ports[3].what, Catch::Contains("trainer 1 of machine 1's metrics"));
  // ... the same on two machines of one host: refused before anything starts.
  auto clash = make_job_plan(o, local, two_parts());
  REQUIRE_FALSE(clash.is_ok());
  CHECK_THAT(clash.status().message(),
             Catch::Contains("port 9600 on 127.0.0.1 is needed by trainer 0 of machine 1's metrics") &&
                 Catch::Contains("by trainer 0 of machine 0's metrics"));
  o.external_servers = true;
  o.workspace = "/ws";
  CHECK_THAT(validate_launch_options(o).message(), Catch::Contains("--server-metrics-port with --external-servers"));
}

TEST_CASE("agent protocol: spec round trip, raw output lines, base64", "[launch]") {
  AgentSpec s;
  s.version = "0.1.0";
  s.job_id = "j";
  s.machine = 1;
  s.label = "h";
  s.workspace = "/ws";
  s.files = {"a", "b"};
  s.servers = {{"server", 2, {"/gs", "--x"}, {{"K", "V"}}}};
  s.server_ports = {{"h", 5}};
  auto back = agent_spec_from_json(nlohmann::json::parse(encode_line(to_json(s))));
  REQUIRE(back.is_ok());
  CHECK(back->servers[0].argv == s.servers[0].argv);
  CHECK(back->servers[0].env == s.servers[0].env);
  CHECK(back->server_ports[0].port == 5);
  CHECK_FALSE(agent_spec_from_json(nlohmann::json{{"version", 1}}).is_ok());
  // A process's output may be any bytes; the line stays one valid JSON line.
  const std::string raw = std::string("ok \xff\xfe bytes\t\"q\"");
  auto line = encode_line({{"ev", "out"}, {"line", raw}});
  CHECK(line.find('\n') == std::string::npos);
  CHECK(decode_line(line).is_ok());
  CHECK_FALSE(decode_line("Welcome to host!").is_ok());
  for (const std::string& data : std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)}) {
    auto d = base64_decode(base64_encode(data));
    REQUIRE(d.is_ok());
    CHECK(*d == data);
  }
  CHECK_FALSE(base64_decode("a$==").is_ok());
}

TEST_CASE("subprocess: exec failures name the program; groups are signalled; commands time out", "[launch]") {
  SpawnOptions so;
  so.argv = {"/nonexistent/prog"};
  auto p = Subprocess::spawn(so);
  REQUIRE_FALSE(p.is_ok());
  CHECK_THAT(p.status().message(), Catch::Contains("/nonexistent/prog"));
  so.argv = {"no-such-program-dgld"};
  CHECK_THAT(Subprocess::spawn(so).status().message(), Catch::Contains("not found in PATH"));
  auto r = run_command({"/bin/sh", "-c", "echo hi; exit 3"}, std::chrono::seconds(10));
  REQUIRE(r.is_ok());
  CHECK(r->status == 3);
  CHECK(r->output == "hi\n");
  // A command and its child (same process group) are killed at the deadline.
  const auto t0 = std::chrono::steady_clock::now();
  r = run_command({"/bin/sh", "-c", "sleep 30 & sleep 30"}, std::chrono::milliseconds(300));
  REQUIRE(r.is_ok());
  CHECK(r->timed_out);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  CHECK(describe_exit(137) == "was killed by SIGKILL");
  CHECK(describe_exit(3) == "exited with code 3");
}

TEST_CASE("restarts: when the job starts again, and when it stops", "[restart]") {
  FailureCause killed;
  killed.kind = FailureCause::Kind::process;
  killed.machine = 1;
  killed.host = "10.0.0.2";
  killed.role = "trainer";
  killed.rank = 3;
  killed.status = 128 + 9;
  FailureCause lost;
  lost.kind = FailureCause::Kind::lost_agent;
  lost.machine = 2;
  lost.host = "10.0.0.3";
  FailureCause config;
  config.kind = FailureCause::Kind::other;
  config.message = "versions differ";

  CHECK(decide_restart(0, 3, killed, std::nullopt, false, true).restart);
  CHECK(decide_restart(1, 3, lost, killed, false, true).restart);  // another failure
  auto same = decide_restart(1, 3, killed, killed, false, true);
  CHECK_FALSE(same.restart);
  CHECK_THAT(same.why_not, Catch::Contains("the same way twice in a row without a new checkpoint"));
  CHECK(decide_restart(1, 3, killed, killed, true, true).restart);  // a checkpoint came in between
  auto limit = decide_restart(3, 3, killed, std::nullopt, true, true);
  CHECK_FALSE(limit.restart);
  CHECK_THAT(limit.why_not, Catch::Contains("the limit of 3 restart(s)"));
  CHECK(decide_restart(0, 0, killed, std::nullopt, true, true).why_not.empty());  // no --max-restarts: no word
  CHECK_FALSE(decide_restart(0, 3, config, std::nullopt, false, true).restart);
  FailureCause ssh = lost;
  ssh.kind = FailureCause::Kind::agent_start;
  CHECK(decide_restart(0, 3, ssh, std::nullopt, false, false).restart);  // a machine: a spare may help
  CHECK_FALSE(decide_restart(0, 3, killed, std::nullopt, false, false).restart);
  CHECK(lost.machine_suspect());
  CHECK_FALSE(killed.machine_suspect());
  FailureCause other_rank = killed;
  other_rank.rank = 2;
  CHECK(other_rank.key() != killed.key());

  CHECK(backoff_seconds(1, 2) == 2);
  CHECK(backoff_seconds(3, 2) == 8);
  CHECK(backoff_seconds(10, 2) == 60);
}

TEST_CASE("restarts: the trainer command reads the job's own ip_config once a spare is in", "[restart]") {
  const std::vector<std::string> cmd = {"python3", "train.py", "--ip_config", "ip_config.txt", "--x", "1",
                                        "--ip-config=ip_config.txt"};
  const auto out = with_ip_config(cmd, "dgld-logs/j-r1/ip_config.txt");
  CHECK(out == std::vector<std::string>{"python3", "train.py", "--ip_config", "dgld-logs/j-r1/ip_config.txt", "--x",
                                        "1", "--ip-config=dgld-logs/j-r1/ip_config.txt"});
}

TEST_CASE("restarts: the report says what failed, what it cost and where training resumed", "[restart]") {
  RestartRecord r;
  r.number = 1;
  r.cause.kind = FailureCause::Kind::lost_agent;
  r.cause.machine = 2;
  r.cause.host = "10.214.0.12";
  r.failed_at_s = 31.5;
  r.teardown_s = 1.25;
  r.backoff_s = 1;
  r.replaced = "spare 10.214.0.13:30050 took the place of machine 2";
  r.last_checkpoint = CheckpointPosition{3, 40};
  r.lost_work_s = 2.5;
  r.resumed_at = CheckpointPosition{3, 40};
  r.restart_s = 9.75;
  const std::string line = describe(r);
  CHECK_THAT(line, Catch::Contains("restart 1 at +31.5 s after host 10.214.0.12 (machine 2): lost the connection"));
  CHECK_THAT(line, Catch::Contains("spare 10.214.0.13:30050 took the place of machine 2"));
  CHECK_THAT(line, Catch::Contains("trainers resumed at epoch 3 step 40 9.8 s after the failure"));
  CHECK_THAT(line, Catch::Contains("2.5 s of training redone (since the checkpoint of epoch 3 step 40)"));
  const auto j = restarts_json({r});
  REQUIRE(j.size() == 1);
  CHECK(j[0]["cause"]["kind"] == "lost_agent");
  CHECK(j[0]["resumed_at"]["step"] == 40);
  CHECK(j[0]["restart_s"] == 9.75);
}

TEST_CASE("versions: the line that starts with the program's name, past a library's warning", "[launch]") {
  using launch::agent_side::version_of;
  CHECK(version_of("graph-server 0.1.0 (protocol 3)\n", "graph-server") == "0.1.0 (protocol 3)");
  // libgcrypt on a fresh Debian node (no locked memory) writes this to stderr first.
  CHECK(version_of("Warning: using insecure memory!\ntrainer-host 0.1.0 (protocol 3)\n", "trainer-host") ==
        "0.1.0 (protocol 3)");
  // No line of the program: the first line whole, which the refusal names.
  CHECK(version_of("Segmentation fault\n", "trainer-host") == "Segmentation fault");
}
