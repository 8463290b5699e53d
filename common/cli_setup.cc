#include "common/cli_setup.h"

#include <sys/stat.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/log.h"
#include "common/yaml_config.h"
#include "yaml-cpp/yaml.h"

#ifndef BATON_VERSION
#define BATON_VERSION "unknown"
#endif

namespace baton {
namespace {

// Options every binary has that are not configuration of the program itself.
bool IsMetaOption(const CLI::Option& opt) {
  const auto& names = opt.get_lnames();
  if (names.empty()) return true;  // positional-only or short-only
  const std::string& name = names.front();
  return name == "help" || name == "help-all" || name == "version" || name == "config" ||
         name == "print-config";
}

void FinishTree(CLI::App* app) {
  for (CLI::Option* opt : app->get_options()) {
    if (!IsMetaOption(*opt) && opt->get_envname().empty()) {
      opt->envname(MechanicalEnvName(opt->get_lnames().front()));
    }
  }
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) {
    // --config, --log-level and the like belong to the root; a subcommand passes what it
    // does not know up to its parent (`baton serve --config FILE`).
    sub->fallthrough();
    FinishTree(sub);
  }
}

const char* NonEmptyEnv(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

bool IsRegularFile(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

void EmitOptions(const CLI::App& app, YAML::Emitter& out) {
  for (const CLI::Option* opt : app.get_options()) {
    if (IsMetaOption(*opt)) continue;
    std::vector<std::string> values = opt->results();
    // CLI11 captures an empty vector's default as "[]".
    const std::string& fallback = opt->get_default_str();
    if (values.empty() && !fallback.empty() && fallback != "[]") values = {fallback};
    if (values.empty()) continue;  // a flag not given, an option without a default
    out << YAML::Key << opt->get_lnames().front() << YAML::Value;
    if (values.size() == 1 && opt->get_expected_max() <= 1) {
      out << values.front();
    } else {
      out << YAML::Flow << values;
    }
  }
  for (const CLI::App* sub : app.get_subcommands()) {
    out << YAML::Key << sub->get_name() << YAML::Value << YAML::BeginMap;
    EmitOptions(*sub, out);
    out << YAML::EndMap;
  }
}

// CLI11 2.1.2 reads the config file before it applies environment variables, so an
// envname on --config is never seen in time; BATON_CONFIG is --config's default instead,
// and CLI11 skips a default file that does not exist: this says so.
void CheckEnvConfig(const CLI::App& app) {
  const char* env_config = NonEmptyEnv("BATON_CONFIG");
  if (app.get_config_ptr()->count() == 0 && env_config != nullptr && !IsRegularFile(env_config)) {
    throw CLI::FileError(absl::StrCat("BATON_CONFIG names '", env_config,
                                      "', which is not a file: point it at a YAML file or "
                                      "unset it"));
  }
}

struct CommonFlags {
  std::string name;
  std::string log_level = "info";
  std::string log_format = "text";
};

}  // namespace

std::string MechanicalEnvName(std::string_view long_name) {
  return absl::StrCat(
      "BATON_", absl::StrReplaceAll(absl::AsciiStrToUpper(std::string(long_name)), {{"-", "_"}}));
}

std::string ResolvedConfigYaml(const CLI::App& app) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  EmitOptions(app, out);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

void BeginCli(CLI::App* app, std::string_view name) {
  auto flags = std::make_shared<CommonFlags>();
  flags->name = std::string(name);
  // Before any option exists: options (and subcommands, which copy these) show their
  // default values in --help.
  app->option_defaults()->always_capture_default();
  app->fallthrough();
  app->config_formatter(std::make_shared<YamlConfig>(app));
  const char* env_config = NonEmptyEnv("BATON_CONFIG");
  app->set_config("--config", env_config != nullptr ? env_config : "",
                  "YAML file with flag values (flag: value; a subcommand's under its name); "
                  "also BATON_CONFIG");
  app->set_version_flag("--version", absl::StrCat(std::string(name), " ", BATON_VERSION));
  app->add_option("--log-level", flags->log_level,
                  "Least severe log lines written to stderr: trace, debug, info, warn, error, "
                  "critical, off")
      ->check(
          CLI::IsMember({"trace", "debug", "info", "warn", "warning", "error", "critical", "off"}));
  app->add_option("--log-format", flags->log_format,
                  "Log lines on stderr: text, or json (one object per line: ts, level, logger, "
                  "msg)")
      ->check(CLI::IsMember({"text", "json"}));
  app->add_flag_callback(
      "--print-config",
      [app] {
        // Options' callbacks run after the file and the environment are applied and
        // before any subcommand runs, so this prints what the program would use.
        CheckEnvConfig(*app);
        // CLI11 looks for arguments it did not use only after the callbacks.
        if (app->remaining_size(/*recurse=*/true) > 0) {
          throw CLI::ExtrasError(app->remaining(/*recurse=*/true));
        }
        std::cout << ResolvedConfigYaml(*app) << std::flush;
        throw CLI::Success();
      },
      "Print the resolved configuration (command line over environment over file) as YAML "
      "and exit");
  // Runs once the command line, environment and file are applied, before any subcommand's
  // callback, so that every line a subcommand logs has the chosen level and format.
  app->parse_complete_callback([app, flags] {
    CheckEnvConfig(*app);
    InitLogging(flags->name, *ParseLogLevel(flags->log_level), *ParseLogFormat(flags->log_format));
  });
}

std::optional<int> ParseCli(CLI::App* app, int argc, const char* const* argv) {
  FinishTree(app);
  try {
    app->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app->exit(e);
  }
  return std::nullopt;
}

}  // namespace baton
