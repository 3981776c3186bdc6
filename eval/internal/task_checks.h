// The checks an EVAL task shares between running (eval_task.cc) and
// `hlab-eval --check` (eval_task_check.cc): checkpoint headers, context
// lengths against the trained one, the LongPPL reference's tokenizer,
// the mechanism analyses' full-attention requirement, and the errors'
// field names.
//
// Thread-safety: free functions over their arguments.
#ifndef HLAB_EVAL_INTERNAL_TASK_CHECKS_H_
#define HLAB_EVAL_INTERNAL_TASK_CHECKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "eval/longppl.h"
#include "eval/multiple_choice.h"
#include "model/config/model_config.h"
#include "task/eval_task.h"
#include "train/checkpoint_file.h"

namespace hlab::eval::internal {

// `status` with "PREFIX: " before its message (OK stays OK).
absl::Status Prefixed(const std::string& prefix, const absl::Status& status);

// A checkpoint's header, with errors that name `field` and say what to do.
absl::StatusOr<train::CheckpointMeta> ReadHeader(const std::string& path,
                                                 const std::string& field);

// FailedPrecondition naming `field` when `length` tokens exceed the run's
// trained seq_len and the model cannot extrapolate (full attention with
// RoPE), unless the task allows extrapolation.
absl::Status CheckContext(const std::string& field, int64_t length,
                          const task::EvalTask& task,
                          const model::ModelConfig& config);

// The LongPPL reference must tokenize like the evaluated model (key tokens
// are positions in one tokenization); a reference that records no
// tokenizer adds a warning.
absl::Status CheckReference(const model::ModelConfig& model,
                            const std::string& model_tokenizer,
                            const model::ModelConfig& reference,
                            const std::string& reference_tokenizer,
                            std::vector<std::string>* warnings);

// Probing's sample length: the spec's, or seq_len.
int64_t ProbingContext(const task::ProbingSpec& spec, int64_t seq_len);

// Layer-wise probing is an analysis of what full attention carries:
// FailedPrecondition naming evals.probing for a model without a
// full-attention layer; its samples must fit the context (CheckContext).
absl::Status CheckProbing(const task::EvalTask& task,
                          const model::ModelConfig& config);

// Retrieval heads' sample length: the spec's, or seq_len.
int64_t RetrievalContext(const task::RetrievalHeadsSpec& spec, int64_t seq_len);

// Retrieval-head tracing reads full-attention heads: the same checks as
// probing's, naming evals.retrieval_heads.
absl::Status CheckRetrievalHeads(const task::EvalTask& task,
                                 const model::ModelConfig& config);

// Where an evaluation's documents come from, for the records.
std::string DataDescription(const task::EvalDataSpec& d,
                            const task::EvalTask& task, bool long_docs);

// ValidateKeyTokenConfig naming the task's fields (evals.longppl.*).
absl::Status ValidateLongPplConfig(const KeyTokenConfig& config);

// The key-token selection of a LongPPL spec and its resolved plan.
KeyTokenConfig KeyConfig(const task::LongPplSpec& spec,
                         const task::LongPplPlan& plan);

// The eval/multiple_choice.h task of evals.multiple_choice.tasks[i].
McTaskConfig MultipleChoiceConfig(const task::MultipleChoiceSpec& spec,
                                  size_t i);

// The most tokens a question's context and choice may take: the run's
// seq_len, or no limit (0) with allow_extrapolation.
int64_t MultipleChoiceMaxTokens(const task::EvalTask& task);

}  // namespace hlab::eval::internal

#endif  // HLAB_EVAL_INTERNAL_TASK_CHECKS_H_
