#include "common/yaml_config.h"

#include <istream>
#include <sstream>

#include "yaml-cpp/yaml.h"

namespace baton {
namespace {

void Flatten(const YAML::Node& node, std::vector<std::string>& parents,
             std::vector<CLI::ConfigItem>* out) {
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& value = kv.second;
    if (value.IsMap()) {
      parents.push_back(key);
      Flatten(value, parents, out);
      parents.pop_back();
      continue;
    }
    CLI::ConfigItem item;
    item.parents = parents;
    item.name = key;
    if (value.IsSequence()) {
      for (const auto& v : value) item.inputs.push_back(v.as<std::string>());
    } else if (!value.IsNull()) {
      item.inputs.push_back(value.as<std::string>());
    }
    out->push_back(std::move(item));
  }
}

}  // namespace

std::string YamlConfig::to_config(const CLI::App* app, bool default_also, bool write_description,
                                  std::string prefix) const {
  // Writing configs back is not needed; CLI11's INI form is close enough for --help.
  return CLI::ConfigINI().to_config(app, default_also, write_description, std::move(prefix));
}

std::vector<CLI::ConfigItem> YamlConfig::from_config(std::istream& input) const {
  std::vector<CLI::ConfigItem> items;
  try {
    const YAML::Node root = YAML::Load(input);
    if (root.IsNull()) return items;
    if (!root.IsMap()) throw CLI::ConversionError("config file: the top level must be a mapping");
    std::vector<std::string> parents;
    Flatten(root, parents, &items);
  } catch (const YAML::Exception& e) {
    // CLI11 reports its own exception types to the user with a clean message.
    throw CLI::ConversionError(std::string("config file is not valid YAML: ") + e.what());
  }
  return items;
}

}  // namespace baton
