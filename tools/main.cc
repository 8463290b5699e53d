// The `baton` command. Every subcommand reads its flags from the command line, then
// BATON_* environment variables, then a YAML file given with --config, in that order.
#include <exception>
#include <iostream>
#include <optional>

#include "CLI/CLI.hpp"
#include "common/cli_setup.h"
#include "tools/bench_serve_command.h"
#include "tools/generate_command.h"
#include "tools/plan_command.h"
#include "tools/serve_command.h"
#include "tools/synth_model_command.h"
#include "tools/tokenize_command.h"
#include "tools/trace_command.h"
#include "tools/worker_command.h"

int main(int argc, char** argv) {
  try {
    CLI::App app{"baton: serve, run and inspect large language models"};
    app.require_subcommand(1);
    baton::BeginCli(&app, "baton");
    baton::tools::AddGenerateCommand(app);
    baton::tools::AddTokenizeCommand(app);
    baton::tools::AddSynthModelCommand(app);
    baton::tools::AddWorkerCommand(app);
    baton::tools::AddBenchCommand(app);
    baton::tools::AddServeCommand(app);
    baton::tools::AddPlanCommand(app);
    baton::tools::AddTraceCommand(app);
    return baton::ParseCli(&app, argc, argv).value_or(0);
  } catch (const std::exception& e) {
    // Subcommands report their own errors; this is the last line of defence.
    std::cerr << "baton: " << e.what() << "\n";
    return 1;
  }
}
