#include "coordinator/sweep_fitter.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/sweep_catalog.h"

namespace hlab::coordinator {

void SweepFitter::Start() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_;
        };
        if (mu_.AwaitWithTimeout(absl::Condition(&stopping),
                                 options_.interval)) {
          return;
        }
      }
      absl::StatusOr<int> fitted = FitFinishedSweeps();
      if (!fitted.ok()) {
        HLAB_LOG(WARNING) << "automatic fits: " << fitted.status();
      }
    }
  });
}

void SweepFitter::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<bool> SweepFitter::AlreadyFitted(int64_t sweep_id) {
  store::QueryOptions options;
  HLAB_ASSIGN_OR_RETURN(
      store::QueryResult result,
      context_->query->Run(
          absl::StrCat(
              "SELECT (SELECT count(*) FROM fits WHERE sweep_id = ", sweep_id,
              ") + (SELECT count(*) FROM events WHERE sweep_id = ", sweep_id,
              " AND kind = 'fits')"),
          options));
  if (result.rows.empty()) return false;
  const auto* n = std::get_if<int64_t>(&result.rows[0][0]);
  return n != nullptr && *n > 0;
}

absl::Status SweepFitter::FitSweep(int64_t sweep_id) {
  HLAB_ASSIGN_OR_RETURN(std::shared_ptr<const sweep::SweepPlan> plan,
                        context_->catalog->Plan(sweep_id));
  SweepFitOptions fit_options;
  fit_options.bootstrap = options_.bootstrap;
  fit_options.threads = options_.threads;
  fit_options.grid = options_.grid;
  const absl::Time start = absl::Now();
  HLAB_ASSIGN_OR_RETURN(
      std::vector<SweepFit> fits,
      FitSweepRuns(*context_->query, sweep_id, plan->spec.fit(), fit_options));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::vector<std::string> lines;
  int recorded = 0;
  for (const SweepFit& fit : fits) {
    lines.push_back(DescribeSweepFit(fit));
    if (!fit.fitted) {
      HLAB_LOG(WARNING) << "sweep " << sweep_id << ": " << lines.back();
      continue;
    }
    HLAB_RETURN_IF_ERROR(
        context_->store->RecordFit(ToFitRecord(fit), context_->clock()));
    ++recorded;
  }
  store::Event event;
  event.sweep_id = sweep_id;
  event.kind = "fits";
  event.time = context_->clock();
  if (fits.empty()) {
    event.message = "no fits: the sweep has no succeeded runs";
  } else {
    event.message = absl::StrCat(recorded > 0 ? "fits ready" : "no fits", ": ",
                                 recorded, " of ", fits.size(), " stored in ",
                                 absl::StrFormat("%.1f", seconds), " s\n",
                                 absl::StrJoin(lines, "\n"));
  }
  HLAB_RETURN_IF_ERROR(context_->store->AppendEvent(event).status());
  HLAB_LOG(INFO) << "sweep " << sweep_id << ": " << event.message;
  return absl::OkStatus();
}

absl::StatusOr<int> SweepFitter::FitFinishedSweeps() {
  absl::MutexLock lock(&round_mu_);
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Sweep> sweeps,
                        context_->store->ListSweeps());
  int handled = 0;
  for (const store::Sweep& sweep : sweeps) {
    if (done_.count(sweep.id) > 0) continue;
    if (sweep.state == store::SweepState::kCancelled) continue;
    HLAB_ASSIGN_OR_RETURN(bool finished, context_->catalog->Finished(sweep.id));
    if (!finished) continue;
    HLAB_ASSIGN_OR_RETURN(bool fitted, AlreadyFitted(sweep.id));
    if (!fitted) {
      store::RunFilter filter;
      filter.sweep_id = sweep.id;
      filter.state = store::RunState::kSucceeded;
      HLAB_ASSIGN_OR_RETURN(std::vector<store::Run> succeeded,
                            context_->store->ListRuns(filter));
      if (succeeded.empty()) continue;  // all failed: maybe resumed later
      HLAB_RETURN_IF_ERROR(FitSweep(sweep.id));
      ++handled;
    }
    done_.insert(sweep.id);
  }
  return handled;
}

}  // namespace hlab::coordinator
