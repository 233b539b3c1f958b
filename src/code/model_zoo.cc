#include "code/model_zoo.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

namespace rightsize::code {
namespace {

// key, family, layers, hidden, heads, vocab, ffn, max positions, parameters
constexpr std::array<TransformerSpec, 24> kTransformers = {{
    {"distilgpt2", "gpt2", 6, 768, 12, 50257, 3072, 1024, 81.9e6},
    {"gpt2", "gpt2", 12, 768, 12, 50257, 3072, 1024, 124.4e6},
    {"gpt2-medium", "gpt2", 24, 1024, 16, 50257, 4096, 1024, 354.8e6},
    {"gpt2-large", "gpt2", 36, 1280, 20, 50257, 5120, 1024, 774.0e6},
    {"gpt2-xl", "gpt2", 48, 1600, 25, 50257, 6400, 1024, 1557.6e6},
    {"bert-base", "bert", 12, 768, 12, 30522, 3072, 512, 109.5e6},
    {"bert-large", "bert", 24, 1024, 16, 30522, 4096, 512, 335.1e6},
    {"roberta-base", "roberta", 12, 768, 12, 50265, 3072, 514, 124.6e6},
    {"roberta-large", "roberta", 24, 1024, 16, 50265, 4096, 514, 355.4e6},
    {"opt-125m", "opt", 12, 768, 12, 50272, 3072, 2048, 125.2e6},
    {"opt-1.3b", "opt", 24, 2048, 32, 50272, 8192, 2048, 1315.8e6},
    {"opt-6.7b", "opt", 32, 4096, 32, 50272, 16384, 2048, 6658.5e6},
    {"pythia-1b", "gpt_neox", 16, 2048, 8, 50304, 8192, 2048, 1011.8e6},
    {"tinyllama-1.1b", "llama", 22, 2048, 32, 32000, 5632, 2048, 1100.0e6},
    {"llama-2-7b", "llama", 32, 4096, 32, 32000, 11008, 4096, 6738.4e6},
    {"llama-2-13b", "llama", 40, 5120, 40, 32000, 13824, 4096, 13015.9e6},
    {"llama-2-70b", "llama", 80, 8192, 64, 32000, 28672, 4096, 68976.6e6},
    {"llama-3-8b", "llama", 32, 4096, 32, 128256, 14336, 8192, 8030.3e6},
    {"llama-3.1-8b", "llama", 32, 4096, 32, 128256, 14336, 131072, 8030.3e6},
    {"llama-3-70b", "llama", 80, 8192, 64, 128256, 28672, 8192, 70553.7e6},
    {"mistral-7b", "mistral", 32, 4096, 32, 32000, 14336, 32768, 7241.7e6},
    {"qwen2-7b", "qwen2", 28, 3584, 28, 152064, 18944, 32768, 7615.6e6},
    {"phi-2", "phi", 32, 2560, 32, 51200, 10240, 2048, 2779.7e6},
    {"t5-base", "t5", 24, 768, 12, 32128, 3072, 512, 222.9e6},
}};

// name, parameters, fp32 activation bytes per 224² image, then ViT shapes
constexpr std::array<VisionSpec, 16> kVision = {{
    {"resnet18", 11.69e6, 24e6, 0, 0, 0, 0},
    {"resnet34", 21.80e6, 36e6, 0, 0, 0, 0},
    {"resnet50", 25.56e6, 105e6, 0, 0, 0, 0},
    {"resnet101", 44.55e6, 155e6, 0, 0, 0, 0},
    {"resnet152", 60.19e6, 215e6, 0, 0, 0, 0},
    {"wide_resnet50_2", 68.88e6, 150e6, 0, 0, 0, 0},
    {"resnext50_32x4d", 25.03e6, 140e6, 0, 0, 0, 0},
    {"vgg16", 138.36e6, 110e6, 0, 0, 0, 0},
    {"densenet121", 7.98e6, 130e6, 0, 0, 0, 0},
    {"mobilenet_v2", 3.50e6, 70e6, 0, 0, 0, 0},
    {"efficientnet_b0", 5.29e6, 95e6, 0, 0, 0, 0},
    {"convnext_tiny", 28.59e6, 90e6, 0, 0, 0, 0},
    {"vit_b_16", 86.57e6, 0, 12, 768, 12, 16},
    {"vit_b_32", 88.22e6, 0, 12, 768, 12, 32},
    {"vit_l_16", 304.33e6, 0, 24, 1024, 16, 16},
    {"vit_h_14", 632.05e6, 0, 32, 1280, 16, 14},
}};

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

std::optional<TransformerSpec> FindTransformer(std::string_view model_id) {
  std::string id = Lower(model_id);
  if (auto slash = id.rfind('/'); slash != std::string::npos) id = id.substr(slash + 1);
  // "Meta-Llama-3-8B" and "Llama-2-7b-hf" both name llama-…: drop the vendor prefix.
  if (id.starts_with("meta-")) id = id.substr(5);
  const TransformerSpec* best = nullptr;
  for (const auto& spec : kTransformers) {
    if (id.find(spec.key) == std::string::npos) continue;
    if (best == nullptr || spec.key.size() > best->key.size()) best = &spec;
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

std::optional<VisionSpec> FindVisionModel(std::string_view name) {
  for (const auto& spec : kVision) {
    if (spec.name == name) return spec;
  }
  return std::nullopt;
}

double TransformerParameters(int64_t layers, int64_t hidden, int64_t ffn, int64_t vocab,
                             int64_t learned_positions, bool gated_mlp, bool tied_embeddings) {
  auto h = static_cast<double>(hidden);
  auto f = static_cast<double>(ffn);
  double attention = gated_mlp ? 4 * h * h : 4 * h * h + 4 * h;  // Llama-style: no biases
  double mlp = gated_mlp ? 3 * h * f : 2 * h * f + f + h;
  double norms = gated_mlp ? 2 * h : 4 * h;
  double per_layer = attention + mlp + norms;
  double embeddings = static_cast<double>(vocab) * h * (tied_embeddings ? 1 : 2) +
                      static_cast<double>(learned_positions) * h;
  return static_cast<double>(layers) * per_layer + embeddings + (gated_mlp ? h : 2 * h);
}

}  // namespace rightsize::code
