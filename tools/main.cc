// The `baton` command. Every subcommand reads its flags from the command line, then
// BATON_* environment variables, then a YAML file given with --config, in that order.
#include <exception>
#include <iostream>
#include <memory>

#include "CLI/CLI.hpp"
#include "common/yaml_config.h"
#include "tools/bench_serve_command.h"
#include "tools/generate_command.h"
#include "tools/plan_command.h"
#include "tools/serve_command.h"
#include "tools/synth_model_command.h"
#include "tools/tokenize_command.h"
#include "tools/worker_command.h"

int main(int argc, char** argv) {
  try {
    CLI::App app{"baton: serve, run and inspect large language models"};
    app.require_subcommand(1);
    app.config_formatter(std::make_shared<baton::YamlConfig>());
    app.set_config("--config", "", "YAML file with flag values (flag: value)")
        ->envname("BATON_CONFIG");
    baton::tools::AddGenerateCommand(app);
    baton::tools::AddTokenizeCommand(app);
    baton::tools::AddSynthModelCommand(app);
    baton::tools::AddWorkerCommand(app);
    baton::tools::AddBenchCommand(app);
    baton::tools::AddServeCommand(app);
    baton::tools::AddPlanCommand(app);
    CLI11_PARSE(app, argc, argv);
    return 0;
  } catch (const std::exception& e) {
    // Subcommands report their own errors; this is the last line of defence.
    std::cerr << "baton: " << e.what() << "\n";
    return 1;
  }
}
