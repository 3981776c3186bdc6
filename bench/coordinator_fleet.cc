#include "bench/coordinator_fleet.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

namespace hlab::bench {

using Steady = std::chrono::steady_clock;

struct SimulatedFleet::Worker {
  std::string id;
  hlab::v1::WorkerService::Stub* stub = nullptr;

  absl::Mutex mu;
  bool lease_in_flight ABSL_GUARDED_BY(mu) = false;
  bool heartbeat_in_flight ABSL_GUARDED_BY(mu) = false;
  bool metrics_in_flight ABSL_GUARDED_BY(mu) = false;
  bool complete_in_flight ABSL_GUARDED_BY(mu) = false;
  bool has_task ABSL_GUARDED_BY(mu) = false;
  std::string task_id ABSL_GUARDED_BY(mu);
  std::string run_id ABSL_GUARDED_BY(mu);
  int64_t attempt ABSL_GUARDED_BY(mu) = 0;
  int64_t step ABSL_GUARDED_BY(mu) = 0;     // next metric step
  absl::Time start_at ABSL_GUARDED_BY(mu);  // staggered first action
  absl::Time next_heartbeat ABSL_GUARDED_BY(mu);
  absl::Time next_metrics ABSL_GUARDED_BY(mu);
  absl::Time task_end ABSL_GUARDED_BY(mu);
  std::mt19937 rng ABSL_GUARDED_BY(mu);  // task times
};

template <typename Request, typename Response>
struct SimulatedFleet::Call {
  grpc::ClientContext context;
  Request request;
  Response response;
  Steady::time_point start;
};

namespace {

double SecondsSince(Steady::time_point start) {
  return std::chrono::duration<double>(Steady::now() - start).count();
}

hlab::v1::Device CpuDevice() {
  hlab::v1::Device d;
  d.set_kind("cpu");
  d.set_index(0);
  d.set_name("simulated");
  d.set_memory_bytes(int64_t{64} << 30);
  d.set_cores(8);
  return d;
}

// Starts an async unary call; `done(status, call, seconds)` runs on a gRPC
// thread, after which the call is freed and `in_flight` dropped.
template <typename Call, typename Method, typename Done>
void Start(std::atomic<int64_t>* in_flight, std::unique_ptr<Call> owned,
           Method method, Done done) {
  Call* call = owned.release();
  call->context.set_deadline(std::chrono::system_clock::now() +
                             std::chrono::seconds(60));
  call->start = Steady::now();
  in_flight->fetch_add(1);
  method(&call->context, &call->request, &call->response,
         [call, in_flight, done](grpc::Status status) {
           done(status, *call, SecondsSince(call->start));
           delete call;
           in_flight->fetch_sub(1);
         });
}

}  // namespace

SimulatedFleet::SimulatedFleet(const std::string& target, FleetOptions options)
    : options_(options) {
  for (int c = 0; c < std::max(1, options_.channels); ++c) {
    grpc::ChannelArguments args;
    args.SetInt("hlab.bench.channel", c);  // a connection of its own
    channels_.push_back(grpc::CreateCustomChannel(
        target, grpc::InsecureChannelCredentials(), args));
    stubs_.push_back(hlab::v1::WorkerService::NewStub(channels_.back()));
  }
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> offset(0, 1);
  const absl::Time now = absl::Now();
  for (int w = 0; w < options_.workers; ++w) {
    auto worker = std::make_unique<Worker>();
    worker->id = absl::StrCat("sim-", w);
    worker->stub = stubs_[static_cast<size_t>(w) % stubs_.size()].get();
    absl::MutexLock lock(&worker->mu);
    worker->start_at = now + offset(rng) * options_.heartbeat;
    worker->rng.seed(static_cast<uint32_t>(w) + 2);
    workers_.push_back(std::move(worker));
  }
}

SimulatedFleet::~SimulatedFleet() { WaitIdle(); }

absl::Status SimulatedFleet::Register() {
  for (auto& worker : workers_) {
    hlab::v1::RegisterRequest request;
    request.set_worker_id(worker->id);
    request.set_hostname(worker->id);
    request.set_version("hlab-bench-coordinator");
    request.set_capacity(1);
    *request.add_devices() = CpuDevice();
    hlab::v1::RegisterResponse response;
    grpc::ClientContext context;
    grpc::Status s = worker->stub->Register(&context, request, &response);
    if (!s.ok()) {
      return absl::UnavailableError(
          absl::StrCat("register ", worker->id, ": ", s.error_message()));
    }
  }
  return absl::OkStatus();
}

void SimulatedFleet::NoteError(const grpc::Status& status) {
  absl::MutexLock lock(&mu_);
  if (stats_.errors++ == 0) {
    stats_.first_error =
        absl::StrCat(status.error_code(), ": ", status.error_message());
  }
}

void SimulatedFleet::WaitIdle() {
  while (in_flight_.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void SimulatedFleet::Run(absl::Duration duration) {
  const Steady::time_point start = Steady::now();
  measure_from_ = start + absl::ToChronoNanoseconds(options_.warmup);
  const absl::Time end = absl::Now() + duration;
  int64_t due = 0;
  for (auto& worker : workers_) {
    absl::MutexLock lock(&worker->mu);
    const absl::Duration active = end - worker->start_at;
    if (active > absl::ZeroDuration()) {
      due += 1 + static_cast<int64_t>(active / options_.heartbeat);
    }
  }
  {
    absl::MutexLock lock(&mu_);
    stats_.heartbeats_due += due;
  }
  for (absl::Time now = absl::Now(); now < end; now = absl::Now()) {
    for (auto& worker : workers_) Tick(*worker, now);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  WaitIdle();
  absl::MutexLock lock(&mu_);
  stats_.seconds = SecondsSince(start);
}

// Decides what one worker sends now; at most one call of each kind in
// flight per worker.
void SimulatedFleet::Tick(Worker& worker, absl::Time now) {
  enum { kNone, kLease, kMetrics, kComplete } action = kNone;
  bool heartbeat = false;
  {
    absl::MutexLock lock(&worker.mu);
    if (now < worker.start_at) return;
    if (!worker.heartbeat_in_flight && now >= worker.next_heartbeat) {
      heartbeat = true;
      worker.heartbeat_in_flight = true;
      worker.next_heartbeat = now + options_.heartbeat;
    }
    if (!worker.has_task) {
      if (!worker.lease_in_flight) {
        action = kLease;
        worker.lease_in_flight = true;
      }
    } else if (!worker.metrics_in_flight && !worker.complete_in_flight) {
      if (now >= worker.task_end) {
        action = kComplete;
        worker.complete_in_flight = true;
      } else if (now >= worker.next_metrics) {
        action = kMetrics;
        worker.metrics_in_flight = true;
        worker.next_metrics = now + options_.metrics_every;
      }
    }
  }
  if (heartbeat) SendHeartbeat(worker);
  if (action == kLease) SendLease(worker);
  if (action == kMetrics) SendMetrics(worker);
  if (action == kComplete) SendComplete(worker);
}

void SimulatedFleet::SendLease(Worker& worker) {
  using LeaseCall = Call<hlab::v1::LeaseRequest, hlab::v1::LeaseResponse>;
  auto call = std::make_unique<LeaseCall>();
  call->request.set_worker_id(worker.id);
  call->request.set_wait_ms(options_.lease_wait_ms);
  *call->request.add_free_devices() = CpuDevice();
  auto* stub = worker.stub;
  Start(
      &in_flight_, std::move(call),
      [stub](auto* c, auto* q, auto* r, auto cb) {
        stub->async()->Lease(c, q, r, std::move(cb));
      },
      [this, &worker](const grpc::Status& s, LeaseCall& c, double seconds) {
        if (!s.ok()) NoteError(s);
        const bool got = s.ok() && c.response.has_task();
        {
          absl::MutexLock lock(&mu_);
          if (got) {
            (c.start < measure_from_ ? stats_.startup_lease_seconds
                                     : stats_.lease_seconds)
                .push_back(seconds);
          } else if (s.ok()) {
            ++stats_.empty_leases;
          }
        }
        absl::MutexLock lock(&worker.mu);
        worker.lease_in_flight = false;
        if (!got) return;
        const absl::Time now = absl::Now();
        worker.has_task = true;
        worker.task_id = c.response.task().task_id();
        worker.run_id = c.response.task().run_ids_size() > 0
                            ? c.response.task().run_ids(0)
                            : std::string();
        worker.attempt = c.response.task().attempt();
        worker.step = 0;
        worker.next_metrics = now + options_.metrics_every;
        std::uniform_real_distribution<double> spread(
            1 - options_.task_time_spread, 1 + options_.task_time_spread);
        worker.task_end = now + options_.task_time * spread(worker.rng);
      });
}

void SimulatedFleet::SendHeartbeat(Worker& worker) {
  using HeartbeatCall =
      Call<hlab::v1::HeartbeatRequest, hlab::v1::HeartbeatResponse>;
  auto call = std::make_unique<HeartbeatCall>();
  call->request.set_worker_id(worker.id);
  {
    absl::MutexLock lock(&worker.mu);
    if (worker.has_task) {
      hlab::v1::TaskProgress* p = call->request.add_tasks();
      p->set_task_id(worker.task_id);
      p->set_attempt(worker.attempt);
      p->set_step(worker.step);
      p->set_tokens(worker.step * 1024);
      p->set_loss(10.0 / static_cast<double>(worker.step + 1));
      p->set_tokens_per_s(1e4);
    }
  }
  auto* stub = worker.stub;
  Start(
      &in_flight_, std::move(call),
      [stub](auto* c, auto* q, auto* r, auto cb) {
        stub->async()->Heartbeat(c, q, r, std::move(cb));
      },
      [this, &worker](const grpc::Status& s, HeartbeatCall& c, double seconds) {
        if (!s.ok()) NoteError(s);
        {
          absl::MutexLock lock(&mu_);
          if (s.ok()) {
            (c.start < measure_from_ ? stats_.startup_heartbeat_seconds
                                     : stats_.heartbeat_seconds)
                .push_back(seconds);
          }
          if (seconds > absl::ToDoubleSeconds(options_.heartbeat)) {
            ++stats_.heartbeats_late;
          }
        }
        // A stop for a task the worker still holds and is not completing:
        // its lease was lost. One for a task it completed after sending
        // the heartbeat is the answer to a race, not a lost lease.
        int64_t lost = 0;
        {
          absl::MutexLock lock(&worker.mu);
          worker.heartbeat_in_flight = false;
          for (const auto& stop : c.response.stop()) {
            if (worker.has_task && stop.task_id() == worker.task_id &&
                stop.attempt() == worker.attempt &&
                !worker.complete_in_flight) {
              worker.has_task = false;
              ++lost;
            }
          }
        }
        absl::MutexLock lock(&mu_);
        stats_.stops += lost;
      });
}

namespace {

void AddPoints(hlab::v1::ReportMetricsRequest* request, int64_t first_step,
               int count) {
  const int64_t wall = absl::ToUnixMillis(absl::Now());
  for (int i = 0; i < count; ++i) {
    const int64_t step = first_step + i;
    hlab::v1::MetricPoint* p = request->add_points();
    p->set_name("train_loss");
    p->set_step(step);
    p->set_tokens(step * 1024);
    p->set_value(10.0 / static_cast<double>(step + 1));
    p->set_wall_unix_ms(wall);
  }
}

}  // namespace

void SimulatedFleet::SendMetrics(Worker& worker) {
  using MetricsCall =
      Call<hlab::v1::ReportMetricsRequest, hlab::v1::ReportMetricsResponse>;
  auto call = std::make_unique<MetricsCall>();
  call->request.set_worker_id(worker.id);
  {
    absl::MutexLock lock(&worker.mu);
    call->request.set_task_id(worker.task_id);
    call->request.set_attempt(worker.attempt);
    AddPoints(&call->request, worker.step, options_.batch);
    worker.step += options_.batch;
  }
  auto* stub = worker.stub;
  Start(
      &in_flight_, std::move(call),
      [stub](auto* c, auto* q, auto* r, auto cb) {
        stub->async()->ReportMetrics(c, q, r, std::move(cb));
      },
      [this, &worker](const grpc::Status& s, MetricsCall& c, double seconds) {
        if (!s.ok()) NoteError(s);
        {
          absl::MutexLock lock(&mu_);
          stats_.points_sent += c.request.points_size();
          if (s.ok()) {
            (c.start < measure_from_ ? stats_.startup_metrics_seconds
                                     : stats_.metrics_seconds)
                .push_back(seconds);
            stats_.points_accepted += c.response.accepted();
          }
        }
        absl::MutexLock lock(&worker.mu);
        worker.metrics_in_flight = false;
        if (!s.ok()) worker.has_task = false;  // lease lost: lease anew
      });
}

void SimulatedFleet::SendComplete(Worker& worker) {
  using CompleteCall =
      Call<hlab::v1::CompleteRequest, hlab::v1::CompleteResponse>;
  auto call = std::make_unique<CompleteCall>();
  call->request.set_worker_id(worker.id);
  {
    absl::MutexLock lock(&worker.mu);
    call->request.set_task_id(worker.task_id);
    call->request.set_attempt(worker.attempt);
    hlab::v1::MetricPoint* p = call->request.add_results();
    p->set_name("val_loss");
    p->set_step(std::max<int64_t>(0, worker.step - 1));
    p->set_value(3.0);
  }
  auto* stub = worker.stub;
  Start(
      &in_flight_, std::move(call),
      [stub](auto* c, auto* q, auto* r, auto cb) {
        stub->async()->Complete(c, q, r, std::move(cb));
      },
      [this, &worker](const grpc::Status& s, CompleteCall&, double) {
        if (!s.ok()) NoteError(s);
        {
          absl::MutexLock lock(&mu_);
          if (s.ok()) ++stats_.completed;
        }
        absl::MutexLock lock(&worker.mu);
        worker.complete_in_flight = false;
        worker.has_task = false;
      });
}

absl::StatusOr<FloodResult> SimulatedFleet::FloodMetrics(int64_t points,
                                                         int in_flight) {
  flood_tasks_.clear();
  for (auto& worker : workers_) {
    absl::MutexLock lock(&worker->mu);
    if (!worker->has_task) continue;
    FloodTask t;
    t.task_id = worker->task_id;
    t.run_id = worker->run_id;
    t.worker_id = worker->id;
    t.attempt = worker->attempt;
    t.first_step = worker->step;
    t.stub = worker->stub;
    flood_tasks_.push_back(t);
  }
  if (flood_tasks_.empty()) {
    return absl::FailedPreconditionError("no simulated worker holds a task");
  }
  flood_batches_ = std::max<int64_t>(1, points / options_.batch);
  flood_next_ = 0;
  {
    absl::MutexLock lock(&mu_);
    flood_ = FloodResult();
    flood_.tasks = static_cast<int>(flood_tasks_.size());
    for (const FloodTask& t : flood_tasks_) flood_.run_ids.push_back(t.run_id);
  }
  const Steady::time_point start = Steady::now();
  for (int i = 0; i < std::max(1, in_flight); ++i) {
    const int64_t batch = flood_next_.fetch_add(1);
    if (batch < flood_batches_) SendFloodBatch(batch);
  }
  WaitIdle();
  absl::MutexLock lock(&mu_);
  flood_.seconds = SecondsSince(start);
  return flood_;
}

// Batch b goes to task b % T at steps first_step + (b / T) * batch, so no
// two batches share a (run, name, step) key; on its response the next
// batch is sent from the callback.
void SimulatedFleet::SendFloodBatch(int64_t batch) {
  using MetricsCall =
      Call<hlab::v1::ReportMetricsRequest, hlab::v1::ReportMetricsResponse>;
  const int64_t tasks = static_cast<int64_t>(flood_tasks_.size());
  const FloodTask& t = flood_tasks_[static_cast<size_t>(batch % tasks)];
  auto call = std::make_unique<MetricsCall>();
  call->request.set_worker_id(t.worker_id);
  call->request.set_task_id(t.task_id);
  call->request.set_attempt(t.attempt);
  AddPoints(&call->request, t.first_step + (batch / tasks) * options_.batch,
            options_.batch);
  auto* stub = t.stub;
  Start(
      &in_flight_, std::move(call),
      [stub](auto* c, auto* q, auto* r, auto cb) {
        stub->async()->ReportMetrics(c, q, r, std::move(cb));
      },
      [this](const grpc::Status& s, MetricsCall& c, double seconds) {
        if (!s.ok()) NoteError(s);
        {
          absl::MutexLock lock(&mu_);
          ++flood_.batches;
          flood_.points_sent += c.request.points_size();
          if (s.ok()) flood_.points_accepted += c.response.accepted();
          flood_.call_seconds.push_back(seconds);
        }
        const int64_t next = flood_next_.fetch_add(1);
        if (next < flood_batches_) SendFloodBatch(next);
      });
}

FleetStats SimulatedFleet::stats() {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace hlab::bench
