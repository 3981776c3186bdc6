#include "worker/record_relay.h"
#include <sys/stat.h>

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/json_reader.h"
#include "common/log.h"

namespace hlab::worker {
namespace {

using Json = nlohmann::json;

// An integer field; 0 when missing, not a number, or beyond int64 (a
// record is the trainer's, but a broken one must not crash the worker).
int64_t Int(const Json& r, const char* key) {
  auto it = r.find(key);
  if (it == r.end() || !it->is_number()) return 0;
  if (HoldsInteger<int64_t>(*it)) return it->get<int64_t>();
  if (it->is_number_integer()) return 0;  // beyond int64
  const double d = it->get<double>();
  return std::isfinite(d) && std::fabs(d) < 9.2e18 ? static_cast<int64_t>(d)
                                                   : 0;
}

// A number, or NaN when missing / null (a non-finite loss is written as
// null by nlohmann).
bool Number(const Json& r, const char* key, double* out) {
  auto it = r.find(key);
  if (it == r.end()) return false;
  *out = it->is_number() ? it->get<double>()
                         : std::numeric_limits<double>::quiet_NaN();
  return it->is_number() || it->is_null();
}

std::string String(const Json& r, const char* key) {
  auto it = r.find(key);
  return it != r.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

RecordRelay::RecordRelay(const hlab::v1::Task& task) : task_(task) {
  progress_.set_task_id(task.task_id());
  progress_.set_attempt(task.attempt());
  progress_.set_step(task.start_step());
}

absl::Status RecordRelay::Add(absl::string_view line, absl::Time now) {
  Json r = Json::parse(line.begin(), line.end(), nullptr,
                       /*allow_exceptions=*/false);
  if (!r.is_object() || !r.contains("type") || !r["type"].is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a record: ", line.substr(0, 200)));
  }
  const std::string type = r["type"].get<std::string>();
  const int64_t wall_ms = absl::ToUnixMillis(now);
  const int64_t step = Int(r, "step");
  const int64_t tokens = Int(r, "tokens");
  double v = 0;
  if (type == "step") {
    if (Number(r, "loss", &v)) {
      AddPoint("train_loss", step, tokens, v, wall_ms);
      progress_.set_loss(v);
    }
    if (Number(r, "lr", &v)) AddPoint("lr", step, tokens, v, wall_ms);
    if (Number(r, "grad_norm", &v)) {
      AddPoint("grad_norm", step, tokens, v, wall_ms);
    }
    if (Number(r, "tokens_per_s", &v)) {
      AddPoint("tokens_per_s", step, tokens, v, wall_ms);
      progress_.set_tokens_per_s(v);
    }
    progress_.set_step(step);
    progress_.set_tokens(tokens);
  } else if (type == "eval") {
    if (Number(r, "val_loss", &v)) {
      AddPoint("val_loss", step, tokens, v, wall_ms);
    }
    if (Number(r, "val_recall_loss", &v)) {
      AddPoint("val_recall_loss", step, tokens, v, wall_ms);
    }
  } else if (type == "analysis") {
    // "q_grad_norm": {"l1h0": v, ...} -> metrics q_grad_norm_l1h0, ...
    auto norms = r.find("q_grad_norm");
    if (norms != r.end() && norms->is_object()) {
      for (auto it = norms->begin(); it != norms->end(); ++it) {
        if (!it.value().is_number()) continue;
        AddPoint(absl::StrCat("q_grad_norm_", it.key()), step, tokens,
                 it.value().get<double>(), wall_ms);
      }
    }
  } else if (type == "checkpoint") {
    hlab::v1::Checkpoint c;
    c.set_task_id(task_.task_id());
    c.set_attempt(task_.attempt());
    c.set_step(step);
    c.set_tokens(tokens);
    c.set_path(String(r, "path"));
    c.set_sha256(String(r, "sha256"));
    c.set_created_unix_ms(wall_ms);
    struct stat st;
    if (::stat(c.path().c_str(), &st) == 0) c.set_size_bytes(st.st_size);
    const std::string kind = String(r, "kind");
    if (kind == "branch") {
      c.set_branch_point(true);
      c.set_run_id(BranchRun(step));
    } else if (kind == "kept" && task_.kind() == hlab::v1::TASK_KIND_TRUNK) {
      c.set_run_id(LongestRun());
    } else if (task_.kind() != hlab::v1::TASK_KIND_TRUNK &&
               task_.run_ids_size() > 0) {
      c.set_run_id(task_.run_ids(0));
    }
    checkpoints_.push_back(std::move(c));
  } else if (type == "error") {
    last_error_ = String(r, "message");
    last_error_code_ = static_cast<int>(Int(r, "exit_code"));
  } else if (type == "warning") {
    HLAB_LOG(WARNING) << "task " << task_.task_id()
                      << (task_.kind() == hlab::v1::TASK_KIND_EVAL
                              ? ": hlab-eval: "
                              : ": hlab-train: ")
                      << String(r, "message");
  } else if (type == "result") {
    hlab::v1::MetricPoint p;
    const std::string run = String(r, "run_id");
    p.set_run_id(!run.empty()               ? run
                 : task_.run_ids_size() > 0 ? task_.run_ids(0)
                                            : "");
    p.set_name(String(r, "metric"));
    p.set_step(step > 0 ? step : task_.eval_step());
    if (!Number(r, "value", &v)) v = std::numeric_limits<double>::quiet_NaN();
    p.set_value(v);
    p.set_wall_unix_ms(wall_ms);
    auto details = r.find("details");
    if (details != r.end() && details->is_object()) {
      p.set_details_json(details->dump());
    }
    if (p.name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "result record without a metric: ", line.substr(0, 200)));
    }
    results_.push_back(std::move(p));
  } else if (type == "progress") {
    eval_done_ = Int(r, "done");
    eval_total_ = Int(r, "total");
  } else if (type == "done") {
    done_ = true;
    progress_.set_step(step);
    progress_.set_tokens(tokens);
    if (Number(r, "loss", &v)) progress_.set_loss(v);
  }
  return absl::OkStatus();
}

std::vector<std::string> RecordRelay::RunsAt(int64_t step) const {
  std::vector<std::string> runs;
  if (task_.kind() == hlab::v1::TASK_KIND_TRUNK &&
      task_.branch_points_size() > 0) {
    for (const hlab::v1::BranchPoint& b : task_.branch_points()) {
      if (step <= b.step()) runs.push_back(b.run_id());
    }
    return runs;
  }
  if (task_.kind() == hlab::v1::TASK_KIND_TRUNK) {
    return {task_.run_ids().begin(), task_.run_ids().end()};
  }
  if (task_.run_ids_size() > 0) runs.push_back(task_.run_ids(0));
  return runs;
}

std::string RecordRelay::BranchRun(int64_t step) const {
  for (const hlab::v1::BranchPoint& b : task_.branch_points()) {
    if (b.step() == step) return b.run_id();
  }
  return task_.run_ids_size() == 1 ? task_.run_ids(0) : "";
}

std::string RecordRelay::LongestRun() const {
  const hlab::v1::BranchPoint* last = nullptr;
  for (const hlab::v1::BranchPoint& b : task_.branch_points()) {
    if (last == nullptr || b.step() > last->step()) last = &b;
  }
  if (last != nullptr) return last->run_id();
  return task_.run_ids_size() > 0 ? task_.run_ids(task_.run_ids_size() - 1)
                                  : "";
}

void RecordRelay::AddPoint(const std::string& name, int64_t step,
                           int64_t tokens, double value, int64_t wall_ms) {
  for (const std::string& run : RunsAt(step)) {
    if (points_.size() >= kMaxPendingPoints) {
      points_.pop_front();
      if (dropped_++ % 10000 == 0) {
        HLAB_LOG(WARNING) << "task " << task_.task_id()
                          << ": coordinator unreachable, dropping old points";
      }
    }
    hlab::v1::MetricPoint p;
    p.set_run_id(run);
    p.set_name(name);
    p.set_step(step);
    p.set_tokens(tokens);
    p.set_value(value);
    p.set_wall_unix_ms(wall_ms);
    if (points_.empty()) oldest_ = absl::FromUnixMillis(wall_ms);
    points_.push_back(std::move(p));
  }
}

bool RecordRelay::FlushDue(absl::Time now) const {
  if (!checkpoints_.empty()) return true;
  if (points_.empty()) return false;
  return points_.size() >= kFlushPoints || now - oldest_ >= kFlushInterval;
}

std::vector<hlab::v1::MetricPoint> RecordRelay::PeekPoints(size_t max) const {
  const size_t n = std::min(max, points_.size());
  return {points_.begin(), points_.begin() + static_cast<std::ptrdiff_t>(n)};
}

void RecordRelay::AckPoints(size_t n) {
  n = std::min(n, points_.size());
  points_.erase(points_.begin(),
                points_.begin() + static_cast<std::ptrdiff_t>(n));
  oldest_ = points_.empty()
                ? absl::InfiniteFuture()
                : absl::FromUnixMillis(points_.front().wall_unix_ms());
}

}  // namespace hlab::worker
