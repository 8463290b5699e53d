// Lets CLI11 read flag values from YAML. Top-level keys are flags of the main command;
// a mapping under a subcommand's name holds that subcommand's flags:
//
//   tokenize:
//     tokenizer: models/smollm2/tokenizer.json
//     no-special: true
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace baton {

class YamlConfig : public CLI::Config {
 public:
  std::string to_config(const CLI::App* app, bool default_also, bool write_description,
                        std::string prefix) const override;
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;
};

}  // namespace baton
