// The one place that sets up a binary's command line. Every binary (baton and its
// subcommands, baton-router, baton-prefill, baton-decode) gets the same behaviour:
//
//   - values come from the command line, then the environment, then the YAML file of
//     --config (or BATON_CONFIG), in that order of precedence;
//   - every flag --foo-bar also reads BATON_FOO_BAR (subcommand flags without the
//     subcommand's name), unless the flag names another variable itself;
//   - a YAML key that names no flag is an error naming the key, its section and the file;
//   - --version, --log-level, --log-format and --print-config; defaults shown in --help.
//
//   CLI::App app{"..."};
//   baton::BeginCli(&app, "baton-router");   // before any other option
//   ... add options and subcommands ...
//   if (std::optional<int> exit = baton::ParseCli(&app, argc, argv)) return *exit;
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "CLI/CLI.hpp"

namespace baton {

// Adds the common options to the root `app`; `name` names the process in logs and in
// --version.
void BeginCli(CLI::App* app, std::string_view name);

// Finishes the setup (environment names, fallthrough of common options into
// subcommands) and parses. Returns the exit code when the process should stop now
// (--help, --version, --print-config, a bad flag: the message is already printed), or
// nullopt to go on. Subcommand callbacks run inside.
std::optional<int> ParseCli(CLI::App* app, int argc, const char* const* argv);

// BATON_<FLAG>: upper case, '-' to '_' ("max-model-len" -> "BATON_MAX_MODEL_LEN").
std::string MechanicalEnvName(std::string_view long_name);

// The resolved configuration of `app` and its chosen subcommands as YAML (what
// --print-config prints): each option that has a value, under its subcommand's section.
std::string ResolvedConfigYaml(const CLI::App& app);

}  // namespace baton
