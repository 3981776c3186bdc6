// The EVAL task template and field reference (`hlab-eval --example-task`,
// `hlab-eval --help`); keep them in step with task/eval_task.h and
// docs/evaluation.md.
#include <string>

#include "task/eval_task.h"

namespace hlab::task {

std::string ExampleEvalTaskJson() {
  return R"({
  "kind": "eval",
  "task_id": "example-eval",
  "run_id": "example",
  "checkpoint": "/path/to/run/checkpoints/step-0000000100.ckpt",
  "config": {
    "name": "example-swa",
    "model": {"arch": "swa-32", "d_model": 64, "n_layers": 4, "n_heads": 4,
              "n_kv_heads": 2, "vocab_size": 258},
    "data": {"source": "synthetic", "seed": 0, "long_fraction": 0.5},
    "seq_len": 128,
    "batch_tokens": 2048,
    "budget_tokens": 204800
  },
  "evals": {
    "val_loss": {"tokens": 0},
    "longppl": {"trunc_len": 0, "sliding_window": 0, "context_len": 0,
                "reference": {"checkpoint":
                              "/path/to/reference/step-0000000400.ckpt"}}
  },
  "cache_dir": "/tmp/hlab-eval-cache",
  "threads": 0,
  "allow_extrapolation": false
}
)";
}

const char kEvalTaskFieldsHelp[] =
    R"(task fields (JSON object; unknown fields are errors):
  kind                 "eval" (default)
  task_id, run_id      copied into the records
  step                 the training step the results are recorded at
                       (default: the checkpoint's step)
  checkpoint           (required) the checkpoint file to evaluate
  config               (required) the run's config: the coordinator's
                       canonical run config ("format": "hlab.run.v1") or the
                       hlab-train task the model was trained with; seq_len
                       and data are read from it (a synthetic run config's
                       data.corpus_version must be 3, this hlab's corpus)
  evals                (required) one or more of:
    val_loss           {"tokens": 0 (= 65536), "batch_sequences": 8,
                        "data": DATA, "documents": "mixture"}: mean NLL
                       per token on held-out sequences of seq_len; without
                       data, "documents" picks the run's held-out mixture,
                       or its "short" (the paper's C4 Loss) or "long" ones
    longppl            {"trunc_len": 0 (= seq_len/4), "sliding_window": 0
                        (= seq_len/16), "context_len": 0 (= seq_len),
                        "alpha": 2, "beta": -2, "min_key_tokens": 10,
                        "documents": 0 (= 64, or all if fewer),
                        "aggregation": "pooled" | "per_document",
                        "reference": {"checkpoint": FILE (required),
                                      "run_id": "", "checkpoint_path": "",
                                      "tokenizer": "" (= the model's)}
                        or {"hf_dir": DIR, "dtype": "" | "fp32" | "bf16"},
                        "data": DATA}: log(LongPPL) on key tokens the
                       reference selects (default data: the run's long
                       held-out documents); hf_dir is a Hugging Face Llama
                       (config.json + safetensors), in bf16 on a GPU else
                       fp32 by default; a reference with another tokenizer
                       than the model's (a checkpoint's named in tokenizer,
                       a Llama's tokenizer.json) selects on its own tokens,
                       passed on as character ranges;
                       or, instead of reference and
                       data, "key_tokens": {"file": FILE} (hlab's key-span
                       JSONL) or {"slices": DIR, "texts": FILE}
                       (PKU-ML/LongPPL's slice_<i>.txt files and their
                       texts), "tokenizer": "" (= the model's): key tokens
                       chosen elsewhere, as character ranges
    niah               {"kinds": [...], "context_lengths": [...],
                        "depths": [...], "samples": 20, "candidates": 8,
                        "seed": 0, "greedy": false, "haystack": "noise"
                        | "synthetic", "tokenizer": "" (= the model's)}:
                       needle-in-a-haystack accuracy by candidate
                       likelihood (greedy exact match too when greedy) per
                       kind, length and depth; context_lengths default
                       [seq_len], kinds all four, depths [0.1, 0.5, 0.9]
    receptive_field    {"limit": 0 (= seq_len/8, even)}: appendix D.1,
                       val_loss and log(LongPPL) again with the full-attention
                       layers restricted to keys [i-H, i] and, separately,
                       the efficient layers restricted (softmax exactly,
                       recurrent by windows of 3H/2, stride H/2, reset
                       state); results are the changes. Needs val_loss (and
                       measures log(LongPPL) changes when longppl is there)
    gradient_profile   {"sequences": 16, "batch_sequences": 8}: appendix
                       D.3, the mean input-gradient norm G(d) of the last
                       position's target logit at each distance d, on the
                       run's long held-out documents; result grad_reach
                       (where G falls to its far floor) with the binned
                       G / G_base in the details
    probing            {"samples": 512, "context_length": 0 (= seq_len),
                        "depths": [0.1, 0.3, 0.5, 0.7, 0.9], "classes": 8,
                        "test_fraction": 0.25, "l2": 0.01, "seed": 0,
                        "batch_sequences": 8, "tokenizer": ""}: appendix
                       D.2, a linear softmax probe per layer (0 = the
                       embeddings) on the residual stream at the query
                       position of synthetic single-needle NIAH samples,
                       class = the needle's value; results probe_acc (the
                       peak layer's test accuracy, the per-layer table in
                       the details) and probe_acc/l<k>, with Wilson 95%
                       intervals. Needs a full-attention layer
    retrieval_heads    {"samples": 64, "context_length": 0 (= seq_len),
                        "depths": [0.1, 0.3, 0.5, 0.7, 0.9],
                        "top_heads": 2, "seed": 0, "tokenizer": ""}:
                       appendix D.4, every full-attention head on
                       synthetic single-needle NIAH samples teacher-forced
                       on the answer: Retrieval_Head score (top-1 key in
                       the needle and the generated token equal to it),
                       needle attention mass, normalised entropy; results
                       retrieval_score and retrieval_mass (the top head's,
                       every head in the details). Needs a full-attention
                       layer
    multiple_choice    {"tasks": [{"name": "" (= the file's stem),
                        "file": JSONL, "fewshot_file": "",
                        "num_fewshot": 0, "target_delimiter": " ",
                        "fewshot_delimiter": "\n\n", "limit": 0 (= all)}],
                        "seed": 1234, "tokenizer": ""}: multiple-choice
                       tasks in lm-evaluation-harness's conventions, one
                       question a line {"context", "choices", "gold"};
                       results mc_acc/<name> (summed log-likelihood of
                       each choice) and mc_acc_norm/<name> (divided by the
                       choice's length in characters), with n and stderr
                       in the details. A question whose context and choice
                       exceed seq_len tokens is an error naming its line
                       (unless allow_extrapolation)
    ruler              {"tasks": [] (= every task whose files are given),
                        "lengths": [] (= [seq_len]), "samples": 20,
                        "seed": 0, "tokens_to_generate": 0 (= RULER's),
                        "essay_file": "", "squad_file": "",
                        "hotpotqa_file": "", "tokenizer": ""}: RULER's
                       synthetic tasks (niah_single_1..3, niah_multikey_1..3,
                       niah_multivalue, niah_multiquery, vt, cwe, fwe, qa_1,
                       qa_2) by greedy decoding, RULER's string match;
                       results ruler_score (the mean over tasks) and
                       ruler_score/<task>, each cell in the details
  DATA                 {"jsonl": FILE, "text_field": "text",
                        "tokenizer": "" (= the model's)} or
                       {"prepared": DIR, "split": "heldout"}; absent: the
                       run's own held-out data
  cache_dir            where key tokens (and imported JSONL) are cached;
                       "" = no cache
  threads              0 = all cores
  allow_extrapolation  allow contexts beyond the trained seq_len for models
                       with full RoPE attention (default false)
)";

}  // namespace hlab::task
