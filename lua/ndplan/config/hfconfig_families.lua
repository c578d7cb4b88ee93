-- What ndplan.hfconfig knows about each Hugging Face model_type: the family's implicit facts
-- (traits) and the fields known not to change the cost of training (the rest is either read
-- by the loader or reported by name).
--
-- Traits: tie = the head's tie by default (tie_word_embeddings absent); attn = how attention
-- kinds are laid out when layer_types is absent; moe = how experts and MoE layers are read;
-- gpt = LayerNorm, biases, 2-matrix MLP; gated = the MLP has gate, up and down matrices
-- (default: yes unless gpt); pattern = the layer stack is spelled by one character per layer
-- (Nemotron-H); o_bias = false: attention_bias biases q, k and v only; no_cost = fields of
-- this family known not to change the cost; defaults = what the family's config class fills
-- in when a published config leaves a field out; norm = "layernorm" without the rest of gpt;
-- qk_norm_field, router_bias_field = the boolean field that switches q/k norms or the
-- router's bias on; heads_width = the Mamba-2 width is heads x head_dim (expand unread);
-- mtp_modules = MiniMax's use_mtp / num_mtp_modules are reported, not priced; hybrid = the
-- stack follows Falcon-H1's or Jamba's rule (hfconfig_hybrid); d_ssm = the Mamba-2 width is
-- mamba_d_ssm; same_width = dense MLPs as wide as an expert (intermediate_size).
local M = {}

local DEEPSEEK = {tie = false, moe = "deepseek"}
local GRANITE_SCALES = {"embedding_multiplier", "logits_scaling", "residual_multiplier",
                        "attention_multiplier"}  -- muP scales: no cost
local MINIMAX = {tie = false, attn = "minimax", moe = "per_expert",
                 no_cost = {"layernorm_full_attention_alpha", "layernorm_full_attention_beta",
                            "layernorm_linear_attention_alpha",
                            "layernorm_linear_attention_beta", "layernorm_mlp_alpha",
                            "layernorm_mlp_beta", "postnorm", "rotary_dim", "block_size",
                            "shared_moe_mode"}}

M.FAMILIES = {
  llama = {tie = false},
  mistral = {tie = false, attn = "mistral"},
  qwen2 = {tie = false, qkv_bias = true, attn = "qwen2"},
  qwen2_moe = {tie = false, qkv_bias = true, attn = "qwen2", moe = "qwen"},
  qwen3 = {tie = false, qk_norm = true, attn = "qwen2"},
  qwen3_moe = {tie = false, qk_norm = true, attn = "qwen2", moe = "qwen"},
  mixtral = {tie = false, attn = "mistral", moe = "per_expert"},
  deepseek_v2 = DEEPSEEK,
  deepseek_v3 = DEEPSEEK,
  kimi_k2 = DEEPSEEK,  -- Kimi-K2 ships DeepSeek-V3's architecture under its own name
  -- DeepSeek-V3.2: V3's stack plus the sparse-attention indexer (index_n_heads,
  -- index_head_dim, index_topk)
  deepseek_v32 = DEEPSEEK,
  -- GLM-4.5: DeepSeek-style experts (always a score-correction bias), q/k norms, and
  -- attention_bias on q, k and v only
  glm4_moe = {tie = false, moe = "deepseek", router_bias = true, qk_norm_field = "use_qk_norm",
              o_bias = false},
  gpt_oss = {tie = false, attn = "alternate", moe = "per_expert", expert_bias = true,
             router_bias = true, sinks = true,
             no_cost = {"initial_context_length", "swiglu_limit"}},  -- YaRN base, a clamp
  -- Gemma 1: GeGLU (gelu_pytorch_tanh on the gate) with three matrices, tied head
  gemma = {tie = true},
  -- Gemma 2: four norms per layer, sliding and global layers alternating from layer 0
  gemma2 = {tie = true, norms_per_layer = 4, attn = "alternate",
            defaults = {head_dim = 256, sliding_window = 4096}},
  gemma3_text = {tie = true, qk_norm = true, norms_per_layer = 4, attn = "gemma3",
                 -- Gemma3TextConfig defaults: its published configs leave these out
                 defaults = {vocab_size = 262208, head_dim = 256, sliding_window = 4096,
                             max_position_embeddings = 131072, sliding_window_pattern = 6}},
  -- Llama 4: experts of width intermediate_size plus one shared expert of that width, dense
  -- layers of width intermediate_size_mlp, MoE every interleave_moe_layer_step-th layer;
  -- layers with RoPE attend within chunks of attention_chunk_size, every 4th is global
  llama4_text = {tie = false, moe = "llama4", attn = "llama4",
                 no_cost = {"use_qk_norm"}},  -- a weightless L2 norm
  qwen3_next = {tie = false, qk_norm = true, attn = "hybrid", moe = "qwen",
                output_gate = true},
  qwen3_5_text = {tie = false, qk_norm = true, attn = "hybrid", output_gate = true},
  qwen3_5_moe_text = {tie = false, qk_norm = true, attn = "hybrid", moe = "qwen",
                      output_gate = true},
  -- Nemotron-H: hybrid_override_pattern, one layer per character: M Mamba-2, * attention,
  -- - MLP (squared ReLU, two matrices), E MoE (Nemotron-3)
  nemotron_h = {tie = false, pattern = true, gated = false, moe = "nemotron_h", heads_width = true,
                no_cost = {"mamba_hidden_act", "mlp_hidden_act", "residual_in_fp32",
                           "rescale_prenorm_residual", "use_mamba_kernels", "time_step_min",
                           "time_step_max", "time_step_floor", "time_step_limit",
                           "time_step_rank", "mamba_dt_min", "mamba_dt_max",
                           "mamba_dt_limit", "mamba_dt_init_floor", "num_logits_to_keep",
                           "mamba_ssm_cache_dtype",  -- the inference cache's dtype
                           "expand", "mamba_expand"}},
  -- Nemotron NAS (DeciLM: Llama-3.3-Nemotron-Super-49B, Llama-3.1-Nemotron-Ultra-253B):
  -- block_configs, one per layer, with per-layer attention and FFN widths (hfconfig_nas)
  ["nemotron-nas"] = {tie = false, nas = true},
  -- MiniMax-Text-01 / M1: attn_type_list (lightning attention, priced as the linear kind,
  -- in most layers), 32 experts of width intermediate_size; DeepNorm scales cost nothing
  minimax = MINIMAX, minimax_text_01 = MINIMAX, minimax_m1 = MINIMAX,
  -- MiniMax-M2: attn_type_list of softmax layers only, 256 experts of width
  -- intermediate_size, a sigmoid router with its routing bias (use_routing_bias), q and k
  -- RMSNorms (use_qk_norm; qk_norm_type per_layer normalises the whole q and k projections,
  -- priced as per-head norms: 6,912 parameters a layer under), rotary_dim RoPE (no cost)
  minimax_m2 = {tie = false, attn = "minimax", moe = "per_expert", qk_norm_field = "use_qk_norm",
                router_bias_field = "use_routing_bias", mtp_modules = true,
                no_cost = {"rotary_dim", "qk_norm_type"}},
  -- Phi-3/4: fused qkv and gate_up projections (the same counts as Llama's); a non-null
  -- sliding_window applies to every layer
  phi3 = {tie = false, attn = "mistral", no_cost = {"original_max_position_embeddings"}},
  -- Phi-3.5-MoE: 16 experts of intermediate_size, LayerNorms (weight and bias, whatever
  -- rms_norm_eps is called), attention_bias on q, k, v and o; lm_head_bias is the head's
  -- vocab-wide bias (32,064 parameters, 0.0001% of the model: not priced)
  phimoe = {tie = false, attn = "mistral", moe = "per_expert", norm = "layernorm",
            no_cost = {"original_max_position_embeddings", "input_jitter_noise",
                       "lm_head_bias"}},
  -- OLMo 2: q and k RMSNorms over the whole projection width, read as two more norms of
  -- hidden width per layer (exact for MHA, a few thousand parameters over for GQA)
  olmo2 = {tie = false, norms_per_layer = 4},
  -- Granite 3: Llama with muP scales; MoE: experts of width intermediate_size, and
  -- (granitemoeshared) an ungated shared expert of shared_intermediate_size
  granite = {tie = false, no_cost = GRANITE_SCALES},
  granitemoe = {tie = false, moe = "per_expert", no_cost = GRANITE_SCALES},
  granitemoeshared = {tie = false, moe = "per_expert", shared_gate = false,
                      no_cost = GRANITE_SCALES},
  -- Granite 4 (H): layer_types of mamba (Mamba-2) and attention mixers, each followed by
  -- experts plus an ungated shared MLP, or by the shared MLP alone when there are no experts
  granitemoehybrid = {tie = false, moe = "per_expert", shared_gate = false, hybrid_ffn = true,
                      no_cost = {"embedding_multiplier", "logits_scaling",
                                 "residual_multiplier", "attention_multiplier",
                                 "position_embedding_type", "mamba_n_layers"}},
  -- Falcon-H1: attention and a Mamba-2 mixer side by side in every layer, then a dense MLP
  -- (hfconfig_hybrid); muP multipliers scale activations only. mamba_use_mlp,
  -- mlp_expansion_factor and attn_layer_indices are saved by TII's configs but read by
  -- neither transformers' FalconH1Config nor its model (the MLP is intermediate_size wide)
  falcon_h1 = {tie = false, hybrid = "falcon_h1", d_ssm = true,
               -- FalconH1Config's defaults for the mixer fields a config leaves out
               defaults = {mamba_d_ssm = 1024, mamba_n_heads = 128, mamba_d_head = "auto",
                           mamba_n_groups = 1, mamba_d_state = 256, mamba_d_conv = 4,
                           mamba_chunk_size = 256},
               no_cost = {"lm_head_multiplier", "embedding_multiplier", "mlp_multipliers",
                          "key_multiplier", "attention_out_multiplier",
                          "attention_in_multiplier", "ssm_multipliers", "ssm_in_multiplier",
                          "ssm_out_multiplier", "mamba_norm_before_gate", "time_step_min",
                          "time_step_max", "time_step_limit", "time_step_floor",
                          "num_logits_to_keep", "mamba_use_mlp", "mlp_expansion_factor",
                          "attn_layer_indices"}},
  -- Jamba: Mamba-1 mixers with attention every attn_layer_period-th layer, MoE every
  -- expert_layer_period-th (hfconfig_hybrid); no positional encoding
  jamba = {tie = false, hybrid = "jamba", moe = "per_expert", same_width = true,
           position = "none",
           defaults = {num_experts = 16, num_experts_per_tok = 2},  -- JambaConfig's
           no_cost = {"use_mamba_kernels", "num_logits_to_keep",
                      "calc_logits_for_entire_prompt"}},
  gpt2 = {tie = true, gpt = true, position = "learned"},
  gpt_neox = {tie = false, gpt = true, position = "rope"},
  opt = {tie = true, gpt = true, position = "learned", position_offset = 2},
  bloom = {tie = true, gpt = true, position = "none", embed_norm = true, ffn_4h = true},
}

-- Wrapper model_types whose text tower is in text_config.
M.TEXT_TOWER = {gemma3 = "gemma3_text", qwen3_5 = "qwen3_5_text",
                qwen3_5_moe = "qwen3_5_moe_text", llama4 = "llama4_text"}

-- Fields no family reads that change neither parameters, FLOPs nor activation bytes:
-- identifiers, token ids, dtypes, initialisation, numerical epsilons and scales, RoPE
-- frequencies (RoPE costs no parameters), dropout rates (the dropout cost is
-- costs.dropout), caching and generation switches, router loss and normalisation
-- settings, and the towers ndplan does not cost (only the text tower is priced).
local NO_COST = {
  "architectures", "auto_map", "transformers_version", "torch_dtype", "dtype",
  "_name_or_path", "name_or_path", "model_name", "quantization_config",
  "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
  "image_token_index", "image_token_id", "boi_token_index", "eoi_token_index",
  "video_token_id", "vision_start_token_id", "vision_end_token_id",
  "initializer_range", "initializer_factor", "rms_norm_eps", "layer_norm_eps",
  "layer_norm_epsilon", "norm_eps", "rope_theta", "rope_scaling", "rope_parameters",
  "rope_local_base_freq", "rope_interleave", "partial_rotary_factor", "rotary_pct",
  "rotary_emb_base", "use_cache", "attention_dropout", "hidden_dropout", "dropout",
  "embd_pdrop", "resid_pdrop", "attn_pdrop", "summary_first_dropout", "activation_dropout",
  "router_aux_loss_coef", "router_z_loss_coef", "output_router_logits", "norm_topk_prob",
  "routed_scaling_factor", "scoring_func", "aux_loss_alpha", "seq_aux", "ep_size",
  "router_jitter_noise", "moe_router_enable_expert_bias",
  "query_pre_attn_scalar", "final_logit_softcapping", "attn_logit_softcapping",
  "cache_implementation", "hidden_act", "hidden_activation", "activation_function",
  "return_dict", "output_attentions", "output_hidden_states", "is_encoder_decoder",
  "tie_encoder_decoder", "use_return_dict", "pretraining_tp", "mm_tokens_per_image",
  "vision_config", "vision_feature_layer", "vision_feature_select_strategy",
  "projector_hidden_act", "multimodal_projector_bias", "audio_config", "text_config",
  "use_qk_norm_scale",
  "attn_temperature_tuning", "floor_scale", "attn_scale", "router_dtype",
  "max_length", "min_length", "num_beams", "temperature", "top_p", "top_k",
  -- what every PretrainedConfig may save: generation defaults, task heads, framework flags
  "id2label", "label2id", "finetuning_task", "problem_type", "tokenizer_class", "prefix",
  "task_specific_params", "torchscript", "use_bfloat16", "tf_legacy_loss", "pruned_heads",
  "chunk_size_feed_forward", "is_decoder", "add_cross_attention",
  "cross_attention_hidden_size", "bad_words_ids", "begin_suppress_tokens",
  "diversity_penalty", "do_sample", "early_stopping", "encoder_no_repeat_ngram_size",
  "exponential_decay_length_penalty", "forced_bos_token_id", "forced_eos_token_id",
  "length_penalty", "no_repeat_ngram_size", "num_beam_groups", "num_return_sequences",
  "output_scores", "remove_invalid_values", "repetition_penalty", "return_dict_in_generate",
  "suppress_tokens", "typical_p", "unk_token_id", "classifier_dropout",
  -- GPT-2's sequence-summary head and attention scaling, NeoX's parallel residual (the
  -- same work in another order), BLOOM's kernel fusion switches, OPT's layer drop
  "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
  "summary_first_dropout", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
  "reorder_and_upcast_attn", "use_parallel_residual", "attention_softmax_in_fp32",
  "bias_dropout_fusion", "masked_softmax_fusion", "offset_alibi", "skip_bias_add",
  "skip_bias_add_qkv", "slow_but_exact", "apply_residual_connection_post_layernorm",
  "layerdrop", "init_std",
}

-- no_cost(family traits) -> set of the field names known not to change the cost
function M.no_cost(traits)
  local set = {}
  for _, n in ipairs(NO_COST) do set[n] = true end
  for _, n in ipairs(traits.no_cost or {}) do set[n] = true end
  return set
end

return M
