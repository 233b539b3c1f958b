// Sizes of well-known models, so that `from_pretrained("gpt2-medium")` or `resnet50()` gives
// a parameter count and the shapes the activation formulas need without downloading anything.
//
// Transformer figures are the published configs (config.json on the Hugging Face Hub);
// parameter counts are the exact totals those configs give. CNN activation figures are
// approximate bytes of saved activations per 224x224 image in fp32 training, measured with
// torch.cuda.max_memory_allocated on PyTorch 2.x and rounded (docs/code-analysis.md).
// Static tables; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace rightsize::code {

struct TransformerSpec {
  std::string_view key;     // lower-case name fragment matched against the model id
  std::string_view family;  // "gpt2", "llama", "bert", …
  int64_t layers, hidden, heads, vocab, ffn, max_positions;
  double parameters;
};

struct VisionSpec {
  std::string_view name;  // torchvision constructor: "resnet50"
  double parameters;
  // fp32 activation bytes saved for backward per 224x224 image; 0 for ViTs, whose
  // activations follow the transformer formula (patch tokens as the sequence).
  double activation_bytes_per_image;
  int64_t layers, hidden, heads, patch;  // ViTs only
};

// The table entry whose key is the longest fragment of `model_id` (case-insensitive, the
// organisation prefix ignored): "meta-llama/Llama-2-7b-chat-hf" gives llama-2-7b.
std::optional<TransformerSpec> FindTransformer(std::string_view model_id);
// A torchvision constructor by exact name ("resnet50", "vit_b_16").
std::optional<VisionSpec> FindVisionModel(std::string_view name);

// Parameters of a decoder-only or encoder-only transformer from its shape: attention
// (4·h² + 4·h), MLP (2·h·ffn + ffn + h, or 3·h·ffn for gated SwiGLU MLPs), two norms per layer,
// token embeddings (twice when untied) and learned position embeddings.
double TransformerParameters(int64_t layers, int64_t hidden, int64_t ffn, int64_t vocab,
                             int64_t learned_positions, bool gated_mlp, bool tied_embeddings);

}  // namespace rightsize::code
