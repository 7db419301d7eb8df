// dgl-launch: starts a dgld job on every machine of an ip_config (launcher.h).
#include "launcher/launch/launcher.h"

int main(int argc, char** argv) { return dgld::launch::run_launch_tool(argc, argv); }
