#include "template/chat_template.h"

#include <ctime>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/strings.h"
#include "template/jinja_builtins.h"
#include "template/jinja_interpreter.h"
#include "template/jinja_lexer.h"
#include "template/jinja_parser.h"
#include "template/jinja_value.h"

namespace baton::templating {

struct CompiledTemplate {
  std::string source;
  std::unique_ptr<jinja::Program> program;
};

namespace {

constexpr char kTemplateExceptionPayload[] = "baton.chat_template/raise_exception";

// Turns an internal status into the API's: the "chat template: " prefix, and only the
// public payload.
absl::Status ToPublic(const absl::Status& status) {
  if (status.ok()) return status;
  if (status.GetPayload(jinja::kRaisedPayload).has_value()) {
    absl::Status raised(absl::StatusCode::kInvalidArgument, status.message());
    raised.SetPayload(kTemplateExceptionPayload, absl::Cord("1"));
    return raised;
  }
  return absl::Status(status.code(), StrCat("chat template: ", status.message()));
}

absl::StatusOr<std::shared_ptr<const CompiledTemplate>> Compile(std::string_view source,
                                                                const TemplateLimits& limits) {
  if (source.size() > limits.max_source_bytes) {
    return absl::InvalidArgumentError(StrCat("chat template: source is ", source.size(),
                                             " bytes, over max_source_bytes (",
                                             limits.max_source_bytes, ")"));
  }
  auto tokens = jinja::Tokenize(source);
  if (!tokens.ok()) return ToPublic(tokens.status());
  auto program = jinja::Parse(*std::move(tokens));
  if (!program.ok()) return ToPublic(program.status());
  auto compiled = std::make_shared<CompiledTemplate>();
  compiled->source = std::string(source);
  compiled->program = *std::move(program);
  return std::shared_ptr<const CompiledTemplate>(std::move(compiled));
}

jinja::DateParts CurrentLocalDate() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  return jinja::DateParts{local.tm_year + 1900, local.tm_mon + 1, local.tm_mday, local.tm_hour,
                          local.tm_min};
}

}  // namespace

bool IsTemplateException(const absl::Status& status) {
  return status.GetPayload(kTemplateExceptionPayload).has_value();
}

absl::StatusOr<nlohmann::json> MakeChatContext(const ChatInputs& inputs) {
  try {
    if (!inputs.messages.is_array()) {
      return absl::InvalidArgumentError("chat template: messages must be a JSON array");
    }
    if (!inputs.tools.is_null() && !inputs.tools.is_array()) {
      return absl::InvalidArgumentError("chat template: tools must be null or a JSON array");
    }
    if (!inputs.extra.is_null() && !inputs.extra.is_object()) {
      return absl::InvalidArgumentError("chat template: extra must be a JSON object");
    }
    nlohmann::json context = nlohmann::json::object();
    context["messages"] = inputs.messages;
    context["tools"] = inputs.tools;
    context["add_generation_prompt"] = inputs.add_generation_prompt;
    context["bos_token"] = inputs.bos_token;
    context["eos_token"] = inputs.eos_token;
    if (inputs.extra.is_object()) {
      for (auto it = inputs.extra.begin(); it != inputs.extra.end(); ++it) {
        if (context.contains(it.key())) {
          return absl::InvalidArgumentError(
              StrCat("chat template: extra variable '", it.key(), "' collides with a chat input"));
        }
        context[it.key()] = it.value();
      }
    }
    return context;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(StrCat("chat template: bad inputs: ", e.what()));
  }
}

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(std::string_view source,
                                                 const TemplateLimits& limits) {
  BATON_ASSIGN_OR_RETURN(auto compiled, Compile(source, limits));
  return ChatTemplate(std::move(compiled), nullptr, limits);
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromTokenizerConfig(const nlohmann::json& config,
                                                               std::string_view name,
                                                               const TemplateLimits& limits) {
  try {
    if (!config.is_object()) {
      return absl::InvalidArgumentError("chat template: tokenizer config is not a JSON object");
    }
    auto it = config.find("chat_template");
    if (it == config.end() || it->is_null()) {
      return absl::NotFoundError(
          "chat template: tokenizer config has no chat_template; give a Jinja template file "
          "with --chat-template FILE");
    }
    if (it->is_string()) {
      if (!name.empty() && name != "default") {
        return absl::NotFoundError(StrCat("chat template: no template named '", name,
                                          "' (the config has a single unnamed template)"));
      }
      return Parse(it->get_ref<const std::string&>(), limits);
    }
    if (!it->is_array()) {
      return absl::InvalidArgumentError(
          "chat template: chat_template must be a string or a list of {name, template}");
    }
    std::vector<std::pair<std::string, std::string>> entries;
    for (const auto& entry : *it) {
      if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
          !entry["name"].is_string() || !entry["template"].is_string()) {
        return absl::InvalidArgumentError(
            "chat template: each chat_template list entry needs string 'name' and 'template'");
      }
      entries.emplace_back(entry["name"].get<std::string>(), entry["template"].get<std::string>());
    }
    auto find = [&](std::string_view wanted) -> const std::string* {
      for (const auto& [entry_name, source] : entries) {
        if (entry_name == wanted) return &source;
      }
      return nullptr;
    };
    auto names = [&] {
      std::vector<std::string> out;
      for (const auto& entry : entries) out.push_back(entry.first);
      return absl::StrJoin(out, ", ");
    };
    if (!name.empty()) {
      const std::string* source = find(name);
      if (source == nullptr) {
        return absl::NotFoundError(
            StrCat("chat template: no template named '", name, "' (available: ", names(), ")"));
      }
      return Parse(*source, limits);
    }
    const std::string* main = find("default");
    if (main == nullptr && entries.size() == 1) main = &entries[0].second;
    if (main == nullptr) {
      return absl::NotFoundError(StrCat(
          "chat template: several templates and no 'default'; pass a name (available: ", names(),
          ")"));
    }
    BATON_ASSIGN_OR_RETURN(auto main_compiled, Compile(*main, limits));
    std::shared_ptr<const CompiledTemplate> tool_use_compiled;
    if (const std::string* tool_use = find("tool_use"); tool_use != nullptr && tool_use != main) {
      BATON_ASSIGN_OR_RETURN(tool_use_compiled, Compile(*tool_use, limits));
    }
    return ChatTemplate(std::move(main_compiled), std::move(tool_use_compiled), limits);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(StrCat("chat template: bad tokenizer config: ", e.what()));
  }
}

const std::string& ChatTemplate::source() const { return main_->source; }

absl::StatusOr<std::string> ChatTemplate::Render(const ChatInputs& inputs) const {
  BATON_ASSIGN_OR_RETURN(nlohmann::json context, MakeChatContext(inputs));
  return RenderCompiled(Choose(context), context, inputs.now);
}

absl::StatusOr<std::string> ChatTemplate::RenderWithContext(const nlohmann::json& context,
                                                            std::optional<TemplateDate> now) const {
  return RenderCompiled(Choose(context), context, now);
}

absl::StatusOr<std::string> ChatTemplate::RenderWithOrderedContext(
    const nlohmann::ordered_json& context, std::optional<TemplateDate> now) const {
  return RenderCompiled(Choose(context), context, now);
}

// transformers uses the tool_use template whenever tools are passed (not None).
template <typename Json>
const CompiledTemplate& ChatTemplate::Choose(const Json& context) const {
  if (tool_use_ == nullptr || !context.is_object()) return *main_;
  auto tools = context.find("tools");
  return tools != context.end() && !tools->is_null() ? *tool_use_ : *main_;
}

template <typename Json>
absl::StatusOr<std::string> ChatTemplate::RenderCompiled(const CompiledTemplate& compiled,
                                                         const Json& context,
                                                         std::optional<TemplateDate> now) const {
  try {
    if (!context.is_object()) {
      return absl::InvalidArgumentError("chat template: the render context must be a JSON object");
    }
    auto variables = jinja::FromJson(context);
    if (!variables.ok()) return ToPublic(variables.status());
    auto globals = std::make_shared<jinja::Env>();
    jinja::SetupGlobals(*globals);
    for (const auto& [key, value] : variables->object().entries()) {
      if (jinja::IsGlobalName(key)) {
        return absl::InvalidArgumentError(
            StrCat("chat template: context variable '", key, "' would redefine a built-in"));
      }
      globals->Set(key, value);
    }
    jinja::DateParts date = CurrentLocalDate();
    if (now) date = jinja::DateParts{now->year, now->month, now->day, now->hour, now->minute};
    jinja::EvalLimits limits{limits_.max_output_bytes, limits_.max_loop_iterations,
                             limits_.max_recursion_depth};
    jinja::Interpreter interpreter(limits, date);
    auto output = interpreter.Run(*compiled.program, globals);
    if (!output.ok()) return ToPublic(output.status());
    return *std::move(output);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(StrCat("chat template: bad context: ", e.what()));
  }
}

}  // namespace baton::templating
