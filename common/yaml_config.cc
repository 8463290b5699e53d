#include "common/yaml_config.h"

#include <cstdlib>
#include <istream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

const CLI::App* FindSubcommand(const CLI::App* app, const std::string& name) {
  for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == name) return sub;
  }
  return nullptr;
}

const CLI::Option* FindOption(const CLI::App* app, const std::string& key) {
  const CLI::Option* opt = app->get_option_no_throw("--" + key);
  return opt != nullptr ? opt : app->get_option_no_throw(key);
}

std::string ConfigFileName(const CLI::App& app) {
  const CLI::Option* config = app.get_config_ptr();
  if (config == nullptr) return "the config file";
  const auto files = config->as<std::vector<std::string>>();
  return files.empty() ? "the config file" : files.front();
}

bool EnvSet(const CLI::Option& opt) {
  if (opt.get_envname().empty()) return false;
  const char* value = std::getenv(opt.get_envname().c_str());
  return value != nullptr && *value != '\0';
}

}  // namespace

std::vector<CLI::ConfigItem> YamlConfig::Resolve(std::vector<CLI::ConfigItem> items) const {
  std::vector<CLI::ConfigItem> kept;
  for (CLI::ConfigItem& item : items) {
    // The chain of apps the item's sections name: root, then each subcommand.
    std::vector<const CLI::App*> chain = {app_};
    for (const std::string& section : item.parents) {
      const CLI::App* sub = FindSubcommand(chain.back(), section);
      if (sub == nullptr) {
        throw CLI::ConfigError(absl::StrCat(
            ConfigFileName(*app_), ": unknown section '", absl::StrJoin(item.parents, "."),
            "' (key '", item.name, "'): it names no subcommand of ", app_->get_name(),
            "; top-level keys are its flags, a subcommand's flags go under its name"));
      }
      chain.push_back(sub);
    }
    // A flag of an enclosing command (log-level under serve:) applies where it is defined,
    // as on the command line.
    const CLI::Option* opt = nullptr;
    size_t depth = chain.size();
    while (opt == nullptr && depth > 0) {
      --depth;
      opt = FindOption(chain[depth], item.name);
    }
    if (opt == nullptr) {
      const std::string section = item.parents.empty()
                                      ? "at the top level"
                                      : "in section '" + absl::StrJoin(item.parents, ".") + "'";
      throw CLI::ConfigError(absl::StrCat(ConfigFileName(*app_), ": unknown key '", item.name, "' ",
                                          section, ": no such flag (--help lists them)"));
    }
    if (EnvSet(*opt)) continue;  // the environment wins over the file
    item.parents.resize(depth);
    kept.push_back(std::move(item));
  }
  return kept;
}

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
  return app_ == nullptr ? items : Resolve(std::move(items));
}

}  // namespace baton
