// WatchReactor: the server side of ClientService.WatchSweep, a stream of
// events from the store's event log after a sequence number.
//
// It polls the store (EventsSince) every `poll` with a grpc::Alarm, keeps
// one write outstanding at a time, and finishes when the client cancels or,
// with until_done, once the sweep is finished and every event has been
// sent. Nothing blocks a gRPC thread.
//
// Thread-safety: gRPC serializes a reactor's reactions; the only concurrent
// one, OnCancel, only sets a flag and cancels the alarm. Owned by gRPC:
// deletes itself in OnDone.
//
//   return new WatchReactor(context, sweep_id, after_sequence, until_done);
#ifndef HLAB_COORDINATOR_SERVER_WATCH_REACTOR_H_
#define HLAB_COORDINATOR_SERVER_WATCH_REACTOR_H_

#include <atomic>
#include <cstdint>
#include <deque>

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include "coordinator/server/context.h"
#include "hlab/v1/event.pb.h"

namespace hlab::coordinator {

class WatchReactor final : public grpc::ServerWriteReactor<hlab::v1::Event> {
 public:
  // sweep_id 0: events of every sweep (never "done").
  WatchReactor(ServiceContext* context, int64_t sweep_id,
               int64_t after_sequence, bool until_done,
               absl::Duration poll = absl::Milliseconds(200));

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override { delete this; }

 private:
  // Writes the next queued event, or fetches more, or arms the alarm.
  void Step();
  void End(const grpc::Status& status);

  ServiceContext* const context_;
  const int64_t sweep_id_;
  const bool until_done_;
  const absl::Duration poll_;
  int64_t last_sequence_;
  std::deque<hlab::v1::Event> queue_;
  hlab::v1::Event writing_;
  grpc::Alarm alarm_;
  std::atomic<bool> cancelled_{false};
  bool ended_ = false;
};

// A stream that fails at once (bad request, auth).
class FailedWatchReactor final
    : public grpc::ServerWriteReactor<hlab::v1::Event> {
 public:
  explicit FailedWatchReactor(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_SERVER_WATCH_REACTOR_H_
