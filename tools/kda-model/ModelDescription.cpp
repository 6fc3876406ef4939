//===- ModelDescription.cpp - parse, validate and emit a model ------------===//

#include "tools/kda-model/ModelDescription.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <cmath>
#include <limits>
#include <sstream>

using namespace kda::model;
namespace json = llvm::json;

namespace {

/// Reads one JSON object, remembering its path for every message and
/// reporting fields it was never asked about (typos must not pass silently).
class ObjectReader {
public:
  ObjectReader(const json::Value *value, std::string path,
               std::vector<std::string> &errors)
      : path(std::move(path)), errors(errors) {
    object = value ? value->getAsObject() : nullptr;
    if (value && !object)
      error("", "expected an object");
  }

  bool valid() const { return object != nullptr; }
  std::string fieldPath(llvm::StringRef key) const {
    return key.empty() ? path : path + "." + key.str();
  }
  void error(llvm::StringRef key, const llvm::Twine &message) {
    errors.push_back(fieldPath(key) + ": " + message.str());
  }

  const json::Value *get(llvm::StringRef key) {
    seen.insert(key);
    return object ? object->get(key) : nullptr;
  }

  /// A positive integer field up to `max`; `required` fields must be
  /// present.
  void positive(llvm::StringRef key, int64_t &out, bool required,
                int64_t max) {
    const json::Value *v = get(key);
    if (!v) {
      if (required && object)
        error(key, "missing (expected a positive integer)");
      return;
    }
    std::optional<int64_t> i = v->getAsInteger();
    if (!i || *i <= 0) {
      error(key, "expected a positive integer, found " + render(*v));
      return;
    }
    if (*i > max) {
      error(key, llvm::formatv("expected at most {0}, found {1}", max, *i));
      return;
    }
    out = *i;
  }

  void number(llvm::StringRef key, double &out) {
    if (const json::Value *v = get(key)) {
      if (std::optional<double> d = v->getAsNumber())
        out = *d;
      else
        error(key, "expected a number, found " + render(*v));
    }
  }

  void boolean(llvm::StringRef key, bool &out) {
    if (const json::Value *v = get(key)) {
      if (std::optional<bool> b = v->getAsBoolean())
        out = *b;
      else
        error(key, "expected true or false, found " + render(*v));
    }
  }

  /// A string field restricted to `choices`.
  void choice(llvm::StringRef key, std::string &out,
              llvm::ArrayRef<llvm::StringRef> choices, bool required = false) {
    const json::Value *v = get(key);
    if (!v) {
      if (required && object)
        error(key, "missing (expected one of " + join(choices) + ")");
      return;
    }
    std::optional<llvm::StringRef> s = v->getAsString();
    if (!s || !llvm::is_contained(choices, *s)) {
      error(key, "expected one of " + join(choices) + ", found " + render(*v));
      return;
    }
    out = s->str();
  }

  /// Reports every field not read.
  void finish() {
    if (!object)
      return;
    std::vector<std::string> unknown;
    for (const auto &kv : *object)
      if (!seen.contains(kv.first.str()))
        unknown.push_back(kv.first.str());
    llvm::sort(unknown);
    for (const std::string &key : unknown)
      error(key, "unknown field");
  }

  static std::string render(const json::Value &v) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << v;
    return s;
  }
  static std::string join(llvm::ArrayRef<llvm::StringRef> choices) {
    std::string s;
    for (auto [i, c] : llvm::enumerate(choices))
      s += (i ? ", '" : "'") + c.str() + "'";
    return s;
  }

private:
  const json::Object *object = nullptr;
  std::string path;
  std::vector<std::string> &errors;
  llvm::StringSet<> seen;
};

void readLinear(ObjectReader &r, LinearConfig &c) {
  r.positive("heads", c.heads, true, kMaxHeads);
  c.valueHeads = c.heads;
  r.positive("value_heads", c.valueHeads, false, kMaxHeads);
  r.positive("head_dim", c.keyDim, true, kMaxHeadDim);
  c.valueDim = c.keyDim;
  r.positive("value_dim", c.valueDim, false, kMaxHeadDim);
  r.choice("update", c.update, {"delta", "additive"});
  r.choice("gate", c.gate, {"channel", "head", "none"});
  r.choice("gate_activation", c.gateActivation,
           {"none", "softplus", "lower_bound"});
  r.number("lower_bound", c.lowerBound);
  r.boolean("qk_l2norm", c.qkL2Norm);
  r.choice("beta", c.beta, {"none", "sigmoid", "sigmoid_neg_eigval", "absent"});
  r.choice("state_layout", c.stateLayout, {"k_major", "v_major"});
  r.boolean("output_final_state", c.outputFinalState);
  r.positive("chunk", c.chunk, false, std::numeric_limits<int64_t>::max());
  r.finish();
  if (c.heads > 0 && c.valueHeads % c.heads != 0)
    r.error("value_heads", llvm::formatv("{0} must be a multiple of heads "
                                         "({1}): value heads share q/k heads "
                                         "in groups",
                                         c.valueHeads, c.heads));
  if (c.chunk != 0 && c.chunk != 16 && c.chunk != 32 && c.chunk != 64)
    r.error("chunk", llvm::formatv("expected 16, 32 or 64, found {0}", c.chunk));
  if (c.gateActivation == "lower_bound" &&
      !(c.lowerBound >= -5.0 && c.lowerBound < 0.0))
    r.error("lower_bound",
            llvm::formatv("expected a value in [-5, 0), found {0}", c.lowerBound));
  if (c.gate == "none" && c.gateActivation != "none")
    r.error("gate_activation", "'" + c.gateActivation +
                                   "' needs a gate (gate is 'none')");
  if (c.update == "additive" && c.beta != "absent")
    r.error("beta", "the additive update takes no beta: set \"beta\": "
                    "\"absent\" or use \"update\": \"delta\"");
}

void readAttention(ObjectReader &r, AttentionConfig &c) {
  r.positive("heads", c.heads, true, kMaxHeads);
  c.kvHeads = c.heads;
  r.positive("kv_heads", c.kvHeads, false, kMaxHeads);
  r.positive("head_dim", c.headDim, true, kMaxHeadDim);
  int64_t window = 0;
  r.positive("window", window, false, kMaxTokens);
  if (window)
    c.window = window;
  r.finish();
  if (c.kvHeads > 0 && c.heads % c.kvHeads != 0)
    r.error("kv_heads", llvm::formatv("{0} must divide heads ({1}) for "
                                      "grouped-query attention",
                                      c.kvHeads, c.heads));
}

void readHybrid(ObjectReader &r, HybridConfig &c) {
  r.positive("window", c.window, true, kMaxTokens);
  r.choice("combine", c.combine, {"sum", "gated_head", "gated_channel"});
  r.finish();
}

LayerKind kindOf(llvm::StringRef s) {
  if (s == "kda")
    return LayerKind::Kda;
  if (s == "attention")
    return LayerKind::Attention;
  if (s == "window")
    return LayerKind::Window;
  return LayerKind::Hybrid;
}

} // namespace

/// The line and column where arrays and objects nest deeper than `limit`,
/// if they do. llvm::json::parse recurses once per level (and so does
/// destroying the value): 50,000 '[' overflowed the stack.
static std::optional<std::pair<int, int>> tooDeep(const std::string &text,
                                           int limit) {
  int depth = 0, line = 1, column = 0;
  bool inString = false, escaped = false;
  for (char ch : text) {
    ++column;
    if (ch == '\n') {
      ++line;
      column = 0;
    }
    if (inString) {
      if (escaped)
        escaped = false;
      else if (ch == '\\')
        escaped = true;
      else if (ch == '"')
        inString = false;
      continue;
    }
    if (ch == '"')
      inString = true;
    else if (ch == '[' || ch == '{') {
      if (++depth > limit)
        return std::make_pair(line, column);
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return std::nullopt;
}

std::string kda::model::checkTensorSizes(const Model &model) {
  std::string errors;
  auto check = [&](const char *section, int64_t heads, int64_t dim) {
    std::optional<int64_t> n = llvm::checkedMul(model.batch, model.tokens);
    if (n)
      n = llvm::checkedMul(*n, heads);
    if (n)
      n = llvm::checkedMul(*n, dim);
    if (!n || *n > kMaxTensorElements)
      errors += llvm::formatv("model.{0}: batch ({1}) x tokens ({2}) x heads "
                              "({3}) x head dim ({4}) is more than 2^48 "
                              "elements per tensor\n",
                              section, model.batch, model.tokens, heads, dim)
                    .str();
  };
  if (model.kda)
    check("kda", std::max(model.kda->heads, model.kda->valueHeads),
          std::max(model.kda->keyDim, model.kda->valueDim));
  if (model.attention)
    check("attention", model.attention->heads, model.attention->headDim);
  return errors;
}

std::string kda::model::parseModel(const std::string &text, Model &model) {
  if (auto at = tooDeep(text, kMaxJsonDepth))
    return llvm::formatv("model: not valid JSON: arrays and objects nest "
                         "deeper than {0} levels at line {1}, column {2}\n",
                         kMaxJsonDepth, at->first, at->second)
        .str();
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return "model: not valid JSON: " + llvm::toString(parsed.takeError());
  std::vector<std::string> errors;
  ObjectReader root(&*parsed, "model", errors);
  if (root.valid()) {
    if (const json::Value *v = root.get("name")) {
      // The function's symbol: an MLIR bare identifier starts with a letter
      // or '_' ("1model" made a module that does not parse).
      if (auto s = v->getAsString();
          s && !s->empty() &&
          (std::isalpha(static_cast<unsigned char>(s->front())) ||
           s->front() == '_') &&
          llvm::all_of(*s, [](char ch) {
            return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
          }))
        model.name = s->str();
      else
        root.error("name", "expected an identifier ([A-Za-z_][A-Za-z0-9_]*), "
                           "found " + ObjectReader::render(*v));
    } else {
      root.error("name", "missing (expected the function name)");
    }
    root.positive("batch", model.batch, false, kMaxBatch);
    root.positive("tokens", model.tokens, true, kMaxTokens);
    root.choice("activation_dtype", model.activationDtype,
                {"bf16", "f16", "f32"});

    if (const json::Value *v = root.get("kda")) {
      ObjectReader r(v, "model.kda", errors);
      model.kda.emplace();
      if (r.valid())
        readLinear(r, *model.kda);
    }
    if (const json::Value *v = root.get("attention")) {
      ObjectReader r(v, "model.attention", errors);
      model.attention.emplace();
      if (r.valid())
        readAttention(r, *model.attention);
    }
    if (const json::Value *v = root.get("hybrid")) {
      ObjectReader r(v, "model.hybrid", errors);
      model.hybrid.emplace();
      if (r.valid())
        readHybrid(r, *model.hybrid);
    }

    // layers: an explicit list of kinds, or {"pattern": [...], "count": N}.
    std::vector<std::pair<std::string, std::string>> kinds; // (path, kind)
    auto kindText = [](const json::Value &item) {
      auto s = item.getAsString();
      return s ? s->str() : ObjectReader::render(item);
    };
    const json::Value *layers = root.get("layers");
    if (!layers) {
      root.error("layers", "missing (expected a list of layer kinds)");
    } else if (const json::Array *list = layers->getAsArray()) {
      if (list->empty())
        root.error("layers", "expected at least one layer");
      else if (list->size() > static_cast<size_t>(kMaxLayers))
        root.error("layers", llvm::formatv("expected at most {0} layers, "
                                           "found {1}",
                                           kMaxLayers, list->size()));
      else
        for (auto [i, item] : llvm::enumerate(*list))
          kinds.push_back({"model.layers[" + std::to_string(i) + "]",
                           kindText(item)});
    } else {
      ObjectReader r(layers, "model.layers", errors);
      if (r.valid()) {
        int64_t count = 0;
        r.positive("count", count, true, kMaxLayers);
        const json::Value *pattern = r.get("pattern");
        r.finish();
        const json::Array *list = pattern ? pattern->getAsArray() : nullptr;
        if (!list || list->empty())
          r.error("pattern", "expected a non-empty list of layer kinds");
        else
          for (int64_t i = 0; i < count; ++i) {
            size_t at = i % list->size();
            kinds.push_back({"model.layers.pattern[" + std::to_string(at) + "]",
                             kindText((*list)[at])});
          }
      }
    }
    llvm::StringSet<> reported; // a bad pattern entry is reported once
    for (auto &[at, kind] : kinds) {
      std::string problem;
      if (kind != "kda" && kind != "attention" && kind != "window" &&
          kind != "hybrid")
        problem = "expected 'kda', 'attention', 'window' or 'hybrid', found " +
                  kind;
      else if ((kind == "kda" || kind == "hybrid") && !model.kda)
        problem = "a '" + kind + "' layer needs the 'model.kda' section";
      else if (kind == "attention" && !model.attention)
        problem = "an 'attention' layer needs the 'model.attention' section";
      else if (kind == "window" &&
               (!model.attention || !model.attention->window))
        problem = "a 'window' layer needs 'model.attention.window'";
      else if (kind == "hybrid" && !model.hybrid)
        problem = "a 'hybrid' layer needs the 'model.hybrid' section";
      if (problem.empty()) {
        model.layers.push_back(kindOf(kind));
        continue;
      }
      if (reported.insert(at).second)
        errors.push_back(at + ": " + problem);
    }
    root.finish();
  }
  std::string all;
  for (const std::string &e : errors)
    all += e + "\n";
  if (all.empty())
    all = checkTensorSizes(model);
  return all;
}

namespace {

std::string tensorType(std::initializer_list<int64_t> shape,
                       const std::string &elem) {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + elem + ">";
}

/// Accumulates the function's arguments, body and results.
struct FunctionText {
  std::vector<std::string> args, argTypes, results, resultTypes;
  std::string body;
  /// Final states of the current layer, returned after its output.
  std::vector<std::pair<std::string, std::string>> pendingStates;

  std::string arg(const std::string &name, const std::string &type) {
    args.push_back("%" + name);
    argTypes.push_back(type);
    return "%" + name;
  }
};

/// One linear (gated delta) layer; returns its output value name.
std::string emitLinear(FunctionText &fn, const Model &m, const LinearConfig &c,
                       const std::string &p) {
  const std::string act = m.activationDtype;
  const int64_t b = m.batch, t = m.tokens;
  std::string qType = tensorType({b, t, c.heads, c.keyDim}, act);
  std::string vType = tensorType({b, t, c.valueHeads, c.valueDim}, act);
  std::string q = fn.arg(p + "q", qType), k = fn.arg(p + "k", qType),
              v = fn.arg(p + "v", vType);
  std::string operands;
  bool activated = c.gateActivation != "none";
  if (c.gate != "none") {
    // Raw gates arrive in the activation dtype; log-space gates in f32.
    std::string gType =
        c.gate == "channel"
            ? tensorType({b, t, c.valueHeads, c.keyDim}, activated ? act : "f32")
            : tensorType({b, t, c.valueHeads}, activated ? act : "f32");
    operands += " gate(" + fn.arg(p + "g", gType) + " : " + gType + ")";
  }
  if (c.beta != "absent") {
    std::string betaType = tensorType({b, t, c.valueHeads}, act);
    operands += " beta(" + fn.arg(p + "beta", betaType) + " : " + betaType + ")";
  }
  if (activated) {
    std::string aType = tensorType({c.valueHeads}, "f32");
    std::string dType = c.gate == "channel"
                            ? tensorType({c.valueHeads, c.keyDim}, "f32")
                            : tensorType({c.valueHeads}, "f32");
    operands += " A_log(" + fn.arg(p + "A_log", aType) + " : " + aType + ")";
    operands += " dt_bias(" + fn.arg(p + "dt_bias", dType) + " : " + dType + ")";
  }
  std::vector<std::string> attrs;
  if (c.qkL2Norm)
    attrs.push_back("qk_l2norm");
  if (c.beta == "sigmoid" || c.beta == "sigmoid_neg_eigval")
    attrs.push_back("beta_activation = #kda<beta " + c.beta + ">");
  if (activated)
    attrs.push_back("gate_activation = #kda<gate " + c.gateActivation + ">");
  if (c.gateActivation == "lower_bound")
    attrs.push_back(llvm::formatv("lower_bound = {0:e} : f64", c.lowerBound));
  if (c.stateLayout == "v_major")
    attrs.push_back("state_layout = #kda<layout v_major>");
  // Without a chunk the op carries no tile: each target's strategy takes
  // its own (the GPUs' lane kernels run chunks of 16, the CPU 64).
  if (c.chunk > 0)
    attrs.push_back("tile = #kda.tile<chunk = " + std::to_string(c.chunk) +
                    ", sub_chunk = 16>");
  std::string attrText;
  for (auto [i, a] : llvm::enumerate(attrs))
    attrText += (i ? ", " : " {") + a;
  if (!attrs.empty())
    attrText += "}";

  std::string o = "%" + p + "o";
  std::string results = o;
  std::string resultText = " -> " + vType;
  if (c.outputFinalState) {
    std::string sType =
        c.stateLayout == "v_major"
            ? tensorType({b, c.valueHeads, c.valueDim, c.keyDim}, "f32")
            : tensorType({b, c.valueHeads, c.keyDim, c.valueDim}, "f32");
    results += ", %" + p + "state";
    resultText += " final_state " + sType;
    fn.pendingStates.push_back({"%" + p + "state", sType});
  }
  fn.body += "  " + results + " = kda.gated_delta " + c.update + " " + q +
             ", " + k + ", " + v + operands + attrText + " : " + qType + ", " +
             qType + ", " + vType + resultText + "\n";
  return o;
}

std::string emitWindow(FunctionText &fn, const Model &m, const std::string &q,
                       const std::string &k, const std::string &v,
                       const std::string &qType, const std::string &kType,
                       const std::string &vType, const std::string &oType,
                       int64_t window, const std::string &p) {
  std::string o = "%" + p + "window_o";
  fn.body += "  " + o + " = kda.window_attention " + q + ", " + k + ", " + v +
             " {window = " + std::to_string(window) + " : i64} : " + qType +
             ", " + kType + ", " + vType + " -> " + oType + "\n";
  return o;
}

} // namespace

std::string kda::model::emitModule(const Model &m) {
  FunctionText fn;
  const std::string act = m.activationDtype;
  const int64_t b = m.batch, t = m.tokens;
  for (auto [i, kind] : llvm::enumerate(m.layers)) {
    std::string p = "l" + std::to_string(i) + "_";
    std::string o, oType;
    switch (kind) {
    case LayerKind::Kda:
      o = emitLinear(fn, m, *m.kda, p);
      oType = tensorType({b, t, m.kda->valueHeads, m.kda->valueDim}, act);
      break;
    case LayerKind::Attention:
    case LayerKind::Window: {
      const AttentionConfig &a = *m.attention;
      std::string qType = tensorType({b, t, a.heads, a.headDim}, act);
      std::string kvType = tensorType({b, t, a.kvHeads, a.headDim}, act);
      std::string q = fn.arg(p + "q", qType), k = fn.arg(p + "k", kvType),
                  v = fn.arg(p + "v", kvType);
      // Full causal attention is a window as long as the sequence.
      int64_t window = kind == LayerKind::Window ? *a.window : t;
      oType = qType;
      o = emitWindow(fn, m, q, k, v, qType, kvType, kvType, oType, window, p);
      break;
    }
    case LayerKind::Hybrid: {
      const LinearConfig &c = *m.kda;
      o = emitLinear(fn, m, c, p);
      oType = tensorType({b, t, c.valueHeads, c.valueDim}, act);
      std::string qType = tensorType({b, t, c.heads, c.keyDim}, act);
      std::string local =
          emitWindow(fn, m, "%" + p + "q", "%" + p + "k", "%" + p + "v", qType,
                     qType, oType, oType, m.hybrid->window, p);
      std::string mixed = "%" + p + "mixed";
      if (m.hybrid->combine == "sum") {
        fn.body += "  " + mixed + " = kda.hybrid sum " + o + ", " + local +
                   " : " + oType + ", " + oType + " -> " + oType + "\n";
      } else {
        std::string zType =
            m.hybrid->combine == "gated_head"
                ? tensorType({b, t, c.valueHeads}, "f32")
                : tensorType({b, t, c.valueHeads, c.valueDim}, "f32");
        std::string z = fn.arg(p + "z", zType);
        fn.body += "  " + mixed + " = kda.hybrid gated " + o + ", " + local +
                   " gate(" + z + " : " + zType + ") : " + oType + ", " +
                   oType + " -> " + oType + "\n";
      }
      o = mixed;
      break;
    }
    }
    // Each layer returns its output, then its final state (if any).
    fn.results.push_back(o);
    fn.resultTypes.push_back(oType);
    for (auto &[name, type] : fn.pendingStates) {
      fn.results.push_back(name);
      fn.resultTypes.push_back(type);
    }
    fn.pendingStates.clear();
  }
  std::string text = "// Generated by kda-model from the description of '" +
                     m.name + "'.\nfunc.func @" + m.name + "(";
  for (size_t i = 0; i < fn.args.size(); ++i)
    text += (i ? ", " : "") + fn.args[i] + ": " + fn.argTypes[i];
  text += ") -> (";
  for (size_t i = 0; i < fn.resultTypes.size(); ++i)
    text += (i ? ", " : "") + fn.resultTypes[i];
  text += ") {\n" + fn.body + "  return ";
  for (size_t i = 0; i < fn.results.size(); ++i)
    text += (i ? ", " : "") + fn.results[i];
  text += " : ";
  for (size_t i = 0; i < fn.resultTypes.size(); ++i)
    text += (i ? ", " : "") + fn.resultTypes[i];
  return text + "\n}\n";
}
