#include "analysis/fit.h"
#include <ceres/first_order_function.h>
#include <ceres/gradient_problem.h>
#include <ceres/gradient_problem_solver.h>
#include <glog/logging.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <mutex>
#include <set>
#include <utility>

#include <Eigen/Dense>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/internal/parallel.h"

namespace hlab::analysis {
namespace {

using Params = std::array<double, kNumLogParams>;

// Adapts HuberLogObjective to Ceres and remembers the lowest point it was
// evaluated at: Ceres leaves the parameters untouched when a run ends in a
// line-search FAILURE (common right at a Huber optimum), so the best point is
// taken from here instead.
class TrackingObjective final : public ceres::FirstOrderFunction {
 public:
  explicit TrackingObjective(const HuberLogObjective& objective)
      : objective_(objective) {}

  bool Evaluate(const double* x, double* cost,
                double* gradient) const override {
    *cost = objective_.Evaluate(x, gradient);
    if (!std::isfinite(*cost)) return false;
    if (gradient != nullptr) {
      for (int k = 0; k < kNumLogParams; ++k) {
        if (!std::isfinite(gradient[k])) return false;
      }
    }
    if (*cost < best_cost_) {
      best_cost_ = *cost;
      std::copy(x, x + kNumLogParams, best_x_.begin());
    }
    return true;
  }
  int NumParameters() const override { return kNumLogParams; }

  double best_cost() const { return best_cost_; }
  const Params& best_x() const { return best_x_; }

 private:
  const HuberLogObjective& objective_;
  mutable double best_cost_ = std::numeric_limits<double>::infinity();
  mutable Params best_x_{};
};

struct RunOutcome {
  Params x{};
  double cost = std::numeric_limits<double>::infinity();
  int iterations = 0;
  std::string message;
};

ceres::GradientProblemSolver::Options SolverOptions(const FitOptions& o,
                                                    bool polish) {
  ceres::GradientProblemSolver::Options options;
  options.line_search_direction_type = ceres::LBFGS;
  options.max_num_iterations =
      polish ? o.polish_max_iterations : o.max_iterations;
  options.function_tolerance =
      polish ? o.polish_function_tolerance : o.function_tolerance;
  options.gradient_tolerance =
      polish ? o.polish_gradient_tolerance : o.gradient_tolerance;
  options.parameter_tolerance = o.parameter_tolerance;
  // Bisection rather than polynomial interpolation in the line search: as
  // many evaluations here, and Ceres's polynomial root finder logs a glog
  // warning whenever a step is too small to change the objective.
  options.line_search_interpolation_type = ceres::BISECTION;
  options.logging_type = ceres::SILENT;
  return options;
}

// Ceres reports recoverable numerical events of its L-BFGS update as glog
// warnings on stderr ("Numerical failure in L-BFGS update ..."), preceded by
// glog's "Logging before InitGoogleLogging()" notice. A fit handles them (a
// run keeps its best point), so the process shows glog errors only.
void QuietCeresWarnings() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (FLAGS_minloglevel < google::GLOG_ERROR) {
      FLAGS_minloglevel = google::GLOG_ERROR;
    }
  });
}

// One L-BFGS run from `start`; the outcome is the best point evaluated.
RunOutcome RunLbfgs(const HuberLogObjective& objective, const Params& start,
                    const ceres::GradientProblemSolver::Options& options) {
  auto* tracker = new TrackingObjective(objective);
  ceres::GradientProblem problem(tracker);  // owns tracker
  Params x = start;
  ceres::GradientProblemSolver::Summary summary;
  ceres::Solve(options, problem, x.data(), &summary);
  RunOutcome out;
  out.iterations = static_cast<int>(summary.iterations.size());
  out.message = summary.message;
  if (std::isfinite(tracker->best_cost())) {
    out.x = tracker->best_x();
    out.cost = tracker->best_cost();
  } else {
    out.x = start;
  }
  return out;
}

// Restarts L-BFGS (with fresh curvature memory) from the current best while
// that still lowers the objective.
void Polish(const HuberLogObjective& objective,
            const ceres::GradientProblemSolver::Options& options, int rounds,
            RunOutcome* best) {
  for (int round = 0; round < rounds; ++round) {
    RunOutcome next = RunLbfgs(objective, best->x, options);
    if (!(next.cost < best->cost)) break;
    best->x = next.x;
    best->cost = next.cost;
    best->iterations += next.iterations;
    best->message = next.message;
  }
}

// Condition number of J_ij = d ln L-hat_i / d theta_j with unit-norm columns.
double JacobianConditionNumber(absl::Span<const ScalingPoint> points,
                               const LogPowerLaw& law) {
  Eigen::MatrixXd j(points.size(), kNumLogParams);
  for (size_t i = 0; i < points.size(); ++i) {
    const double ln_n = std::log(points[i].n), ln_d = std::log(points[i].d);
    const double t1 = law.a - law.alpha * ln_n, t2 = law.b - law.beta * ln_d;
    const double m = std::max({t1, t2, law.e});
    const double e1 = std::exp(t1 - m), e2 = std::exp(t2 - m),
                 e3 = std::exp(law.e - m);
    const double s = e1 + e2 + e3;
    j(i, kParamA) = e1 / s;
    j(i, kParamB) = e2 / s;
    j(i, kParamE) = e3 / s;
    j(i, kParamAlpha) = -e1 / s * ln_n;
    j(i, kParamBeta) = -e2 / s * ln_d;
  }
  for (int k = 0; k < kNumLogParams; ++k) {
    const double norm = j.col(k).norm();
    if (norm == 0) return std::numeric_limits<double>::infinity();
    j.col(k) /= norm;
  }
  Eigen::JacobiSVD<Eigen::MatrixXd> svd(j);
  const Eigen::VectorXd& s = svd.singularValues();
  const double smin = s(s.size() - 1);
  return smin > 0 ? s(0) / smin : std::numeric_limits<double>::infinity();
}

void AddDataWarnings(absl::Span<const ScalingPoint> points,
                     std::vector<std::string>* warnings) {
  std::set<double> ns, ds;
  for (const ScalingPoint& p : points) {
    ns.insert(p.n);
    ds.insert(p.d);
  }
  if (ns.size() < 3) {
    warnings->push_back(absl::StrCat(
        "badly conditioned: only ", ns.size(),
        " distinct N value(s); A and alpha need at least 3 to be identified"));
  }
  if (ds.size() < 3) {
    warnings->push_back(absl::StrCat(
        "badly conditioned: only ", ds.size(),
        " distinct D value(s); B and beta need at least 3 to be identified"));
  }
}

void AddRangeWarning(const char* name, double value,
                     const std::vector<double>& axis, FitResult* result) {
  const auto [lo, hi] = std::minmax_element(axis.begin(), axis.end());
  if (value < *lo || value > *hi) {
    std::string warning = absl::StrFormat(
        "fitted %s = %.6g lies outside the start grid's range [%g, %g]", name,
        value, *lo, *hi);
    result->outside_grid.push_back(warning);
    result->warnings.push_back(std::move(warning));
  }
}

// Fills everything in `result` that follows from the optimum.
void Finish(absl::Span<const ScalingPoint> points,
            const HuberLogObjective& objective, const RunOutcome& best,
            const FitOptions& options, FitResult* result) {
  result->log_law = FromVector(best.x.data());
  result->law = ToPowerLaw(result->log_law);
  Params gradient{};
  result->objective = objective.Evaluate(best.x.data(), gradient.data());
  double g2 = 0;
  for (double g : gradient) g2 += g * g;
  result->gradient_norm = std::sqrt(g2);
  result->n_points = points.size();
  result->iterations = best.iterations;
  result->termination = best.message;
  result->condition_number = JacobianConditionNumber(points, result->log_law);
  AddDataWarnings(points, &result->warnings);
  if (!(result->condition_number <= options.condition_warning)) {
    result->warnings.push_back(absl::StrFormat(
        "badly conditioned: the Jacobian of ln L at the optimum has condition "
        "number %.3g (> %.3g); some coefficients are not determined by the "
        "data",
        result->condition_number, options.condition_warning));
  }
}

absl::Status CheckOptions(const FitOptions& options) {
  if (!(options.huber_delta > 0)) {
    return absl::InvalidArgumentError("huber_delta must be > 0");
  }
  if (options.max_iterations <= 0 || options.polish_max_iterations <= 0) {
    return absl::InvalidArgumentError("max_iterations must be > 0");
  }
  if (options.polish_rounds < 0) {
    return absl::InvalidArgumentError("polish_rounds must be >= 0");
  }
  return absl::OkStatus();
}

}  // namespace

StartGrid StartGrid::Chinchilla() {
  StartGrid grid;
  grid.alpha = {0, 0.5, 1, 1.5, 2};
  grid.beta = {0, 0.5, 1, 1.5, 2};
  grid.e = {-1, -0.5, 0, 0.5, 1};
  grid.a = {0, 5, 10, 15, 20, 25};
  grid.b = {0, 5, 10, 15, 20, 25};
  return grid;
}

size_t StartGrid::size() const {
  return alpha.size() * beta.size() * e.size() * a.size() * b.size();
}

namespace {
// Splits a flat start index into per-axis indices (b fastest).
std::array<size_t, 5> Unflatten(const StartGrid& g, size_t index) {
  std::array<size_t, 5> k{};
  const std::array<size_t, 5> sizes = {g.alpha.size(), g.beta.size(),
                                       g.e.size(), g.a.size(), g.b.size()};
  for (int axis = 4; axis >= 0; --axis) {
    k[axis] = index % sizes[axis];
    index /= sizes[axis];
  }
  return k;
}
}  // namespace

LogPowerLaw StartGrid::At(size_t index) const {
  const std::array<size_t, 5> k = Unflatten(*this, index);
  LogPowerLaw start;
  start.alpha = alpha[k[0]];
  start.beta = beta[k[1]];
  start.e = e[k[2]];
  start.a = a[k[3]];
  start.b = b[k[4]];
  return start;
}

bool StartGrid::OnEdge(size_t index) const {
  const std::array<size_t, 5> k = Unflatten(*this, index);
  const std::array<size_t, 5> sizes = {alpha.size(), beta.size(), e.size(),
                                       a.size(), b.size()};
  for (int axis = 0; axis < 5; ++axis) {
    if (k[axis] == 0 || k[axis] + 1 == sizes[axis]) return true;
  }
  return false;
}

absl::Status StartGrid::Validate() const {
  const std::pair<const char*, const std::vector<double>*> axes[] = {
      {"alpha", &alpha}, {"beta", &beta}, {"e", &e}, {"a", &a}, {"b", &b}};
  for (const auto& [name, values] : axes) {
    if (values->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("start grid axis '", name, "' is empty"));
    }
    for (double v : *values) {
      if (!std::isfinite(v)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "start grid axis '", name, "' holds a non-finite value"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<FitResult> FitPowerLaw(absl::Span<const ScalingPoint> points,
                                      const FitOptions& options) {
  if (auto s = ValidatePoints(points); !s.ok()) return s;
  if (auto s = CheckOptions(options); !s.ok()) return s;
  if (auto s = options.grid.Validate(); !s.ok()) return s;
  QuietCeresWarnings();

  const HuberLogObjective objective(points, options.huber_delta);
  const ceres::GradientProblemSolver::Options solver =
      SolverOptions(options, /*polish=*/false);
  const size_t n_starts = options.grid.size();
  std::vector<RunOutcome> outcomes(n_starts);
  internal::ParallelFor(n_starts, options.threads, [&](size_t i) {
    Params start;
    ToVector(options.grid.At(i), start.data());
    outcomes[i] = RunLbfgs(objective, start, solver);
  });

  // Lowest objective wins; ties go to the lowest start index.
  size_t best = 0;
  for (size_t i = 1; i < n_starts; ++i) {
    if (outcomes[i].cost < outcomes[best].cost) best = i;
  }
  if (!std::isfinite(outcomes[best].cost)) {
    return absl::InternalError(
        "every L-BFGS start failed to evaluate the objective");
  }
  FitResult result;
  result.n_starts = n_starts;
  result.best_start = best;
  result.best_start_params = options.grid.At(best);
  const double best_cost = outcomes[best].cost;
  const double tol = std::max(options.same_optimum_rtol * std::abs(best_cost),
                              options.same_optimum_atol);
  bool interior_reached = false;
  for (size_t i = 0; i < n_starts; ++i) {
    if (outcomes[i].cost <= best_cost + tol) {
      ++result.n_starts_at_best;
      if (!options.grid.OnEdge(i)) interior_reached = true;
    }
  }

  // Polish: rerun the best start with the tight tolerances (its L-BFGS
  // memory builds up as in a single tight run), keep the lower end point,
  // then restart from there while that helps.
  const ceres::GradientProblemSolver::Options tight =
      SolverOptions(options, /*polish=*/true);
  RunOutcome polished = outcomes[best];
  if (options.polish_rounds > 0) {
    Params start;
    ToVector(result.best_start_params, start.data());
    RunOutcome rerun = RunLbfgs(objective, start, tight);
    if (rerun.cost < polished.cost) polished = rerun;
    Polish(objective, tight, options.polish_rounds - 1, &polished);
  }
  Finish(points, objective, polished, options, &result);

  result.best_start_on_edge = options.grid.OnEdge(best);
  result.interior_start_reached_best = interior_reached;
  if (result.best_start_on_edge && !interior_reached) {
    result.warnings.push_back(absl::StrFormat(
        "the best L-BFGS start (alpha=%g beta=%g e=%g a=%g b=%g) lies on the "
        "edge of the start grid and no interior start reached its objective; "
        "widen the grid",
        result.best_start_params.alpha, result.best_start_params.beta,
        result.best_start_params.e, result.best_start_params.a,
        result.best_start_params.b));
  }
  AddRangeWarning("alpha", result.log_law.alpha, options.grid.alpha, &result);
  AddRangeWarning("beta", result.log_law.beta, options.grid.beta, &result);
  AddRangeWarning("e = ln E", result.log_law.e, options.grid.e, &result);
  AddRangeWarning("a = ln A", result.log_law.a, options.grid.a, &result);
  AddRangeWarning("b = ln B", result.log_law.b, options.grid.b, &result);
  return result;
}

absl::StatusOr<FitResult> RefinePowerLaw(absl::Span<const ScalingPoint> points,
                                         const LogPowerLaw& start,
                                         const FitOptions& options) {
  if (auto s = ValidatePoints(points); !s.ok()) return s;
  if (auto s = CheckOptions(options); !s.ok()) return s;
  const HuberLogObjective objective(points, options.huber_delta);
  const ceres::GradientProblemSolver::Options solver =
      SolverOptions(options, /*polish=*/true);
  Params x;
  ToVector(start, x.data());
  if (!std::all_of(x.begin(), x.end(),
                   [](double v) { return std::isfinite(v); })) {
    return absl::InvalidArgumentError("the start point is not finite");
  }
  RunOutcome outcome = RunLbfgs(objective, x, solver);
  if (!std::isfinite(outcome.cost)) {
    return absl::InternalError("L-BFGS could not evaluate the objective");
  }
  Polish(objective, solver, options.polish_rounds, &outcome);
  FitResult result;
  result.n_starts = 1;
  result.n_starts_at_best = 1;
  result.best_start_params = start;
  Finish(points, objective, outcome, options, &result);
  return result;
}

}  // namespace hlab::analysis
