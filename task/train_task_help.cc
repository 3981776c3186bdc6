// The field reference printed by `hlab-train --help`; keep it in step with
// task/train_task.h and docs/training.md.
#include "task/train_task.h"

namespace hlab::task {

const char kTaskFieldsHelp[] =
    R"(task file fields (JSON; unknown fields are errors):
  name                   free text shown in records                    ""
  model                  model config (required): vocab_size, d_model, n_layers,
                         n_heads, n_kv_heads, head_dim, ffn_hidden, norm_eps,
                         init_std, rope_theta, tie_embeddings, and one of
                         "arch" (full, swa-<w>, lightning, mamba2, gdn, with
                         -1to3/-headwise/-nope), "pattern" or "layers"
                         (docs/models.md). vocab_size must cover the data's
                         tokenizer (258 for byte-level)
  match_params           match N to the Full backbone (appendix B)     false
  data.source            "synthetic" (built-in) or "prepared"          synthetic
  data.seed              seed of the data order                        0
  data.long_fraction     share of training tokens from long documents  0.5
  data.synthetic.*       long_min_tokens/long_max_tokens (default
                         seq_len+1 .. seq_len+1), short_min_tokens/
                         short_max_tokens (default 16 .. seq_len/4),
                         min_distance (4), binding_rate (long
                         documents, 1.0), short_binding_rate (0.0:
                         short documents are filler only)
  data.long_dir          prepared dataset of long documents
  data.short_dir         prepared dataset of short documents
  seq_len                tokens per training sequence                  128
  batch_tokens           tokens per optimizer step (whole sequences)   4096
  micro_batch_tokens     tokens per forward/backward; gradient
                         accumulation = batch_tokens / this; 0 = none  0
  budget_tokens          training budget D in tokens           (one of these
  tokens_per_param       ... or as D/N, N = non-embedding params  is required)
  optimizer.peak_lr      AdamW peak learning rate                      0.003
  optimizer.beta1/beta2  AdamW betas                                   0.9/0.95
  optimizer.eps          AdamW epsilon                                 1e-8
  optimizer.weight_decay on tensors with >= 2 dims only                0.1
  optimizer.grad_clip    global gradient-norm clip                     1.0
  schedule.warmup_steps  linear warmup steps (fixed across budgets)    20
  schedule.decay_fraction  decay over the last fraction of the budget  0.1
  schedule.decay_shape   linear, cosine or 1-sqrt                      linear
  schedule.min_lr_ratio  final LR / peak LR                            0.1
  stop_at_tokens         stop early at this token count; 0 = budget    0
  branch_budgets_tokens  WSD trunk: save a branch checkpoint at the decay
                         start of each budget and stop at the last     []
  init_from              WSD decay or trunk segment: start from this
                         branch checkpoint                             ""
  checkpoint.dir         checkpoint directory; "" = none               ""
  checkpoint.every_steps periodic checkpoints; 0 = only at the end     0
  checkpoint.keep_last   periodic checkpoints kept (branches are kept) 2
  checkpoint.keep_every_steps
                         also a checkpoint at every multiple of N steps,
                         never pruned (kept-<step>.ckpt); 0 = none      0
  checkpoint.resume_max_step
                         resume from no checkpoint past this step; -1 =
                         the newest (hlab-worker: the newest its
                         coordinator recorded)                         -1
  resume                 continue from the newest valid checkpoint     true
  seed                   seed of the model initialisation              0
  threads                intra-op threads; 0 = all cores (CUDA: <= 4)  0
  device                 "cpu", or "cuda" (a CUDA build of hlab-train;
                         ranks all-reduce over NCCL instead of Gloo)   "cpu"
  bf16                   bf16 autocast for the forward pass            false
  log_every_steps        a progress record every N steps               1
  eval.every_steps       held-out validation every N steps; 0 = only
                         at branch points and at the end               0
  eval.sequences         held-out sequences per validation pass        32
  analysis.q_grad_every_steps
                         every N steps, an "analysis" record with each
                         full-attention head's q_proj gradient norm
                         (before clipping); 0 = off. Needs a
                         full-attention head                           0
)";

}  // namespace hlab::task
