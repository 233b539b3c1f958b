// Sizes of well-known models, so that `from_pretrained("gpt2-medium")`, a `LlamaConfig(…)` in the
// code, a config.json in the job's folder or `resnet50()` give a parameter count and the shapes
// the memory formulas need, without downloading anything.
//
// Transformers are read the way Hugging Face transformers reads them: a config (model_type and
// its keys, with the config class's defaults and aliases: n_embd is hidden_size, a missing
// num_key_value_heads is num_attention_heads, a missing head_dim is hidden / heads) and the module
// structure of the family's modelling code (gated MLPs with three matrices in Llama, Mistral,
// Qwen2, Gemma and Phi-3, two in GPT-2, BERT and OPT; biases where the family has them;
// LayerNorm or RMSNorm; learned, rotary or ALiBi positions; multi-query attention in Falcon and
// GPTBigCode; tied or separate output embeddings; T5 and mT5 encoder-decoders). The
// built-in hub table holds the published config.json values of common open models, never a
// measured figure: every parameter count is computed from the architecture. CNN activation
// figures are approximate bytes of saved activations per 224x224 image in fp32 training
// (docs/code-analysis.md). Static tables; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rightsize::code {

// A transformer as its config and its family's modules define it.
struct TransformerSpec {
  std::string key;     // the hub table's key ("llama-2-7b"); empty for a config read elsewhere
  std::string family;  // model_type: "gpt2", "llama", "bert", …; "transformer" when unknown
  int64_t layers = 0;  // decoder layers; encoder layers for encoders and encoder-decoders
  int64_t decoder_layers = 0;  // encoder-decoders (T5, mT5) only
  int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0, ffn = 0;
  int64_t max_positions = 0;
  int64_t embed_dim = 0;          // the token embeddings' width (OPT's word_embed_proj_dim)
  int64_t token_types = 0;        // BERT's type_vocab_size
  int64_t relative_buckets = 0;   // T5's relative position buckets (first layer of each stack)
  int64_t learned_positions = 0;  // rows of a learned position table; 0 for rotary/relative
  bool tied_embeddings = false;   // the output layer reuses the token embeddings
  bool gated_mlp = false;         // gate, up and down matrices (SwiGLU/GeGLU): 3·h·ffn
  bool fused_gate_up = false;     // Phi-3's gate_up_proj (one matrix of 2·ffn outputs)
  int64_t experts = 0;            // Mixtral: MLP experts per layer (all held), and per token
  int64_t experts_per_token = 0;
  bool qkv_bias = false, o_bias = false, mlp_bias = false, lm_head_bias = false;
  bool rms_norm = false;    // RMSNorm (h weights) instead of LayerNorm (h + h)
  int norms_per_layer = 2;  // Gemma-2 has four, Phi-2 one
  bool final_norm = true, embedding_norm = false, pooler = false;
  bool fused_qkv = false;  // one projection to q, k and v (GPT-2, GPT-NeoX, Phi-3)
  bool encoder_decoder = false;
  bool vit = false;  // patches instead of tokens: HF ViTModel
  int64_t patch = 0, image_size = 0, channels = 3;
  double parameters = 0;  // computed by TransformerParametersOf
};

// One kind of nn.Linear in the transformer blocks, as PEFT's target_modules name it.
struct LinearModule {
  std::string name;  // the module's attribute name: "q_proj", "c_attn", "query", "wi_0"
  int64_t in = 0, out = 0;
  int64_t count = 0;  // instances in the whole model (one per layer, or more)
  bool bias = false;
};

struct VisionSpec {
  std::string_view name;  // torchvision constructor: "resnet50"
  double parameters;
  // fp32 activation bytes saved for backward per 224x224 image; 0 for ViTs, whose
  // activations follow the transformer formula (patch tokens as the sequence).
  double activation_bytes_per_image;
  int64_t layers, hidden, heads, patch;  // ViTs only
};

// A detector: a ResNet/ResNeXt backbone with an FPN neck and its heads, counted from the
// architecture (torchvision's detection models and MMDetection's configs).
struct DetectorSpec {
  std::string name;   // "FasterRCNN r50 FPN"
  double parameters;  // every trainable parameter
  // fp32 activation bytes saved for backward per image, at the area of a 224x224 image: the
  // backbone's, the FPN's and the dense heads' maps, counted the way autograd saves them.
  double activation_bytes_per_image;
  // fp32 bytes the RoI heads save per image, whatever its size: they run on a fixed number of
  // sampled boxes (512, a quarter of them positive for the mask head).
  double roi_bytes_per_image = 0;
};

// How a detector's backbone is trained, which sets what its backward pass keeps.
struct DetectorTraining {
  // torchvision's FrozenBatchNorm2d: the BN weights are buffers, not parameters, and the BN is
  // an affine map that saves nothing. A BatchNorm with trainable weights saves its input, in
  // eval mode too (MMDetection's norm_eval).
  bool frozen_bn = false;
  // The stem (0) and the first n stages are frozen and save nothing; -1 trains the whole
  // backbone. MMDetection's frozen_stages, torchvision's 4 − trainable_backbone_layers.
  // (Frozen stages' parameters are still counted in `parameters`, with their gradients.)
  int frozen_stages = 1;
  // RetinaNet's sigmoid focal loss as mmcv's CUDA kernel (saves its logits) rather than
  // written in Python (torchvision's: eight tensors of the logits' size).
  bool fused_focal_loss = false;
  // torchvision's heads: RetinaNet's P6 from P5, and the background among num_classes (91).
  // MMDetection's and detectron2's take P6 from C5 and add a background score.
  bool torchvision_heads = false;
};

// Elements a ResNet/ResNeXt body saves for backward per input pixel (fp32 maps), counted block
// by block: each convolution's input, each trainable BN's input, each ReLU's output (in place,
// so one storage with the next convolution's input). inner_width is the first stage's
// bottleneck width: 64 for ResNet, groups × width per group for ResNeXt. 0 for another depth.
double ResNetSavedPerPixel(int64_t depth, int64_t inner_width, const DetectorTraining& how);

// detector: "FasterRCNN", "RetinaNet" or "MaskRCNN"; backbone depth 18, 34, 50, 101 or 152;
// groups > 1 for ResNeXt (32x4d, 32x8d, 64x4d at depth 101, 32x4d at 50); num_classes the
// dataset's (MMDetection's heads: 80 for COCO; torchvision's: 91). BadInput for another
// detector or backbone.
StatusOr<DetectorSpec> DetectorOf(std::string_view detector, int64_t depth, int64_t groups,
                                  int64_t width_per_group, int64_t num_classes,
                                  const DetectorTraining& how);
// torchvision's detection constructors by exact name ("fasterrcnn_resnet50_fpn"). With
// pretrained weights (the constructors' default backbone weights) torchvision freezes the BNs
// and trains 3 stages; from scratch it trains every BN and stage.
std::optional<DetectorSpec> FindTorchvisionDetector(
    std::string_view name, const DetectorTraining& how = {
                               .frozen_bn = true, .frozen_stages = 1, .torchvision_heads = true});

// A config's value for a key as written ("4096", "true", "llama"); nullopt when absent.
using ConfigLookup = std::function<std::optional<std::string>(std::string_view key)>;

// The spec a config gives, read as transformers' config class for its model_type does (its
// defaults for keys not given, its aliases). `model_type` overrides the config's own key when
// not empty (a LlamaConfig(...) call has none). Unknown model types are read as a GPT-2-like
// decoder (learned positions, tied embeddings) when they give the layers and hidden size; else
// BadInput naming what is missing.
StatusOr<TransformerSpec> TransformerFromConfig(const ConfigLookup& get,
                                                std::string_view model_type = "");

// The table entry whose key is the longest fragment of `model_id` (case-insensitive, the
// organisation prefix ignored): "meta-llama/Llama-2-7b-chat-hf" gives llama-2-7b.
std::optional<TransformerSpec> FindTransformer(std::string_view model_id);
// The hub table's keys, for tests that check every row.
std::vector<std::string_view> HubKeys();
// A torchvision constructor by exact name ("resnet50", "vit_b_16").
std::optional<VisionSpec> FindVisionModel(std::string_view name);

// Every parameter of the model the spec describes (the base model with its language-model head;
// BERT-like encoders with their pooler), tied weights counted once, as
// model.num_parameters() counts them.
double TransformerParametersOf(const TransformerSpec& spec);
// The nn.Linear layers of the transformer blocks (not embeddings, not the output layer): what
// bitsandbytes quantises and PEFT's target_modules choose from.
std::vector<LinearModule> LinearModulesOf(const TransformerSpec& spec);
// PEFT's default target_modules for a family when LoraConfig names none (its
// TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING); empty when the family has none.
std::vector<std::string> DefaultLoraTargets(std::string_view family);

// Parameters of a GPT-2-style decoder from its shape (learned positions, LayerNorms, biases,
// 4·h² + 4·h attention, 2·h·ffn + ffn + h MLP; or Llama-style without biases when gated):
// hand-written models whose family is unknown (nanoGPT's GPTConfig).
double TransformerParameters(int64_t layers, int64_t hidden, int64_t ffn, int64_t vocab,
                             int64_t learned_positions, bool gated_mlp, bool tied_embeddings);

}  // namespace rightsize::code
