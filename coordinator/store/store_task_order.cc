// Store: the adaptive order of a sweep's tasks (docs/sweeps.md, "Adaptive
// order"; schema v10).
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "coordinator/store/internal/rows.h"
#include "coordinator/store/store.h"

namespace hlab::store {

absl::StatusOr<int> Store::SetTaskOrder(int64_t sweep_id,
                                        const std::vector<TaskOrder>& order) {
  int set = 0;
  absl::Status status = writer_->Run([&](Database& db) -> absl::Status {
    set = 0;
    HLAB_RETURN_IF_ERROR(internal::RequireSweep(db, sweep_id));
    {
      HLAB_ASSIGN_OR_RETURN(
          Statement st,
          db.Prepare("UPDATE tasks SET order_key = NULL, order_rank = NULL,"
                     " order_score = NULL, order_reason = NULL"
                     " WHERE sweep_id = ? AND order_key IS NOT NULL"));
      st.Bind(1, sweep_id);
      HLAB_RETURN_IF_ERROR(st.Run());
    }
    HLAB_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("UPDATE tasks SET order_key = ?, order_rank = ?,"
                   " order_score = ?, order_reason = ?"
                   " WHERE id = ? AND sweep_id = ? AND state = 'PENDING'"));
    for (const TaskOrder& o : order) {
      st.Reset();
      st.Bind(1, o.key).Bind(2, o.rank);
      if (o.score) {
        st.Bind(3, *o.score);
      } else {
        st.BindNull(3);
      }
      st.Bind(4, o.reason).Bind(5, o.task_id).Bind(6, sweep_id);
      HLAB_RETURN_IF_ERROR(st.Run());
      set += static_cast<int>(st.changes());
    }
    return absl::OkStatus();
  });
  // The lease order changed: caches of it reload.
  BumpLeasableGeneration();
  if (!status.ok()) return status;
  return set;
}

}  // namespace hlab::store
