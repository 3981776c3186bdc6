#include "coordinator/sweep/spec_defaults.h"

#include <algorithm>
#include <string>

#include "model/config/model_config.h"
#include "task/eval_task.h"

namespace hlab::sweep {
namespace {

void DefaultScale(hlab::v1::Scale* s) {
  if (s->n_kv_heads() == 0) s->set_n_kv_heads(s->n_heads());
  if (s->head_dim() == 0 && s->n_heads() > 0 && s->d_model() > 0 &&
      s->d_model() % s->n_heads() == 0) {
    s->set_head_dim(s->d_model() / s->n_heads());
  }
  if (s->ffn_hidden() == 0 && s->d_model() > 0) {
    s->set_ffn_hidden(hlab::model::DefaultFfnHidden(s->d_model()));
  }
  if (s->vocab_size() == 0) s->set_vocab_size(kDefaultVocabSize);
}

void DefaultSchedule(hlab::v1::ScheduleSpec* s) {
  if (!s->has_decay_fraction()) s->set_decay_fraction(kDefaultDecayFraction);
  if (s->decay_shape().empty()) s->set_decay_shape("linear");
  if (!s->has_min_lr_ratio()) s->set_min_lr_ratio(kDefaultMinLrRatio);
  if (!s->has_weight_decay()) s->set_weight_decay(kDefaultWeightDecay);
  if (!s->has_grad_clip()) s->set_grad_clip(kDefaultGradClip);
}

void DefaultEvaluation(int64_t seq_len, const hlab::v1::DataSpec& data,
                       hlab::v1::EvaluationSpec* e) {
  if (!e->validation_loss().has_enabled()) {
    e->mutable_validation_loss()->set_enabled(true);
  }
  hlab::v1::LongPplSpec* l = e->mutable_longppl();
  if (l->enabled()) {
    // hlab-eval's defaults (task/eval_task.h), written into the spec.
    const task::LongPplPlan plan = task::PlanLongPpl({}, seq_len);
    if (l->trunc_len() == 0) l->set_trunc_len(plan.trunc_len);
    if (l->sliding_window() == 0) l->set_sliding_window(plan.sliding_window);
    if (l->context_len() == 0) l->set_context_len(plan.context_len);
    if (l->min_key_tokens() == 0) {
      l->set_min_key_tokens(task::LongPplSpec().min_key_tokens);
    }
    hlab::v1::LongPplReference* r = l->mutable_reference();
    const auto& k = l->key_tokens();
    const bool key_tokens = !k.file().empty() || !k.slices().empty() ||
                            !k.texts().empty() || !k.tokenizer().empty();
    if (!key_tokens && r->run_id().empty() && r->checkpoint_path().empty() &&
        r->hf_dir().empty() && r->architecture().empty()) {
      r->set_architecture("full");
    }
  }
  hlab::v1::NiahSpec* n = e->mutable_niah();
  if (n->enabled()) {
    if (n->context_lengths().empty()) n->add_context_lengths(seq_len);
    if (n->depths().empty()) {
      for (double d : {0.1, 0.5, 0.9}) n->add_depths(d);
    }
    if (n->samples() == 0) n->set_samples(kDefaultNiahSamples);
    if (n->haystack().empty()) {
      n->set_haystack(data.source() == "synthetic" ? "synthetic" : "noise");
    }
  }
  hlab::v1::GradientProfileSpec* gp = e->mutable_gradient_profile();
  if (gp->enabled() && gp->sequences() == 0) {
    gp->set_sequences(task::GradientProfileSpec().sequences);
  }
  hlab::v1::ProbingSpec* pr = e->mutable_probing();
  if (pr->enabled()) {
    const task::ProbingSpec defaults;
    if (pr->samples() == 0) pr->set_samples(defaults.samples);
    if (pr->context_length() == 0) pr->set_context_length(seq_len);
    if (pr->classes() == 0) pr->set_classes(defaults.classes);
  }
  hlab::v1::RetrievalHeadsSpec* rh = e->mutable_retrieval_heads();
  if (rh->enabled()) {
    const task::RetrievalHeadsSpec defaults;
    if (rh->samples() == 0) rh->set_samples(defaults.samples);
    if (rh->context_length() == 0) rh->set_context_length(seq_len);
    if (rh->top_heads() == 0) rh->set_top_heads(defaults.top_heads);
  }
  hlab::v1::MultipleChoiceSpec* mc = e->mutable_multiple_choice();
  if (mc->enabled() && !mc->has_seed()) {
    mc->set_seed(task::kDefaultMultipleChoiceSeed);
  }
  hlab::v1::RulerSpec* ru = e->mutable_ruler();
  if (ru->enabled()) {
    if (ru->samples() == 0) ru->set_samples(task::RulerSpec().samples);
    if (ru->lengths().empty()) ru->add_lengths(seq_len);
  }
  hlab::v1::ReceptiveFieldSpec* rf = e->mutable_receptive_field();
  if (rf->enabled() && rf->limit() == 0) {
    rf->set_limit(task::ReceptiveFieldLimit({}, seq_len));
  }
}

void DefaultRetry(hlab::v1::RetryPolicy* r) {
  if (!r->has_max_attempts_per_run()) {
    r->set_max_attempts_per_run(kDefaultMaxAttemptsPerRun);
  }
  if (!r->has_max_retries_per_sweep()) {
    r->set_max_retries_per_sweep(kDefaultMaxRetriesPerSweep);
  }
  if (!r->has_backoff_base_seconds()) {
    r->set_backoff_base_seconds(kDefaultBackoffBaseSeconds);
  }
  if (!r->has_backoff_max_seconds()) {
    r->set_backoff_max_seconds(kDefaultBackoffMaxSeconds);
  }
}

void DefaultFit(const hlab::v1::SweepSpec& spec, hlab::v1::FitSpec* f) {
  if (f->fit_scales().empty()) {
    for (const hlab::v1::Scale& s : spec.scales()) {
      const auto& verify = f->verify_scales();
      if (std::find(verify.begin(), verify.end(), s.name()) == verify.end()) {
        f->add_fit_scales(s.name());
      }
    }
  }
  if (f->targets().empty()) {
    f->add_targets("loss");
    if (spec.evaluation().longppl().enabled()) f->add_targets("longppl");
  }
  if (!f->has_bootstrap()) f->set_bootstrap(kDefaultBootstrap);
}

}  // namespace

hlab::v1::SweepSpec WithDefaults(const hlab::v1::SweepSpec& in) {
  hlab::v1::SweepSpec spec = in;
  if (spec.seeds().empty()) spec.add_seeds(0);
  for (hlab::v1::Scale& s : *spec.mutable_scales()) DefaultScale(&s);
  hlab::v1::DataSpec* data = spec.mutable_data();
  if (data->source().empty()) data->set_source("synthetic");
  if (!data->has_long_fraction()) data->set_long_fraction(kDefaultLongFraction);
  DefaultSchedule(spec.mutable_schedule());
  DefaultEvaluation(spec.seq_len(), spec.data(), spec.mutable_evaluation());
  DefaultRetry(spec.mutable_retry());
  if (!spec.has_share_trunk()) spec.set_share_trunk(true);
  if (!spec.has_match_params()) spec.set_match_params(true);
  DefaultFit(spec, spec.mutable_fit());
  if (spec.has_rope_theta() && spec.rope_theta() == kDefaultRopeTheta) {
    spec.clear_rope_theta();
  }
  for (hlab::v1::Scale& s : *spec.mutable_scales()) {
    if (s.has_rope_theta() &&
        s.rope_theta() ==
            (spec.has_rope_theta() ? spec.rope_theta() : kDefaultRopeTheta)) {
      s.clear_rope_theta();
    }
  }
  // Written or not, the default order is the same sweep (the same hash).
  if (spec.schedule_policy() == "default") spec.clear_schedule_policy();
  return spec;
}

double EffectiveRopeTheta(const hlab::v1::SweepSpec& spec,
                          const hlab::v1::Scale& scale) {
  if (scale.has_rope_theta()) return scale.rope_theta();
  return spec.has_rope_theta() ? spec.rope_theta() : kDefaultRopeTheta;
}

}  // namespace hlab::sweep
