#include "coordinator/server/watch_reactor.h"

#include <chrono>
#include <vector>

#include "coordinator/planning/proto_mapping.h"
#include "coordinator/planning/sweep_catalog.h"
#include "proto/grpc_status.h"

namespace hlab::coordinator {

WatchReactor::WatchReactor(ServiceContext* context, int64_t sweep_id,
                           int64_t after_sequence, bool until_done,
                           absl::Duration poll)
    : context_(context),
      sweep_id_(sweep_id),
      until_done_(until_done),
      poll_(poll),
      last_sequence_(after_sequence) {
  Step();
}

void WatchReactor::End(const grpc::Status& status) {
  if (ended_) return;
  ended_ = true;
  Finish(status);
}

void WatchReactor::Step() {
  if (cancelled_) return End(grpc::Status::CANCELLED);
  if (queue_.empty()) {
    // Decide "done" before reading, so no event written before the sweep
    // finished is missed.
    bool done = false;
    if (until_done_) {
      absl::StatusOr<bool> finished = context_->catalog->Finished(sweep_id_);
      if (!finished.ok()) return End(ToGrpcStatus(finished.status()));
      done = *finished;
    }
    absl::StatusOr<std::vector<store::Event>> events =
        context_->store->EventsSince(sweep_id_, last_sequence_, 256);
    if (!events.ok()) return End(ToGrpcStatus(events.status()));
    for (const store::Event& e : *events) queue_.push_back(ToProtoEvent(e));
    if (queue_.empty()) {
      if (done) return End(grpc::Status::OK);
      alarm_.Set(
          std::chrono::system_clock::now() + absl::ToChronoMilliseconds(poll_),
          [this](bool ok) {
            if (!ok) cancelled_ = true;
            Step();
          });
      return;
    }
  }
  writing_ = std::move(queue_.front());
  queue_.pop_front();
  last_sequence_ = writing_.sequence();
  StartWrite(&writing_);
}

void WatchReactor::OnWriteDone(bool ok) {
  if (!ok)
    return End(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "write failed: the client went away"));
  Step();
}

void WatchReactor::OnCancel() {
  cancelled_ = true;
  alarm_.Cancel();
}

}  // namespace hlab::coordinator
