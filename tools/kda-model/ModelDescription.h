//===- ModelDescription.h - a model's attention layers, as data -*- C++ -*-===//
//
// A model description (JSON, documented in docs/model-description.md) names
// the attention layers of a model: their kinds (KDA, full attention, sliding
// window, hybrid), head counts and dimensions, gate form and window sizes.
// The driver turns it into one kda module with one function that runs every
// layer. Errors name the field's path (`model.kda.heads: ...`).
//
//===----------------------------------------------------------------------===//

#ifndef KDA_TOOLS_KDA_MODEL_MODELDESCRIPTION_H
#define KDA_TOOLS_KDA_MODEL_MODELDESCRIPTION_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kda::model {

enum class LayerKind { Kda, Attention, Window, Hybrid };

/// The linear (gated delta) layers' configuration.
struct LinearConfig {
  int64_t heads = 0;       // H (q/k heads)
  int64_t valueHeads = 0;  // HV, a multiple of H (defaults to H)
  int64_t keyDim = 0;      // K
  int64_t valueDim = 0;    // V (defaults to K)
  std::string update = "delta";  // delta | additive
  std::string gate = "channel";  // channel | head | none
  std::string gateActivation = "none"; // none | softplus | lower_bound
  double lowerBound = -5.0;
  bool qkL2Norm = false;
  std::string beta = "none";     // none | sigmoid | sigmoid_neg_eigval | absent
  std::string stateLayout = "k_major";
  bool outputFinalState = true;
  int64_t chunk = 0; // 0: no #kda.tile (each target's default chunk)
};

/// The softmax attention layers' configuration (full or sliding window).
struct AttentionConfig {
  int64_t heads = 0;   // HQ
  int64_t kvHeads = 0; // HK = HV (defaults to heads)
  int64_t headDim = 0; // K = V
  std::optional<int64_t> window; // absent: full causal attention
};

struct HybridConfig {
  int64_t window = 0;
  std::string combine = "sum"; // sum | gated_head | gated_channel
};

struct Model {
  std::string name;
  int64_t batch = 1;
  int64_t tokens = 0;
  std::string activationDtype = "bf16"; // bf16 | f16 | f32
  std::optional<LinearConfig> kda;
  std::optional<AttentionConfig> attention;
  std::optional<HybridConfig> hybrid;
  std::vector<LayerKind> layers;
};

/// Bounds of a description's sizes: far above any model's, low enough that
/// the module stays small and every size is a plain int64 (a description of
/// 2^63 - 1 tokens or a million layers is a mistake to report, not a module
/// to build).
inline constexpr int64_t kMaxBatch = int64_t(1) << 16;
inline constexpr int64_t kMaxTokens = (int64_t(1) << 31) - 1; // i32 offsets
inline constexpr int64_t kMaxHeads = 1024;
inline constexpr int64_t kMaxHeadDim = 1024;
inline constexpr int64_t kMaxLayers = 4096;
/// Elements of the largest tensor (batch x tokens x heads x head dim).
inline constexpr int64_t kMaxTensorElements = int64_t(1) << 48;
/// Nesting of JSON arrays and objects; the parser recurses per level.
inline constexpr int kMaxJsonDepth = 256;

/// Checks the product bound (kMaxTensorElements) for `model`'s batch and
/// tokens; "" or one message per line. parseModel applies it; call it again
/// after overriding batch or tokens.
std::string checkTensorSizes(const Model &model);

/// Parses and validates `json`. Returns "" on success, else one message per
/// line, each starting with the offending field's path.
std::string parseModel(const std::string &json, Model &model);

/// The kda module (MLIR text) with one function `@<name>` that runs every
/// layer in order; each layer reads its own arguments (q, k, v, gates, ...)
/// and contributes its outputs (and final states) to the results.
std::string emitModule(const Model &model);

} // namespace kda::model

#endif // KDA_TOOLS_KDA_MODEL_MODELDESCRIPTION_H
