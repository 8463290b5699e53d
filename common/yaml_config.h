// Lets CLI11 read flag values from YAML. Top-level keys are flags of the main command;
// a mapping under a subcommand's name holds that subcommand's flags:
//
//   tokenize:
//     tokenizer: models/smollm2/tokenizer.json
//     no-special: true
//
// Given the App, it also checks every key against the flags (an unknown key is an error
// naming the key, its section and the file) and drops a key whose flag's environment
// variable is set: CLI11 2.1.2 applies the file before the environment, and the
// environment must win.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace baton {

class YamlConfig : public CLI::Config {
 public:
  YamlConfig() = default;
  // `app`: the root App the file configures; it must outlive this reader.
  explicit YamlConfig(const CLI::App* app) : app_(app) {}

  std::string to_config(const CLI::App* app, bool default_also, bool write_description,
                        std::string prefix) const override;
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;

 private:
  // Keeps the items CLI11 should apply; throws CLI::ConfigError on an unknown key.
  std::vector<CLI::ConfigItem> Resolve(std::vector<CLI::ConfigItem> items) const;

  const CLI::App* app_ = nullptr;
};

}  // namespace baton
