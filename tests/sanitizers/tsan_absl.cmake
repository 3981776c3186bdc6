# Included by the top-level CMakeLists.txt in a -DHLAB_SANITIZE=thread tree
# before any hlab target: every target links hlab_tsan_absl_sync, and every
# executable defines and exports abseil's synchronization functions with it,
# so that the calls from Debian's libgrpc are annotated too
# (tsan_absl_sync.cc says why).
add_library(hlab_tsan_absl_sync STATIC
  ${CMAKE_CURRENT_LIST_DIR}/tsan_absl_sync.cc
  ${CMAKE_CURRENT_LIST_DIR}/tsan_grpc_cq.cc)
target_include_directories(hlab_tsan_absl_sync PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(hlab_tsan_absl_sync PUBLIC absl::synchronization
  absl::time ${CMAKE_DL_LIBS})
set(hlab_absl_interposed
  _ZN4absl7debian35Mutex4LockEv
  _ZN4absl7debian35Mutex10ReaderLockEv
  _ZN4absl7debian35Mutex6UnlockEv
  _ZN4absl7debian35Mutex12ReaderUnlockEv
  _ZN4absl7debian35Mutex7TryLockEv
  _ZN4absl7debian35Mutex13ReaderTryLockEv
  _ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE
  _ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE
  _ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE
  _ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE
  _ZN4absl7debian35Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE
  _ZN4absl7debian35Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE
  _ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE
  _ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE
  _ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE
  _ZN4absl7debian35MutexD1Ev
  _ZN4absl7debian37CondVar4WaitEPNS0_5MutexE
  _ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE
  _ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE
  _ZN4absl7debian312Notification6NotifyEv
  _ZNK4absl7debian312Notification19WaitForNotificationEv
  _ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE
  # gRPC's completion queues (tsan_grpc_cq.cc).
  _Z14grpc_cq_end_opP21grpc_completion_queuePvN4absl7debian36StatusEPFvS1_P18grpc_cq_completionES1_S6_b
  grpc_completion_queue_next
  grpc_completion_queue_pluck)
# --undefined pulls the definitions out of the archive even where nothing in
# the binary calls them; --export-dynamic-symbol puts them in the dynamic
# symbol table, where the shared libraries' lookups find them first.
set(hlab_is_exe "$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>")
foreach(sym ${hlab_absl_interposed})
  add_link_options("$<${hlab_is_exe}:-Wl,--undefined=${sym}>"
    "$<${hlab_is_exe}:-Wl,--export-dynamic-symbol=${sym}>")
endforeach()
link_libraries(hlab_tsan_absl_sync)
