#include "code/model_zoo.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <string>

namespace rightsize::code {
namespace {

// Published config.json values of common open models (the Hugging Face Hub), written as the
// config keys that differ from the config class's defaults; the parameter counts are computed.
struct HubConfig {
  std::string_view key;     // lower-case fragment of the model id
  std::string_view config;  // "key=value" pairs, space-separated
};

constexpr HubConfig kHub[] = {
    // GPT-2 (GPT2Config defaults: gpt2, 124M).
    {"distilgpt2", "model_type=gpt2 n_layer=6"},
    {"gpt2", "model_type=gpt2"},
    {"gpt2-medium", "model_type=gpt2 n_layer=24 n_embd=1024 n_head=16"},
    {"gpt2-large", "model_type=gpt2 n_layer=36 n_embd=1280 n_head=20"},
    {"gpt2-xl", "model_type=gpt2 n_layer=48 n_embd=1600 n_head=25"},
    // BERT family (BertConfig defaults: bert-base-uncased).
    {"bert-base", "model_type=bert"},
    {"bert-base-cased", "model_type=bert vocab_size=28996"},
    {"bert-large",
     "model_type=bert num_hidden_layers=24 hidden_size=1024 num_attention_heads=16 "
     "intermediate_size=4096"},
    {"bert-large-cased",
     "model_type=bert vocab_size=28996 num_hidden_layers=24 hidden_size=1024 "
     "num_attention_heads=16 intermediate_size=4096"},
    {"roberta-base",
     "model_type=roberta vocab_size=50265 max_position_embeddings=514 "
     "type_vocab_size=1"},
    {"roberta-large",
     "model_type=roberta vocab_size=50265 max_position_embeddings=514 "
     "type_vocab_size=1 num_hidden_layers=24 hidden_size=1024 "
     "num_attention_heads=16 intermediate_size=4096"},
    {"distilroberta",
     "model_type=roberta vocab_size=50265 max_position_embeddings=514 "
     "type_vocab_size=1 num_hidden_layers=6"},
    {"distilbert-base", "model_type=distilbert"},
    {"distilbert-base-cased", "model_type=distilbert vocab_size=28996"},
    // OPT (OPTConfig defaults: opt-125m).
    {"opt-125m", "model_type=opt"},
    {"opt-350m",
     "model_type=opt hidden_size=1024 num_hidden_layers=24 num_attention_heads=16 "
     "ffn_dim=4096 word_embed_proj_dim=512 do_layer_norm_before=false"},
    {"opt-1.3b",
     "model_type=opt hidden_size=2048 num_hidden_layers=24 num_attention_heads=32 "
     "ffn_dim=8192"},
    {"opt-2.7b",
     "model_type=opt hidden_size=2560 num_hidden_layers=32 num_attention_heads=32 "
     "ffn_dim=10240"},
    {"opt-6.7b",
     "model_type=opt hidden_size=4096 num_hidden_layers=32 num_attention_heads=32 "
     "ffn_dim=16384"},
    {"opt-13b",
     "model_type=opt hidden_size=5120 num_hidden_layers=40 num_attention_heads=40 "
     "ffn_dim=20480"},
    {"opt-30b",
     "model_type=opt hidden_size=7168 num_hidden_layers=48 num_attention_heads=56 "
     "ffn_dim=28672"},
    // Pythia (GPT-NeoX).
    {"pythia-160m",
     "model_type=gpt_neox vocab_size=50304 hidden_size=768 num_hidden_layers=12 "
     "num_attention_heads=12 intermediate_size=3072"},
    {"pythia-410m",
     "model_type=gpt_neox vocab_size=50304 hidden_size=1024 num_hidden_layers=24 "
     "num_attention_heads=16 intermediate_size=4096"},
    {"pythia-1b",
     "model_type=gpt_neox vocab_size=50304 hidden_size=2048 num_hidden_layers=16 "
     "num_attention_heads=8 intermediate_size=8192"},
    {"pythia-1.4b",
     "model_type=gpt_neox vocab_size=50304 hidden_size=2048 num_hidden_layers=24 "
     "num_attention_heads=16 intermediate_size=8192"},
    {"pythia-2.8b",
     "model_type=gpt_neox vocab_size=50304 hidden_size=2560 num_hidden_layers=32 "
     "num_attention_heads=32 intermediate_size=10240"},
    {"pythia-6.9b",
     "model_type=gpt_neox vocab_size=50432 hidden_size=4096 num_hidden_layers=32 "
     "num_attention_heads=32 intermediate_size=16384"},
    {"pythia-12b",
     "model_type=gpt_neox vocab_size=50688 hidden_size=5120 num_hidden_layers=36 "
     "num_attention_heads=40 intermediate_size=20480"},
    // StableLM alpha (GPT-NeoX).
    {"stablelm-base-alpha-3b",
     "model_type=gpt_neox vocab_size=50688 hidden_size=4096 num_hidden_layers=16 "
     "num_attention_heads=32 intermediate_size=16384 max_position_embeddings=4096"},
    // Falcon (FalconConfig defaults: falcon-7b's shape but multi_query and parallel_attn).
    {"falcon-7b", "model_type=falcon"},
    {"falcon-40b",
     "model_type=falcon hidden_size=8192 num_hidden_layers=60 num_attention_heads=128 "
     "num_kv_heads=8 new_decoder_architecture=true"},
    // BLOOM and BLOOMZ (BloomConfig's defaults are a toy model: every size given).
    {"bloom-560m", "model_type=bloom hidden_size=1024 n_layer=24 n_head=16"},
    {"bloom-7b1", "model_type=bloom hidden_size=4096 n_layer=30 n_head=32"},
    {"bloomz-560m", "model_type=bloom hidden_size=1024 n_layer=24 n_head=16"},
    {"bloomz-7b1", "model_type=bloom hidden_size=4096 n_layer=30 n_head=32"},
    // StarCoder and OctoCoder (GPTBigCode: multi-query attention, learned positions).
    {"starcoder",
     "model_type=gpt_bigcode vocab_size=49152 n_positions=8192 n_embd=6144 n_layer=40 "
     "n_head=48 n_inner=24576"},
    {"octocoder",
     "model_type=gpt_bigcode vocab_size=49152 n_positions=8192 n_embd=6144 n_layer=40 "
     "n_head=48 n_inner=24576"},
    // Llama (LlamaConfig defaults: Llama-2-7B's shape).
    {"tinyllama-1.1b",
     "model_type=llama hidden_size=2048 intermediate_size=5632 "
     "num_hidden_layers=22 num_attention_heads=32 num_key_value_heads=4"},
    {"llama-2-7b", "model_type=llama max_position_embeddings=4096"},
    {"llama-2-13b",
     "model_type=llama max_position_embeddings=4096 hidden_size=5120 "
     "intermediate_size=13824 num_hidden_layers=40 num_attention_heads=40"},
    {"llama-2-70b",
     "model_type=llama max_position_embeddings=4096 hidden_size=8192 "
     "intermediate_size=28672 num_hidden_layers=80 num_attention_heads=64 "
     "num_key_value_heads=8"},
    {"codellama-7b", "model_type=llama vocab_size=32016 max_position_embeddings=16384"},
    {"codellama-13b",
     "model_type=llama vocab_size=32016 max_position_embeddings=16384 "
     "hidden_size=5120 intermediate_size=13824 num_hidden_layers=40 "
     "num_attention_heads=40"},
    {"llama-3-8b",
     "model_type=llama vocab_size=128256 max_position_embeddings=8192 "
     "intermediate_size=14336 num_key_value_heads=8"},
    {"llama-3-70b",
     "model_type=llama vocab_size=128256 max_position_embeddings=8192 "
     "hidden_size=8192 intermediate_size=28672 num_hidden_layers=80 "
     "num_attention_heads=64 num_key_value_heads=8"},
    {"llama-3.1-8b",
     "model_type=llama vocab_size=128256 max_position_embeddings=131072 "
     "intermediate_size=14336 num_key_value_heads=8"},
    {"llama-3.1-70b",
     "model_type=llama vocab_size=128256 max_position_embeddings=131072 "
     "hidden_size=8192 intermediate_size=28672 num_hidden_layers=80 "
     "num_attention_heads=64 num_key_value_heads=8"},
    {"llama-3.3-70b",
     "model_type=llama vocab_size=128256 max_position_embeddings=131072 "
     "hidden_size=8192 intermediate_size=28672 num_hidden_layers=80 "
     "num_attention_heads=64 num_key_value_heads=8"},
    {"llama-3.1-405b",
     "model_type=llama vocab_size=128256 max_position_embeddings=131072 "
     "hidden_size=16384 intermediate_size=53248 num_hidden_layers=126 "
     "num_attention_heads=128 num_key_value_heads=8"},
    {"llama-3.2-1b",
     "model_type=llama vocab_size=128256 max_position_embeddings=131072 "
     "hidden_size=2048 intermediate_size=8192 num_hidden_layers=16 "
     "num_attention_heads=32 num_key_value_heads=8 head_dim=64 "
     "tie_word_embeddings=true"},
    {"llama-3.2-3b",
     "model_type=llama vocab_size=128256 max_position_embeddings=131072 "
     "hidden_size=3072 intermediate_size=8192 num_hidden_layers=28 "
     "num_attention_heads=24 num_key_value_heads=8 head_dim=128 "
     "tie_word_embeddings=true"},
    // Mistral (MistralConfig defaults: Mistral-7B).
    {"mistral-7b", "model_type=mistral max_position_embeddings=32768"},
    {"mistral-7b-v0.3", "model_type=mistral vocab_size=32768 max_position_embeddings=32768"},
    {"mistral-7b-instruct-v0.3",
     "model_type=mistral vocab_size=32768 max_position_embeddings=32768"},
    // Mixtral (MixtralConfig defaults: Mixtral-8x7B): every expert is held in memory.
    {"mixtral-8x7b", "model_type=mixtral max_position_embeddings=32768"},
    {"mixtral-8x22b",
     "model_type=mixtral vocab_size=32768 max_position_embeddings=65536 "
     "hidden_size=6144 intermediate_size=16384 num_hidden_layers=56 "
     "num_attention_heads=48 num_key_value_heads=8"},
    // Qwen2 and Qwen2.5.
    {"qwen2-0.5b",
     "model_type=qwen2 vocab_size=151936 hidden_size=896 intermediate_size=4864 "
     "num_hidden_layers=24 num_attention_heads=14 num_key_value_heads=2 "
     "tie_word_embeddings=true"},
    {"qwen2-1.5b",
     "model_type=qwen2 vocab_size=151936 hidden_size=1536 intermediate_size=8960 "
     "num_hidden_layers=28 num_attention_heads=12 num_key_value_heads=2 "
     "tie_word_embeddings=true"},
    {"qwen2-7b",
     "model_type=qwen2 vocab_size=152064 hidden_size=3584 intermediate_size=18944 "
     "num_hidden_layers=28 num_attention_heads=28 num_key_value_heads=4"},
    {"qwen2-72b",
     "model_type=qwen2 vocab_size=152064 hidden_size=8192 intermediate_size=29568 "
     "num_hidden_layers=80 num_attention_heads=64 num_key_value_heads=8"},
    {"qwen2.5-0.5b",
     "model_type=qwen2 vocab_size=151936 hidden_size=896 intermediate_size=4864 "
     "num_hidden_layers=24 num_attention_heads=14 num_key_value_heads=2 "
     "tie_word_embeddings=true"},
    {"qwen2.5-1.5b",
     "model_type=qwen2 vocab_size=151936 hidden_size=1536 "
     "intermediate_size=8960 num_hidden_layers=28 num_attention_heads=12 "
     "num_key_value_heads=2 tie_word_embeddings=true"},
    {"qwen2.5-3b",
     "model_type=qwen2 vocab_size=151936 hidden_size=2048 intermediate_size=11008 "
     "num_hidden_layers=36 num_attention_heads=16 num_key_value_heads=2 "
     "tie_word_embeddings=true"},
    {"qwen2.5-7b",
     "model_type=qwen2 vocab_size=152064 hidden_size=3584 intermediate_size=18944 "
     "num_hidden_layers=28 num_attention_heads=28 num_key_value_heads=4"},
    {"qwen2.5-14b",
     "model_type=qwen2 vocab_size=152064 hidden_size=5120 "
     "intermediate_size=13824 num_hidden_layers=48 num_attention_heads=40 "
     "num_key_value_heads=8"},
    {"qwen2.5-32b",
     "model_type=qwen2 vocab_size=152064 hidden_size=5120 "
     "intermediate_size=27648 num_hidden_layers=64 num_attention_heads=40 "
     "num_key_value_heads=8"},
    {"qwen2.5-72b",
     "model_type=qwen2 vocab_size=152064 hidden_size=8192 "
     "intermediate_size=29568 num_hidden_layers=80 num_attention_heads=64 "
     "num_key_value_heads=8"},
    // Gemma (GemmaConfig defaults: gemma-7b) and Gemma 2.
    {"gemma-2b",
     "model_type=gemma hidden_size=2048 intermediate_size=16384 num_hidden_layers=18 "
     "num_attention_heads=8 num_key_value_heads=1"},
    {"gemma-7b", "model_type=gemma"},
    {"gemma-2-2b",
     "model_type=gemma2 hidden_size=2304 intermediate_size=9216 "
     "num_hidden_layers=26 num_attention_heads=8 num_key_value_heads=4"},
    {"gemma-2-9b",
     "model_type=gemma2 hidden_size=3584 intermediate_size=14336 "
     "num_hidden_layers=42 num_attention_heads=16 num_key_value_heads=8"},
    {"gemma-2-27b",
     "model_type=gemma2 hidden_size=4608 intermediate_size=36864 "
     "num_hidden_layers=46 num_attention_heads=32 num_key_value_heads=16 "
     "head_dim=128"},
    // Phi (PhiConfig defaults: phi-1.5) and Phi-3 (Phi3Config defaults: Phi-3-mini).
    {"phi-1_5", "model_type=phi"},
    {"phi-1.5", "model_type=phi"},
    {"phi-2", "model_type=phi hidden_size=2560 intermediate_size=10240 num_hidden_layers=32"},
    {"phi-3-mini", "model_type=phi3"},
    {"phi-3.5-mini", "model_type=phi3 max_position_embeddings=131072"},
    {"phi-3-medium",
     "model_type=phi3 hidden_size=5120 intermediate_size=17920 "
     "num_hidden_layers=40 num_attention_heads=40 num_key_value_heads=10"},
    // T5 (T5Config defaults: t5-small) and the gated v1.1 / FLAN-T5 models.
    {"t5-small", "model_type=t5"},
    {"t5-base", "model_type=t5 d_model=768 d_ff=3072 num_layers=12 num_heads=12"},
    {"t5-large", "model_type=t5 d_model=1024 d_ff=4096 num_layers=24 num_heads=16"},
    {"t5-3b", "model_type=t5 d_model=1024 d_kv=128 d_ff=16384 num_layers=24 num_heads=32"},
    {"t5-11b", "model_type=t5 d_model=1024 d_kv=128 d_ff=65536 num_layers=24 num_heads=128"},
    {"flan-t5-small",
     "model_type=t5 feed_forward_proj=gated-gelu tie_word_embeddings=false "
     "d_model=512 d_ff=1024 num_layers=8 num_heads=6"},
    {"flan-t5-base",
     "model_type=t5 feed_forward_proj=gated-gelu tie_word_embeddings=false "
     "d_model=768 d_ff=2048 num_layers=12 num_heads=12"},
    {"flan-t5-large",
     "model_type=t5 feed_forward_proj=gated-gelu tie_word_embeddings=false "
     "d_model=1024 d_ff=2816 num_layers=24 num_heads=16"},
    {"flan-t5-xl",
     "model_type=t5 feed_forward_proj=gated-gelu tie_word_embeddings=false "
     "d_model=2048 d_ff=5120 num_layers=24 num_heads=32"},
    {"flan-t5-xxl",
     "model_type=t5 feed_forward_proj=gated-gelu tie_word_embeddings=false "
     "d_model=4096 d_ff=10240 num_layers=24 num_heads=64"},
    // T0 (T5 v1.1 LM-adapted: gated-GELU, untied output layer).
    {"t0_3b",
     "model_type=t5 feed_forward_proj=gated-gelu tie_word_embeddings=false "
     "d_model=2048 d_ff=5120 num_layers=24 num_heads=32"},
    {"t0pp",
     "model_type=t5 feed_forward_proj=gated-gelu tie_word_embeddings=false "
     "d_model=4096 d_ff=10240 num_layers=24 num_heads=64"},
    // mT5 and mT0 (MT5Config defaults: mt5-small; gated-GELU, untied).
    {"mt5-small", "model_type=mt5"},
    {"mt5-base", "model_type=mt5 d_model=768 d_ff=2048 num_layers=12 num_heads=12"},
    {"mt5-large", "model_type=mt5 d_model=1024 d_ff=2816 num_layers=24 num_heads=16"},
    {"mt5-xl", "model_type=mt5 d_model=2048 d_ff=5120 num_layers=24 num_heads=32"},
    {"mt5-xxl", "model_type=mt5 d_model=4096 d_ff=10240 num_layers=24 num_heads=64"},
    {"mt0-small", "model_type=mt5"},
    {"mt0-base", "model_type=mt5 d_model=768 d_ff=2048 num_layers=12 num_heads=12"},
    {"mt0-large", "model_type=mt5 d_model=1024 d_ff=2816 num_layers=24 num_heads=16"},
    {"mt0-xl", "model_type=mt5 d_model=2048 d_ff=5120 num_layers=24 num_heads=32"},
    {"mt0-xxl", "model_type=mt5 d_model=4096 d_ff=10240 num_layers=24 num_heads=64"},
    // ViT (ViTConfig defaults: vit-base-patch16-224).
    {"vit-base-patch16", "model_type=vit"},
    {"vit-base-patch32", "model_type=vit patch_size=32"},
    {"vit-large-patch16",
     "model_type=vit hidden_size=1024 num_hidden_layers=24 "
     "num_attention_heads=16 intermediate_size=4096"},
    {"vit-large-patch32",
     "model_type=vit hidden_size=1024 num_hidden_layers=24 "
     "num_attention_heads=16 intermediate_size=4096 patch_size=32"},
    {"vit-huge-patch14",
     "model_type=vit hidden_size=1280 num_hidden_layers=32 "
     "num_attention_heads=16 intermediate_size=5120 patch_size=14"},
};

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

// Reads a config's keys the way a transformers config class does: the first alias given wins,
// null/None counts as absent, else the class default.
class ConfigReader {
 public:
  explicit ConfigReader(const ConfigLookup& get) : get_(get) {}

  std::optional<std::string> Text(std::initializer_list<std::string_view> keys) const {
    for (auto k : keys) {
      auto v = get_(k);
      if (!v) continue;
      std::string l = Lower(*v);
      if (l == "null" || l == "none" || l.empty()) continue;
      return v;
    }
    return std::nullopt;
  }
  std::optional<int64_t> MaybeInt(std::initializer_list<std::string_view> keys) const {
    auto t = Text(keys);
    if (!t) return std::nullopt;
    double d = 0;
    auto [end, ec] = std::from_chars(t->data(), t->data() + t->size(), d);
    // Beyond any real model: products of two such sizes stay far inside int64.
    if (ec != std::errc() || d < 0 || d > 1e8) return std::nullopt;
    return static_cast<int64_t>(d);
  }
  int64_t Int(std::initializer_list<std::string_view> keys, int64_t fallback) const {
    return MaybeInt(keys).value_or(fallback);
  }
  bool Bool(std::initializer_list<std::string_view> keys, bool fallback) const {
    auto t = Text(keys);
    if (!t) return fallback;
    std::string l = Lower(*t);
    return l == "true" || l == "1";
  }

 private:
  const ConfigLookup& get_;
};

struct Defaults {
  int64_t vocab, hidden, layers, heads, ffn, positions;
  bool tied;
};

// Llama-like decoders: RMSNorm, rotary positions, gated MLP, no biases unless the family has them.
void ReadGatedDecoder(const ConfigReader& r, const Defaults& d, int64_t default_head_dim,
                      TransformerSpec* s) {
  s->vocab = r.Int({"vocab_size"}, d.vocab);
  s->hidden = r.Int({"hidden_size"}, d.hidden);
  s->layers = r.Int({"num_hidden_layers"}, d.layers);
  s->heads = r.Int({"num_attention_heads"}, d.heads);
  s->kv_heads = r.Int({"num_key_value_heads"}, s->heads);
  s->head_dim = r.Int({"head_dim"}, default_head_dim > 0 ? default_head_dim
                                    : s->heads > 0       ? s->hidden / s->heads
                                                         : 0);
  s->ffn = r.Int({"intermediate_size"}, d.ffn);
  s->max_positions = r.Int({"max_position_embeddings"}, d.positions);
  s->tied_embeddings = r.Bool({"tie_word_embeddings"}, d.tied);
  s->gated_mlp = true;
  s->rms_norm = true;
}

// BERT-like encoders: learned positions, LayerNorm after the embeddings, biases everywhere.
void ReadEncoder(const ConfigReader& r, TransformerSpec* s) {
  s->vocab = r.Int({"vocab_size"}, 30522);
  s->hidden = r.Int({"hidden_size", "dim"}, 768);
  s->layers = r.Int({"num_hidden_layers", "n_layers"}, s->family == "distilbert" ? 6 : 12);
  s->heads = r.Int({"num_attention_heads", "n_heads"}, 12);
  s->ffn = r.Int({"intermediate_size", "hidden_dim"}, 3072);
  s->max_positions = r.Int({"max_position_embeddings"}, 512);
  s->learned_positions = s->max_positions;
  s->tied_embeddings = true;  // the base model: no separate output layer
  s->qkv_bias = s->o_bias = s->mlp_bias = true;
  s->embedding_norm = true;
  s->final_norm = false;
  if (s->family != "distilbert") {
    s->token_types = r.Int({"type_vocab_size"}, 2);
    s->pooler = true;
  }
}

// Falcon: rotary (or ALiBi) positions, LayerNorm, a fused query_key_value projection with
// multi-query (7B) or grouped (new_decoder_architecture: 40B, 180B) keys and values, a 4·h GELU
// MLP, biases only when `bias`; attention and MLP in parallel on one norm (two in the new
// architecture); output layer tied.
void ReadFalcon(const ConfigReader& r, TransformerSpec* s) {
  s->vocab = r.Int({"vocab_size"}, 65024);
  s->hidden = r.Int({"hidden_size"}, 4544);
  s->layers = r.Int({"num_hidden_layers", "n_layer"}, 32);
  s->heads = r.Int({"num_attention_heads", "n_head"}, 71);
  const bool new_arch = r.Bool({"new_decoder_architecture"}, false);
  if (new_arch) {
    s->kv_heads = r.Int({"num_kv_heads"}, s->heads);
  } else {
    s->kv_heads = r.Bool({"multi_query"}, true) ? 1 : s->heads;
  }
  s->ffn = r.Int({"ffn_hidden_size"}, 4 * s->hidden);
  s->max_positions = r.Int({"max_position_embeddings"}, 2048);
  s->tied_embeddings = r.Bool({"tie_word_embeddings"}, true);
  s->fused_qkv = true;
  s->qkv_bias = s->o_bias = s->mlp_bias = r.Bool({"bias"}, false);
  const bool parallel = r.Bool({"parallel_attn"}, true);
  s->norms_per_layer = new_arch   ? static_cast<int>(r.Int({"num_ln_in_parallel_attn"}, 2))
                       : parallel ? 1
                                  : 2;
}

// A family-less config (nanoGPT's GPTConfig, a custom one): a GPT-2-like decoder.
Status ReadGeneric(const ConfigReader& r, TransformerSpec* s) {
  s->layers = r.Int({"n_layer", "num_hidden_layers", "num_layers"}, 0);
  s->hidden = r.Int({"n_embd", "hidden_size", "d_model"}, 0);
  if (s->layers == 0 || s->hidden == 0) {
    return Status::BadInput("the config gives no n_layer/num_hidden_layers and n_embd/hidden_size");
  }
  s->heads = r.Int({"n_head", "num_attention_heads"}, 0);
  s->vocab = r.Int({"vocab_size"}, 0);
  s->ffn = r.Int({"n_inner", "intermediate_size", "d_ff"}, 4 * s->hidden);
  s->max_positions = r.Int({"n_positions", "max_position_embeddings", "block_size"}, 0);
  s->learned_positions = s->max_positions;
  s->tied_embeddings = r.Bool({"tie_word_embeddings"}, true);
  s->fused_qkv = s->qkv_bias = s->o_bias = s->mlp_bias = true;
  return Status::Ok();
}

}  // namespace

StatusOr<TransformerSpec> TransformerFromConfig(const ConfigLookup& get,
                                                std::string_view model_type) {
  ConfigReader r(get);
  TransformerSpec s;
  s.family = Lower(model_type.empty() ? r.Text({"model_type"}).value_or("") : model_type);
  if (s.family == "gptneox") s.family = "gpt_neox";
  const std::string& f = s.family;
  if (f == "llama") {
    ReadGatedDecoder(r, {32000, 4096, 32, 32, 11008, 2048, false}, 0, &s);
    s.qkv_bias = s.o_bias = r.Bool({"attention_bias"}, false);
    s.mlp_bias = r.Bool({"mlp_bias"}, false);
  } else if (f == "mistral") {
    ReadGatedDecoder(r, {32000, 4096, 32, 32, 14336, 131072, false}, 0, &s);
    if (!r.Text({"num_key_value_heads"})) s.kv_heads = 8;  // MistralConfig's default
  } else if (f == "qwen2") {
    ReadGatedDecoder(r, {151936, 4096, 32, 32, 22016, 32768, false}, 0, &s);
    s.qkv_bias = true;  // Qwen2Attention: q, k and v with biases, o without
  } else if (f == "gemma" || f == "gemma2") {
    if (f == "gemma") {
      ReadGatedDecoder(r, {256000, 3072, 28, 16, 24576, 8192, true}, 256, &s);
    } else {
      ReadGatedDecoder(r, {256000, 2304, 26, 8, 9216, 8192, true}, 256, &s);
      s.norms_per_layer = 4;  // pre/post attention and pre/post feed-forward
    }
  } else if (f == "mixtral") {
    ReadGatedDecoder(r, {32000, 4096, 32, 32, 14336, 131072, false}, 0, &s);
    if (!r.Text({"num_key_value_heads"})) s.kv_heads = 8;  // MixtralConfig's default
    s.experts = r.Int({"num_local_experts"}, 8);
    s.experts_per_token = r.Int({"num_experts_per_tok"}, 2);
  } else if (f == "phi3") {
    ReadGatedDecoder(r, {32064, 3072, 32, 32, 8192, 4096, false}, 0, &s);
    s.fused_qkv = s.fused_gate_up = true;
  } else if (f == "phi") {
    ReadGatedDecoder(r, {51200, 2048, 24, 32, 8192, 2048, false}, 0, &s);
    s.gated_mlp = s.rms_norm = false;  // fc1/fc2 with GELU, LayerNorm
    s.norms_per_layer = 1;             // attention and MLP in parallel on one norm
    s.qkv_bias = s.o_bias = s.mlp_bias = s.lm_head_bias = true;
  } else if (f == "gpt2") {
    s.vocab = r.Int({"vocab_size"}, 50257);
    s.hidden = r.Int({"n_embd", "hidden_size"}, 768);
    s.layers = r.Int({"n_layer", "num_hidden_layers"}, 12);
    s.heads = r.Int({"n_head", "num_attention_heads"}, 12);
    s.ffn = r.Int({"n_inner"}, 4 * s.hidden);
    s.max_positions = r.Int({"n_positions", "max_position_embeddings"}, 1024);
    s.learned_positions = s.max_positions;
    s.tied_embeddings = r.Bool({"tie_word_embeddings"}, true);
    s.fused_qkv = s.qkv_bias = s.o_bias = s.mlp_bias = true;
  } else if (f == "gpt_neox") {
    ReadGatedDecoder(r, {50432, 6144, 44, 64, 24576, 2048, false}, 0, &s);
    s.gated_mlp = s.rms_norm = false;
    s.fused_qkv = true;
    s.qkv_bias = s.o_bias = r.Bool({"attention_bias"}, true);
    s.mlp_bias = true;
  } else if (f == "opt") {
    s.vocab = r.Int({"vocab_size"}, 50272);
    s.hidden = r.Int({"hidden_size"}, 768);
    s.layers = r.Int({"num_hidden_layers"}, 12);
    s.heads = r.Int({"num_attention_heads"}, 12);
    s.ffn = r.Int({"ffn_dim"}, 3072);
    s.max_positions = r.Int({"max_position_embeddings"}, 2048);
    s.learned_positions = s.max_positions + 2;  // OPTLearnedPositionalEmbedding's offset
    s.embed_dim = r.Int({"word_embed_proj_dim"}, s.hidden);
    s.tied_embeddings = r.Bool({"tie_word_embeddings"}, true);
    s.qkv_bias = s.o_bias = s.mlp_bias = r.Bool({"enable_bias"}, true);
    s.final_norm = r.Bool({"do_layer_norm_before"}, true);
  } else if (f == "bert" || f == "roberta" || f == "distilbert") {
    ReadEncoder(r, &s);
  } else if (f == "falcon") {
    ReadFalcon(r, &s);
  } else if (f == "bloom") {
    s.vocab = r.Int({"vocab_size"}, 250880);
    s.hidden = r.Int({"hidden_size", "n_embed"}, 64);
    s.layers = r.Int({"n_layer", "num_hidden_layers"}, 2);
    s.heads = r.Int({"n_head", "num_attention_heads"}, 8);
    s.ffn = 4 * s.hidden;  // BloomMLP: dense_h_to_4h
    s.tied_embeddings = r.Bool({"tie_word_embeddings"}, true);
    s.fused_qkv = s.qkv_bias = s.o_bias = s.mlp_bias = true;
    s.embedding_norm = true;  // word_embeddings_layernorm; ALiBi: no position table
  } else if (f == "gpt_bigcode") {
    s.vocab = r.Int({"vocab_size"}, 50257);
    s.hidden = r.Int({"n_embd", "hidden_size"}, 768);
    s.layers = r.Int({"n_layer", "num_hidden_layers"}, 12);
    s.heads = r.Int({"n_head", "num_attention_heads"}, 12);
    s.kv_heads = r.Bool({"multi_query"}, true) ? 1 : s.heads;
    s.ffn = r.Int({"n_inner"}, 4 * s.hidden);
    s.max_positions = r.Int({"n_positions", "max_position_embeddings"}, 1024);
    s.learned_positions = s.max_positions;
    s.tied_embeddings = r.Bool({"tie_word_embeddings"}, true);
    s.fused_qkv = s.qkv_bias = s.o_bias = s.mlp_bias = true;
  } else if (f == "t5" || f == "mt5") {
    const bool mt5 = f == "mt5";  // MT5Config: mt5-small, gated-GELU, untied, 250,112 tokens
    s.vocab = r.Int({"vocab_size"}, mt5 ? 250112 : 32128);
    s.hidden = r.Int({"d_model", "hidden_size"}, 512);
    s.layers = r.Int({"num_layers", "num_hidden_layers"}, mt5 ? 8 : 6);
    s.decoder_layers = r.Int({"num_decoder_layers"}, s.layers);
    s.heads = r.Int({"num_heads", "num_attention_heads"}, mt5 ? 6 : 8);
    s.kv_heads = s.heads;
    s.head_dim = r.Int({"d_kv"}, 64);
    s.ffn = r.Int({"d_ff"}, mt5 ? 1024 : 2048);
    s.max_positions = 512;
    s.relative_buckets = r.Int({"relative_attention_num_buckets"}, 32);
    s.gated_mlp =
        r.Text({"feed_forward_proj"}).value_or(mt5 ? "gated-gelu" : "relu").starts_with("gated");
    s.tied_embeddings = r.Bool({"tie_word_embeddings"}, !mt5);
    s.rms_norm = true;
    s.encoder_decoder = true;
  } else if (f == "vit") {
    s.hidden = r.Int({"hidden_size"}, 768);
    s.layers = r.Int({"num_hidden_layers"}, 12);
    s.heads = r.Int({"num_attention_heads"}, 12);
    s.ffn = r.Int({"intermediate_size"}, 3072);
    s.image_size = r.Int({"image_size"}, 224);
    s.patch = r.Int({"patch_size"}, 16);
    s.channels = r.Int({"num_channels"}, 3);
    s.qkv_bias = r.Bool({"qkv_bias"}, true);
    s.o_bias = s.mlp_bias = true;
    s.tied_embeddings = true;  // no output embeddings
    s.pooler = true;           // ViTModel's default add_pooling_layer=True
    s.vit = true;
  } else {
    s.family = "transformer";
    RS_RETURN_IF_ERROR(ReadGeneric(r, &s));
  }
  if (s.layers <= 0 || s.hidden <= 0 || s.heads < 0 || s.ffn < 0 || s.vocab < 0) {
    return Status::BadInput(
        fmt::format("a {} config with layers {} and hidden size {}", s.family, s.layers, s.hidden));
  }
  if (s.kv_heads == 0) s.kv_heads = s.heads;
  if (s.head_dim == 0 && s.heads > 0) s.head_dim = s.hidden / s.heads;
  if (s.embed_dim == 0) s.embed_dim = s.hidden;
  s.parameters = TransformerParametersOf(s);
  return s;
}

std::vector<LinearModule> LinearModulesOf(const TransformerSpec& s) {
  const int64_t h = s.hidden, f = s.ffn, q_out = s.heads * s.head_dim;
  const int64_t kv_out = s.kv_heads * s.head_dim, n = s.layers;
  std::vector<LinearModule> out;
  auto add = [&](std::string_view name, int64_t in, int64_t o, int64_t count, bool bias) {
    out.push_back({std::string(name), in, o, count, bias});
  };
  const std::string& fam = s.family;
  if (s.encoder_decoder) {                                 // T5, mT5
    const int64_t attn = s.layers + 2 * s.decoder_layers;  // self-attention, plus cross in the
    for (auto m : {"q", "k", "v"}) add(m, h, q_out, attn, false);  // decoder
    add("o", q_out, h, attn, false);
    const int64_t ff = s.layers + s.decoder_layers;
    if (s.gated_mlp) {
      add("wi_0", h, f, ff, false);
      add("wi_1", h, f, ff, false);
    } else {
      add("wi", h, f, ff, false);
    }
    add("wo", f, h, ff, false);
    return out;
  }
  if (fam == "gpt2" || fam == "gpt_bigcode" || fam == "transformer") {
    add("c_attn", h, q_out + 2 * kv_out, n, s.qkv_bias);
    add("c_proj", q_out, h, n, s.o_bias);
    add("c_fc", h, f, n, s.mlp_bias);
    add("c_proj", f, h, n, s.mlp_bias);
  } else if (fam == "gpt_neox" || fam == "falcon" || fam == "bloom") {
    add("query_key_value", h, q_out + 2 * kv_out, n, s.qkv_bias);
    add("dense", q_out, h, n, s.o_bias);
    add("dense_h_to_4h", h, f, n, s.mlp_bias);
    add("dense_4h_to_h", f, h, n, s.mlp_bias);
  } else if (fam == "bert" || fam == "roberta" || fam == "vit") {
    for (auto m : {"query", "key", "value"}) add(m, h, h, n, s.qkv_bias);
    add("dense", h, h, n, s.o_bias);
    add("dense", h, f, n, s.mlp_bias);
    add("dense", f, h, n, s.mlp_bias);
  } else if (fam == "distilbert") {
    for (auto m : {"q_lin", "k_lin", "v_lin", "out_lin"}) add(m, h, h, n, true);
    add("lin1", h, f, n, true);
    add("lin2", f, h, n, true);
  } else if (fam == "opt") {
    for (auto m : {"q_proj", "k_proj", "v_proj", "out_proj"}) add(m, h, h, n, s.qkv_bias);
    add("fc1", h, f, n, s.mlp_bias);
    add("fc2", f, h, n, s.mlp_bias);
  } else if (fam == "phi") {
    add("q_proj", h, q_out, n, true);
    add("k_proj", h, kv_out, n, true);
    add("v_proj", h, kv_out, n, true);
    add("dense", q_out, h, n, true);
    add("fc1", h, f, n, true);
    add("fc2", f, h, n, true);
  } else if (s.fused_qkv) {  // Phi-3
    add("qkv_proj", h, q_out + 2 * kv_out, n, s.qkv_bias);
    add("o_proj", q_out, h, n, s.o_bias);
    add("gate_up_proj", h, 2 * f, n, s.mlp_bias);
    add("down_proj", f, h, n, s.mlp_bias);
  } else if (s.experts > 0) {  // Mixtral: a router and `experts` gated MLPs per layer
    add("q_proj", h, q_out, n, false);
    add("k_proj", h, kv_out, n, false);
    add("v_proj", h, kv_out, n, false);
    add("o_proj", q_out, h, n, false);
    add("gate", h, s.experts, n, false);
    add("w1", h, f, n * s.experts, false);
    add("w3", h, f, n * s.experts, false);
    add("w2", f, h, n * s.experts, false);
  } else {  // Llama, Mistral, Qwen2, Gemma
    add("q_proj", h, q_out, n, s.qkv_bias);
    add("k_proj", h, kv_out, n, s.qkv_bias);
    add("v_proj", h, kv_out, n, s.qkv_bias);
    add("o_proj", q_out, h, n, s.o_bias);
    add("gate_proj", h, f, n, s.mlp_bias);
    add("up_proj", h, f, n, s.mlp_bias);
    add("down_proj", f, h, n, s.mlp_bias);
  }
  return out;
}

double TransformerParametersOf(const TransformerSpec& s) {
  auto h = static_cast<double>(s.hidden);
  double total = 0;
  for (const auto& m : LinearModulesOf(s)) {
    total +=
        static_cast<double>(m.count) * (static_cast<double>(m.in) * static_cast<double>(m.out) +
                                        (m.bias ? static_cast<double>(m.out) : 0));
  }
  const double norm = s.rms_norm ? h : 2 * h;
  if (s.encoder_decoder) {
    // Two norms per encoder layer, three per decoder layer, a final norm per stack, and the
    // relative position bias of each stack's first layer.
    total += static_cast<double>(2 * s.layers + 3 * s.decoder_layers + 2) * norm;
    total += 2.0 * static_cast<double>(s.relative_buckets * s.heads);
  } else {
    total += static_cast<double>(s.layers * s.norms_per_layer) * norm;
    if (s.final_norm) total += norm;
  }
  if (s.vit) {
    double side = s.patch > 0
                      ? std::floor(static_cast<double>(s.image_size) / static_cast<double>(s.patch))
                      : 0;
    // The patch projection (a convolution with bias), the [CLS] token and the positions.
    auto p = static_cast<double>(s.patch);
    total += static_cast<double>(s.channels) * p * p * h + h + h + (side * side + 1) * h;
  }
  const auto e = static_cast<double>(s.embed_dim > 0 ? s.embed_dim : s.hidden);
  const auto v = static_cast<double>(s.vocab);
  total += v * e + static_cast<double>(s.learned_positions + s.token_types) * h;
  if (s.embedding_norm) total += 2 * h;
  if (e != h) total += 2 * e * h;  // OPT's project_in and project_out, without biases
  if (s.pooler) total += h * h + h;
  if (!s.tied_embeddings) total += v * e;
  if (s.lm_head_bias) total += v;
  return total;
}

std::vector<std::string> DefaultLoraTargets(std::string_view family) {
  static const std::map<std::string, std::vector<std::string>, std::less<>> kTargets = {
      {"llama", {"q_proj", "v_proj"}},
      {"mistral", {"q_proj", "v_proj"}},
      {"mixtral", {"q_proj", "v_proj"}},
      {"qwen2", {"q_proj", "v_proj"}},
      {"gemma", {"q_proj", "v_proj"}},
      {"gemma2", {"q_proj", "v_proj"}},
      {"opt", {"q_proj", "v_proj"}},
      {"phi", {"q_proj", "v_proj", "fc1", "fc2"}},
      {"phi3", {"qkv_proj"}},
      {"gpt2", {"c_attn"}},
      {"gpt_neox", {"query_key_value"}},
      {"bert", {"query", "value"}},
      {"roberta", {"query", "value"}},
      {"vit", {"query", "value"}},
      {"distilbert", {"q_lin", "v_lin"}},
      {"t5", {"q", "v"}},
      {"mt5", {"q", "v"}},
      {"falcon", {"query_key_value"}},
      {"bloom", {"query_key_value"}},
      {"gpt_bigcode", {"c_attn"}},
  };
  auto it = kTargets.find(family);
  return it == kTargets.end() ? std::vector<std::string>{} : it->second;
}

std::optional<TransformerSpec> FindTransformer(std::string_view model_id) {
  std::string id = Lower(model_id);
  if (auto slash = id.rfind('/'); slash != std::string::npos) id = id.substr(slash + 1);
  // "Meta-Llama-3-8B" and "Llama-2-7b-hf" both name llama-…: drop the vendor prefix.
  if (id.starts_with("meta-")) id = id.substr(5);
  const HubConfig* best = nullptr;
  for (const auto& row : kHub) {
    if (id.find(row.key) == std::string::npos) continue;
    if (best == nullptr || row.key.size() > best->key.size()) best = &row;
  }
  if (best == nullptr) return std::nullopt;
  std::map<std::string, std::string, std::less<>> values;
  std::string_view rest = best->config;
  while (!rest.empty()) {
    size_t space = rest.find(' ');
    std::string_view pair = rest.substr(0, space);
    rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
    size_t eq = pair.find('=');
    if (eq != std::string_view::npos) {
      values[std::string(pair.substr(0, eq))] = std::string(pair.substr(eq + 1));
    }
  }
  auto spec = TransformerFromConfig([&](std::string_view k) -> std::optional<std::string> {
    auto it = values.find(k);
    if (it == values.end()) return std::nullopt;
    return it->second;
  });
  if (!spec.ok()) return std::nullopt;  // a table row is well-formed: tested for every one
  spec->key = std::string(best->key);
  return *spec;
}

std::optional<VisionSpec> FindVisionModel(std::string_view name) {
  for (const auto& spec : kVision) {
    if (spec.name == name) return spec;
  }
  return std::nullopt;
}

double ResNetSavedPerPixel(int64_t depth, int64_t inner_width, const DetectorTraining& how) {
  // Blocks per stage; depths 18 and 34 use basic blocks (two 3×3 convolutions, c wide),
  // the others bottlenecks (1×1 to w, 3×3, 1×1 to 4·64·2^stage).
  std::array<int, 4> blocks{};
  switch (depth) {
    case 18:
      blocks = {2, 2, 2, 2};
      break;
    case 34:
    case 50:
      blocks = {3, 4, 6, 3};
      break;
    case 101:
      blocks = {3, 4, 23, 3};
      break;
    case 152:
      blocks = {3, 8, 36, 3};
      break;
    default:
      return 0;
  }
  const bool basic = depth < 50;
  const double bn = how.frozen_bn ? 0 : 1;  // a trainable (or eval-mode) BN saves its input
  // Elements per input pixel of a map of c channels at a stride.
  auto map = [](double c, double stride) { return c / (stride * stride); };
  double saved = 0;
  if (how.frozen_stages < 0) {
    // Stem: the convolution's input (the image), BN's input, ReLU's output (max-pooled in
    // place: its int64 indices are two fp32 maps' worth) and the pooled map.
    saved += map(3, 1) + (1 + bn) * map(64, 2) + 2 * map(64, 4) + map(64, 4);
  }
  double in_c = 64;
  for (int s = 0; s < 4; ++s) {
    const double stride_out = 4.0 * (1 << s), stride_in = s == 0 ? 4 : stride_out / 2;
    const double out_c = basic ? 64.0 * (1 << s) : 256.0 * (1 << s);
    const double w = basic ? out_c : static_cast<double>(inner_width) * (1 << s);
    const bool trainable = s >= how.frozen_stages;  // frozen_stages counts the stem as 0
    if (trainable) {
      // The first trainable block's input is saved by its convolutions; a trainable stage's
      // blocks otherwise reuse the previous block's saved output.
      if (s == how.frozen_stages) saved += map(in_c, stride_in);
      for (int b = 0; b < blocks[s]; ++b) {
        const double a_in = b == 0 ? stride_in : stride_out;
        const bool down = b == 0 && (s > 0 || in_c != out_c);
        if (basic) {
          // conv1 (stride) → BN → ReLU → conv2 → BN → + identity → ReLU.
          saved += map(w, stride_out) * (1 + bn) + map(out_c, stride_out) * (1 + bn);
        } else {
          // conv1 → BN → ReLU (its output conv2's saved input) → conv2 (stride) → BN → ReLU →
          // conv3 → BN → + identity → ReLU (the block's output, saved by the next block).
          saved += map(w, a_in) * (1 + bn) + map(w, stride_out) * (1 + bn) +
                   map(out_c, stride_out) * (1 + bn);
        }
        if (down) saved += bn * map(out_c, stride_out);  // the downsample's BN input
      }
    }
    in_c = out_c;
  }
  return saved;
}

StatusOr<DetectorSpec> DetectorOf(std::string_view detector, int64_t depth, int64_t groups,
                                  int64_t width_per_group, int64_t num_classes,
                                  const DetectorTraining& how) {
  const bool frozen_bn = how.frozen_bn;
  // The backbone without its classifier (fc 2048·1000 + 1000, or 512·1000 + 1000): torchvision's
  // counts, and the parameters of its BatchNorms (2 per channel) for frozen_bn.
  struct Backbone {
    int64_t depth, groups, width;
    double params, bn_params;  // bn_params: resnet50's only (torchvision's frozen BN)
  };
  static constexpr Backbone kBackbones[] = {
      {18, 1, 64, 11689512.0 - 513000, 0},      {34, 1, 64, 21797672.0 - 513000, 0},
      {50, 1, 64, 25557032.0 - 2049000, 53120}, {101, 1, 64, 44549160.0 - 2049000, 0},
      {152, 1, 64, 60192808.0 - 2049000, 0},    {50, 32, 4, 25028904.0 - 2049000, 0},
      {101, 32, 4, 44177704.0 - 2049000, 0},    {101, 64, 4, 83455272.0 - 2049000, 0},
      {101, 32, 8, 88791336.0 - 2049000, 0},
  };
  const Backbone* bb = nullptr;
  const int64_t g = groups > 1 ? groups : 1;
  for (const auto& b : kBackbones) {
    if (b.depth == depth && b.groups == g && (g == 1 || b.width == width_per_group)) bb = &b;
  }
  if (bb == nullptr) {
    return Status::BadInput(
        fmt::format("a ResNet{} backbone of depth {} and {} groups", g > 1 ? "eXt" : "", depth, g));
  }
  const bool retina = detector == "RetinaNet";
  const bool mask = detector == "MaskRCNN";
  if (!retina && !mask && detector != "FasterRCNN") {
    return Status::BadInput(fmt::format("detector {} is not modelled", detector));
  }
  auto conv = [](double in, double out, double k) { return in * out * k * k + out; };
  const double c = 256;                     // FPN width
  const double wide = depth >= 50 ? 4 : 1;  // bottleneck blocks widen the stage outputs by 4
  double params = bb->params - (frozen_bn ? bb->bn_params : 0);
  const double c5 = 512 * wide;
  // FPN: a 1×1 lateral and a 3×3 output convolution per level; RetinaNet on C3–C5 with P6 and
  // P7 convolutions, the two-stage detectors on C2–C5 (P6 by max-pooling).
  for (double level :
       retina ? std::vector<double>{128, 256, 512} : std::vector<double>{64, 128, 256, 512}) {
    params += conv(level * wide, c, 1) + conv(c, c, 3);
  }
  const double classes = static_cast<double>(num_classes);
  // What the neck and heads save, in elements per input pixel: a pyramid of 256-channel maps
  // from stride 4 (P2–P6) holds 1.33 × 256/16 per pixel, from stride 8 (P3–P7) a quarter of it.
  // Counted as torchvision's models save them (bench/published/saved_activations.py).
  double neck_heads = 0;
  if (retina) {
    const double pyramid = 1.33 * c / 64;
    // torchvision takes P6 from P5, MMDetection ('on_input') from C5.
    params += conv(how.torchvision_heads ? c : c5, c, 3) + conv(c, c, 3);
    // Four 3×3 convolutions in each of the class and box branches, 9 anchors per position.
    params += 8 * conv(c, c, 3) + conv(c, 9 * classes, 3) + conv(c, 9 * 4, 3);
    // FPN: the output convolutions' inputs; each branch: the pyramid and four ReLU outputs.
    neck_heads += pyramid + 9 * pyramid;
    // The class logits (9·classes channels): the sigmoid focal loss written in Python
    // (torchvision's) saves eight tensors of their size (logits, targets, p, 1 − p, 1 − t,
    // the cross-entropy, the modulating factor and alpha_t); mmcv's CUDA kernel only its input.
    const double logits = pyramid * 9 * classes / c;
    neck_heads += logits * (how.fused_focal_loss ? 1 : 8);
  } else {
    const double pyramid = 1.33 * c / 16;
    // RPN: a 3×3 convolution and 1×1 objectness and box outputs for 3 anchors.
    params += conv(c, c, 3) + conv(c, 3, 1) + conv(c, 12, 1);
    // FPN's top-down sums, the RPN convolution's input (the FPN output) and its ReLU output.
    neck_heads += 3 * pyramid;
    // Box head: two shared fully connected layers on 7×7 RoIs, class scores (MMDetection adds
    // the background to num_classes; torchvision's 91 include it) and a box per class.
    const double scores = how.torchvision_heads ? classes : classes + 1;
    params += c * 49 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * scores + scores;
    params += 1024 * 4 * classes + 4 * classes;
    if (mask) {
      // Four 3×3 convolutions, a 2×2 transposed convolution and 1×1 per-class mask logits.
      params += 4 * conv(c, c, 3) + conv(c, c, 2) + conv(c, classes, 1);
    }
  }
  const double inner = g > 1 ? static_cast<double>(g * width_per_group) : 64;
  const double backbone = ResNetSavedPerPixel(depth, static_cast<int64_t>(inner), how);
  DetectorSpec d;
  d.name = fmt::format("{} {}{} FPN", detector, g > 1 ? "x" : "r", depth);
  d.parameters = params;
  d.activation_bytes_per_image = (backbone + neck_heads) * 224 * 224 * 4;  // fp32
  if (!retina) {
    // The box head on the 512 boxes sampled per image (detectron2's BATCH_SIZE_PER_IMAGE,
    // MMDetection's sampler num, torchvision's box_batch_size_per_image): the pooled 7×7×256
    // features and the outputs of its two 1024-wide layers.
    d.roi_bytes_per_image = 512 * (c * 49 + 2 * 1024) * 4;
    if (mask) {
      // The mask head on the positive quarter (128): the inputs of its four 3×3 convolutions
      // and the last ReLU's output at 14×14, the transposed convolution's output at 28×28.
      d.roi_bytes_per_image += 128 * (5 * c * 14 * 14 + c * 28 * 28) * 4;
    }
  }
  return d;
}

std::optional<DetectorSpec> FindTorchvisionDetector(std::string_view name,
                                                    const DetectorTraining& how) {
  std::string_view type = name == "fasterrcnn_resnet50_fpn"  ? "FasterRCNN"
                          : name == "retinanet_resnet50_fpn" ? "RetinaNet"
                          : name == "maskrcnn_resnet50_fpn"  ? "MaskRCNN"
                                                             : "";
  if (type.empty()) return std::nullopt;
  auto d = DetectorOf(type, 50, 1, 64, 91, how);
  if (!d.ok()) return std::nullopt;
  d->name = std::string(name);
  return *d;
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

std::vector<std::string_view> HubKeys() {
  std::vector<std::string_view> keys;
  for (const auto& row : kHub) keys.push_back(row.key);
  return keys;
}

}  // namespace rightsize::code
