// Model sizing from configs against parameter counts worked out module by module from each
// family's modelling code in transformers (the arithmetic for a few is in the comments; every
// count was also derived by a separate script that builds the modules one by one). They are
// architecture facts, the totals model.num_parameters() gives, not measurements.
#include "code/model_zoo.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

namespace rightsize::code {
namespace {

double Params(std::string_view id) {
  auto spec = FindTransformer(id);
  EXPECT_TRUE(spec.has_value()) << id;
  return spec ? spec->parameters : 0;
}

ConfigLookup Lookup(const std::map<std::string, std::string, std::less<>>& values) {
  return [values](std::string_view k) -> std::optional<std::string> {
    auto it = values.find(k);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

TEST(ModelZooTest, Gpt2FamilyTiesItsOutputLayerAndLearnsPositions) {
  // gpt2: wte 50257·768 + wpe 1024·768 + 12 × (ln_1 2h + c_attn h·3h+3h + c_proj h²+h + ln_2 2h
  //   + c_fc h·4h+4h + c_proj 4h·h+h = 7,087,872) + ln_f 1,536 = 124,439,808; lm_head tied.
  EXPECT_DOUBLE_EQ(Params("gpt2"), 124439808.0);
  EXPECT_DOUBLE_EQ(Params("openai-community/gpt2-medium"), 354823168.0);
  EXPECT_DOUBLE_EQ(Params("gpt2-large"), 774030080.0);
  EXPECT_DOUBLE_EQ(Params("gpt2-xl"), 1557611200.0);
  EXPECT_DOUBLE_EQ(Params("distilgpt2"), 81912576.0);
}

TEST(ModelZooTest, LlamaFamilyGroupedQueryAttentionHeadDimAndTiedEmbeddings) {
  // Llama-2-7b: 32000·4096 × 2 (untied) + 32 × (4·4096² attention + 3·4096·11008 gated MLP
  //   + 2·4096 RMSNorms) + 4096 = 6,738,415,616.
  EXPECT_DOUBLE_EQ(Params("meta-llama/Llama-2-7b-hf"), 6738415616.0);
  EXPECT_DOUBLE_EQ(Params("meta-llama/Llama-2-13b-chat-hf"), 13015864320.0);
  EXPECT_DOUBLE_EQ(Params("meta-llama/Llama-2-70b-hf"), 68976648192.0);  // 8 KV heads
  EXPECT_DOUBLE_EQ(Params("meta-llama/Meta-Llama-3-8B"), 8030261248.0);
  EXPECT_DOUBLE_EQ(Params("meta-llama/Llama-3.1-70B-Instruct"), 70553706496.0);
  // Llama-3.2-3B: k and v project to 8·128 = 1024, q to 24·128 = 3072; tied embeddings:
  //   128256·3072 + 28 × (3072·3072·2 + 3072·1024·2 + 3·3072·8192 + 2·3072) + 3072
  //   = 394,002,432 + 28 × 100,669,440 + 3,072 = 3,212,749,824.
  EXPECT_DOUBLE_EQ(Params("meta-llama/Llama-3.2-3B-Instruct"), 3212749824.0);
  EXPECT_DOUBLE_EQ(Params("meta-llama/Llama-3.2-1B"), 1235814400.0);
  EXPECT_DOUBLE_EQ(Params("TinyLlama/TinyLlama-1.1B-Chat-v1.0"), 1100048384.0);
  EXPECT_DOUBLE_EQ(Params("mistralai/Mistral-7B-v0.1"), 7241732096.0);
  EXPECT_DOUBLE_EQ(Params("mistralai/Mistral-7B-Instruct-v0.3"), 7248023552.0);
  auto spec = FindTransformer("meta-llama/Llama-3.2-3B");
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->kv_heads, 8);
  EXPECT_EQ(spec->head_dim, 128);
}

TEST(ModelZooTest, QwenGemmaPhiFamilies) {
  // Qwen2: q, k and v carry biases, o does not; the small ones tie their embeddings.
  EXPECT_DOUBLE_EQ(Params("Qwen/Qwen2-0.5B"), 494032768.0);
  EXPECT_DOUBLE_EQ(Params("Qwen/Qwen2.5-3B-Instruct"), 3085938688.0);
  EXPECT_DOUBLE_EQ(Params("Qwen/Qwen2.5-7B"), 7615616512.0);
  EXPECT_DOUBLE_EQ(Params("Qwen/Qwen2.5-14B"), 14770033664.0);
  // Gemma: head_dim 256 (not hidden / heads), multi-query attention in gemma-2b, tied;
  // Gemma 2: four norms per layer.
  EXPECT_DOUBLE_EQ(Params("google/gemma-2b"), 2506172416.0);
  EXPECT_DOUBLE_EQ(Params("google/gemma-7b"), 8537680896.0);
  EXPECT_DOUBLE_EQ(Params("google/gemma-2-2b-it"), 2614341888.0);
  EXPECT_DOUBLE_EQ(Params("google/gemma-2-9b"), 9241705984.0);
  EXPECT_DOUBLE_EQ(Params("google/gemma-2-27b"), 27227128320.0);
  // Phi-2: biases everywhere, one LayerNorm per layer, an output layer with a bias.
  EXPECT_DOUBLE_EQ(Params("microsoft/phi-2"), 2779683840.0);
  EXPECT_DOUBLE_EQ(Params("microsoft/phi-1_5"), 1418270720.0);
  // Phi-3: fused qkv_proj and gate_up_proj, the same count as separate matrices.
  EXPECT_DOUBLE_EQ(Params("microsoft/Phi-3-mini-4k-instruct"), 3821079552.0);
  EXPECT_DOUBLE_EQ(Params("microsoft/Phi-3-medium-4k-instruct"), 13960238080.0);
}

TEST(ModelZooTest, EncodersOptPythiaT5AndVit) {
  // bert-base-uncased with its pooler: embeddings 23,837,184 (word, position, 2 token types,
  // LayerNorm) + 12 × 7,087,872 + pooler 590,592 = 109,482,240.
  EXPECT_DOUBLE_EQ(Params("bert-base-uncased"), 109482240.0);
  EXPECT_DOUBLE_EQ(Params("bert-large-uncased"), 335141888.0);
  EXPECT_DOUBLE_EQ(Params("FacebookAI/roberta-base"), 124645632.0);
  EXPECT_DOUBLE_EQ(Params("roberta-large"), 355359744.0);
  EXPECT_DOUBLE_EQ(Params("distilbert-base-uncased"), 66362880.0);
  // OPT: positions offset by 2; opt-350m projects 512-wide embeddings in and out and has no
  // final LayerNorm (do_layer_norm_before=False).
  EXPECT_DOUBLE_EQ(Params("facebook/opt-125m"), 125239296.0);
  EXPECT_DOUBLE_EQ(Params("facebook/opt-350m"), 331196416.0);
  EXPECT_DOUBLE_EQ(Params("facebook/opt-1.3b"), 1315758080.0);
  EXPECT_DOUBLE_EQ(Params("facebook/opt-6.7b"), 6658473984.0);
  EXPECT_DOUBLE_EQ(Params("EleutherAI/pythia-160m"), 162322944.0);
  EXPECT_DOUBLE_EQ(Params("EleutherAI/pythia-1b"), 1011781632.0);
  // T5: shared embeddings, relative position buckets in each stack's first layer, decoder
  // cross-attention; FLAN-T5 gates its feed-forward and unties the output layer.
  EXPECT_DOUBLE_EQ(Params("t5-small"), 60506624.0);
  EXPECT_DOUBLE_EQ(Params("google-t5/t5-base"), 222903552.0);
  EXPECT_DOUBLE_EQ(Params("google/flan-t5-base"), 247577856.0);
  // ViTModel with its pooler: patch projection 3·16²·768 + 768, [CLS], 197 positions.
  EXPECT_DOUBLE_EQ(Params("google/vit-base-patch16-224"), 86389248.0);
}

TEST(ModelZooTest, FalconBloomGptBigCodeAndStableLmFamilies) {
  // falcon-7b: multi-query (q 71·64 = 4544, one k and one v head of 64), no biases, attention and
  //   MLP in parallel on one LayerNorm, tied output: 65024·4544 + 32 × (4544·(4544 + 128)
  //   + 4544² + 8·4544² + 2·4544) + 2·4544 = 6,921,720,704.
  EXPECT_DOUBLE_EQ(Params("tiiuae/falcon-7b"), 6921720704.0);
  // falcon-40b (new decoder architecture): 8 KV heads, two LayerNorms per layer.
  //   65024·8192 + 60 × (8192·144·64 + 8192² + 8·8192² + 4·8192) + 2·8192 = 41,303,293,952.
  EXPECT_DOUBLE_EQ(Params("tiiuae/falcon-40b"), 41303293952.0);
  // bloomz-7b1: ALiBi (no position table), a LayerNorm on the word embeddings, biases
  //   everywhere, tied: 250880·4096 + 2·4096 + 30 × (3·4096²+3·4096 + 4096²+4096 + 4·4096²+4·4096
  //   + 4·4096²+4096 + 4·4096) + 2·4096 = 7,069,016,064.
  EXPECT_DOUBLE_EQ(Params("bigscience/bloomz-7b1"), 7069016064.0);
  // octocoder (GPTBigCode, StarCoder's shape): multi-query c_attn h → h + 2·128, learned
  //   positions 8192·6144: 15,517,456,384.
  EXPECT_DOUBLE_EQ(Params("bigcode/octocoder"), 15517456384.0);
  EXPECT_DOUBLE_EQ(Params("bigcode/starcoderbase"), 15517456384.0);
  // stablelm-base-alpha-3b (GPT-NeoX, untied): 2·50688·4096 + 16 × (4·4096²+4·4096
  //   + 2·4096·16384+16384+4096 + 4·4096) + 2·4096 = 3,637,321,728.
  EXPECT_DOUBLE_EQ(Params("stabilityai/stablelm-base-alpha-3b"), 3637321728.0);
  auto falcon = FindTransformer("tiiuae/falcon-7b");
  ASSERT_TRUE(falcon.has_value());
  EXPECT_EQ(falcon->kv_heads, 1);
  EXPECT_EQ(DefaultLoraTargets("falcon"), (std::vector<std::string>{"query_key_value"}));
  EXPECT_EQ(DefaultLoraTargets("gpt_bigcode"), (std::vector<std::string>{"c_attn"}));
}

TEST(ModelZooTest, T0AndMt5AreGatedUntiedEncoderDecoders) {
  // T0_3B (T5 v1.1 LM-adapted): 2 × 32128·2048 + 24 encoder layers × (4·2048·2048 + 3·2048·5120
  //   + 2·2048) + 24 decoder layers × (8·2048·2048 + 3·2048·5120 + 3·2048) + 2 × (2048 + 32·32)
  //   = 2,849,757,184.
  EXPECT_DOUBLE_EQ(Params("bigscience/T0_3B"), 2849757184.0);
  EXPECT_DOUBLE_EQ(Params("bigscience/mt0-xxl"), 12921057280.0);
  EXPECT_DOUBLE_EQ(Params("google/mt5-xxl"), 12921057280.0);
  // An mT5 config.json read with MT5Config's defaults (gated-GELU, untied, 250,112 tokens).
  auto spec = TransformerFromConfig(Lookup({{"model_type", "mt5"},
                                            {"d_model", "4096"},
                                            {"d_ff", "10240"},
                                            {"num_layers", "24"},
                                            {"num_heads", "64"}}));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(spec->encoder_decoder);
  EXPECT_TRUE(spec->gated_mlp);
  EXPECT_DOUBLE_EQ(spec->parameters, 12921057280.0);
  bool has_q = false;
  for (const auto& m : LinearModulesOf(*spec)) has_q = has_q || m.name == "q";
  EXPECT_TRUE(has_q);  // PEFT's "q", "v" targets exist in an mT5
}

TEST(ModelZooTest, DetectorsCountedFromBackboneFpnAndHeads) {
  // torchvision's counts (FrozenBatchNorm2d: the backbone's BN weights are buffers):
  // fasterrcnn_resnet50_fpn = ResNet-50 without fc and BN 23,454,912 + FPN 3,344,384 + RPN
  //   593,935 + box head 12,846,080 + 1,049,600 + 1024·91+91 + 1024·364+364 = 41,755,286.
  ASSERT_TRUE(FindTorchvisionDetector("fasterrcnn_resnet50_fpn").has_value());
  EXPECT_DOUBLE_EQ(FindTorchvisionDetector("fasterrcnn_resnet50_fpn")->parameters, 41755286.0);
  EXPECT_DOUBLE_EQ(FindTorchvisionDetector("maskrcnn_resnet50_fpn")->parameters, 44401393.0);
  EXPECT_DOUBLE_EQ(FindTorchvisionDetector("retinanet_resnet50_fpn")->parameters, 34014999.0);
  EXPECT_FALSE(FindTorchvisionDetector("ssd300_vgg16").has_value());
  // MMDetection trains the BNs and has 80 COCO classes (+ background in the box scores).
  const DetectorTraining mmdet{.frozen_bn = false, .frozen_stages = 1, .fused_focal_loss = true};
  auto r50 = DetectorOf("FasterRCNN", 50, 1, 64, 80, mmdet);
  auto r101 = DetectorOf("FasterRCNN", 101, 1, 64, 80, mmdet);
  ASSERT_TRUE(r50.ok() && r101.ok());
  EXPECT_DOUBLE_EQ(r50->parameters, 41755286.0 + 53120 - 1024 * 10 - 10 - (1024 * 44 + 44));
  EXPECT_DOUBLE_EQ(r101->parameters - r50->parameters, 44549160.0 - 25557032.0);
  EXPECT_GT(r101->activation_bytes_per_image, r50->activation_bytes_per_image);
  auto retina = DetectorOf("RetinaNet", 50, 1, 64, 80, mmdet);
  ASSERT_TRUE(retina.ok());
  EXPECT_GT(retina->activation_bytes_per_image, r50->activation_bytes_per_image);  // dense head
  EXPECT_TRUE(DetectorOf("RetinaNet", 101, 64, 4, 80, mmdet).ok());                // ResNeXt
  EXPECT_FALSE(DetectorOf("FasterRCNN", 77, 1, 64, 80, mmdet).ok());
  EXPECT_FALSE(DetectorOf("YOLOX", 50, 1, 64, 80, mmdet).ok());
}

// What torchvision 0.14's detectors saved for backward in one training step on two 800×1333
// images, measured on this machine's CPU by bench/published/saved_activations.py (every saved
// storage once, parameters and buffers left out), in GiB: the ResNet body, and the FPN with the
// RPN (two-stage) or the RetinaNet head.
TEST(ModelZooTest, DetectorActivationsAreWhatAutogradSaves) {
  const double pixels = 800.0 * 1333 * 2;  // two images
  auto gib = [&](double per_pixel) { return per_pixel * pixels * 4 / (1 << 30); };
  const DetectorTraining pretrained{.frozen_bn = true, .frozen_stages = 1};
  const DetectorTraining bn_trainable{.frozen_bn = false, .frozen_stages = 1};
  const DetectorTraining scratch{.frozen_bn = false, .frozen_stages = -1};
  struct Measured {
    int64_t depth;
    DetectorTraining how;
    double body_gib;
  };
  for (const auto& m : {Measured{50, pretrained, 0.957}, Measured{50, bn_trainable, 1.899},
                        Measured{50, scratch, 3.429}, Measured{101, pretrained, 1.775},
                        Measured{101, bn_trainable, 3.533}, Measured{101, scratch, 5.063}}) {
    SCOPED_TRACE(fmt::format("resnet{} frozen_bn={} frozen_stages={}", m.depth, m.how.frozen_bn,
                             m.how.frozen_stages));
    EXPECT_NEAR(gib(ResNetSavedPerPixel(m.depth, 64, m.how)), m.body_gib, 0.04 * m.body_gib);
  }
  // Frozen stages save nothing: the whole body frozen saves nothing at all.
  EXPECT_EQ(ResNetSavedPerPixel(50, 64, {.frozen_bn = true, .frozen_stages = 4}), 0);
  // The FPN and RPN (0.173 + 0.340 GiB), the RetinaNet FPN and head (0.045 + 1.475 GiB, most of
  // it the Python focal loss's eight tensors of the logits' size).
  auto faster = FindTorchvisionDetector("fasterrcnn_resnet50_fpn");
  auto retina = FindTorchvisionDetector("retinanet_resnet50_fpn");
  ASSERT_TRUE(faster && retina);
  const double body = ResNetSavedPerPixel(50, 64, pretrained);
  auto heads = [&](const DetectorSpec& d) {
    return gib(d.activation_bytes_per_image / (224.0 * 224 * 4) - body);
  };
  EXPECT_NEAR(heads(*faster), 0.173 + 0.340, 0.04 * 0.513);
  EXPECT_NEAR(heads(*retina), 0.045 + 1.475, 0.04 * 1.52);
}

TEST(ModelZooTest, MixtralHoldsEveryExpert) {
  // Mixtral-8x7B: embeddings and lm_head 2·32000·4096 + 32 × (attention with 8 KV heads
  //   41,943,040 + router 4096·8 + 8 experts × 3·4096·14336 + 2·4096) + 4096 = 46,702,792,704.
  EXPECT_DOUBLE_EQ(Params("mistralai/Mixtral-8x7B-Instruct-v0.1"), 46702792704.0);
  EXPECT_DOUBLE_EQ(Params("mistralai/Mixtral-8x22B-v0.1"), 140630071296.0);
  auto spec = FindTransformer("Mixtral-8x7B");
  ASSERT_TRUE(spec.has_value());
  double experts = 0;
  for (const auto& m : LinearModulesOf(*spec)) {
    if (m.name == "w1" || m.name == "w2" || m.name == "w3") {
      experts += static_cast<double>(m.count * m.in * m.out);
    }
  }
  EXPECT_DOUBLE_EQ(experts, 32.0 * 8 * 3 * 4096 * 14336);
}

TEST(ModelZooTest, EveryHubRowIsAWellFormedConfig) {
  for (auto key : HubKeys()) {
    auto spec = FindTransformer(key);
    ASSERT_TRUE(spec.has_value()) << key;
    EXPECT_EQ(spec->key, key);
    EXPECT_GT(spec->parameters, 1e7) << key;
    EXPECT_GT(spec->heads, 0) << key;
    EXPECT_GT(spec->head_dim, 0) << key;  // T5 sets d_kv: flan-t5-small has 6 × 64 for 512
  }
  // The longest key wins: a distilled model is not its teacher.
  EXPECT_EQ(FindTransformer("distilbert/distilbert-base-uncased")->key, "distilbert-base");
  EXPECT_EQ(FindTransformer("google/flan-t5-small")->key, "flan-t5-small");
  EXPECT_FALSE(FindTransformer("some-org/unknown-model").has_value());
}

TEST(ModelZooTest, ConfigJsonReadTheWayTransformersReadsIt) {
  // A Llama config with GQA and an explicit head_dim, as in Llama-3.2-3B's config.json.
  auto spec = TransformerFromConfig(Lookup({{"model_type", "llama"},
                                            {"vocab_size", "128256"},
                                            {"hidden_size", "3072"},
                                            {"intermediate_size", "8192"},
                                            {"num_hidden_layers", "28"},
                                            {"num_attention_heads", "24"},
                                            {"num_key_value_heads", "8"},
                                            {"head_dim", "128"},
                                            {"tie_word_embeddings", "true"}}));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_DOUBLE_EQ(spec->parameters, 3212749824.0);
  // num_key_value_heads null means the attention heads (multi-head attention).
  auto mha = TransformerFromConfig(Lookup({{"num_key_value_heads", "null"}}), "llama");
  ASSERT_TRUE(mha.ok());
  EXPECT_EQ(mha->kv_heads, 32);
  EXPECT_DOUBLE_EQ(mha->parameters, 6738415616.0);  // LlamaConfig()'s defaults: Llama-2-7b
  // GPT2Config's aliases and n_inner=None (4·n_embd).
  auto gpt = TransformerFromConfig(
      Lookup({{"n_layer", "24"}, {"n_embd", "1024"}, {"n_head", "16"}, {"n_inner", "null"}}),
      "gpt2");
  ASSERT_TRUE(gpt.ok());
  EXPECT_DOUBLE_EQ(gpt->parameters, 354823168.0);
  // attention_bias adds q, k, v and o biases to a Llama.
  auto biased = TransformerFromConfig(Lookup({{"attention_bias", "true"}}), "llama");
  ASSERT_TRUE(biased.ok());
  EXPECT_DOUBLE_EQ(biased->parameters - mha->parameters, 32.0 * 4 * 4096);
  // An unknown family is a GPT-2-like decoder when it gives its shape, else an error.
  auto custom = TransformerFromConfig(Lookup({{"n_layer", "12"},
                                              {"n_embd", "768"},
                                              {"n_head", "12"},
                                              {"vocab_size", "50257"},
                                              {"block_size", "1024"}}),
                                      "gpt");
  ASSERT_TRUE(custom.ok());
  EXPECT_DOUBLE_EQ(custom->parameters, 124439808.0);
  EXPECT_FALSE(TransformerFromConfig(Lookup({{"model_type", "mystery"}})).ok());
  // Nonsense is an error or a class default, never a crash or an overflow.
  EXPECT_FALSE(TransformerFromConfig(Lookup({{"hidden_size", "-5"}}), "gpt").ok());
  auto huge = TransformerFromConfig(
      Lookup({{"hidden_size", "1e30"}, {"num_attention_heads", "abc"}, {"patch_size", "0"}}),
      "vit");
  ASSERT_TRUE(huge.ok());
  EXPECT_EQ(huge->hidden, 768);
  EXPECT_GT(huge->parameters, 0);
}

TEST(ModelZooTest, LinearModulesAreWhatLoraTargetsAndBitsandbytesQuantises) {
  auto spec = FindTransformer("Llama-3.2-3B");
  ASSERT_TRUE(spec.has_value());
  double linear = 0;
  for (const auto& m : LinearModulesOf(*spec)) {
    linear += static_cast<double>(m.count * m.in * m.out);
  }
  // Everything but the (tied) embeddings and the norms: 3,212,749,824 − 394,002,432 − 28·2·3072
  // − 3072 = 2,818,572,288.
  EXPECT_DOUBLE_EQ(linear, 2818572288.0);
  EXPECT_EQ(DefaultLoraTargets("llama"), (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(DefaultLoraTargets("gpt2"), (std::vector<std::string>{"c_attn"}));
  EXPECT_TRUE(DefaultLoraTargets("mystery").empty());
}

}  // namespace
}  // namespace rightsize::code
