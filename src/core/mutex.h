// A mutex, its scoped lock and a condition variable that clang's thread-safety analysis
// understands: members declared GUARDED_BY(mu_) may only be touched with mu_ held, and
// functions marked REQUIRES(mu_) only called so. The `thread_safety` test compiles every source
// with clang -Wthread-safety -Werror=thread-safety; under g++ the annotations are empty.
//
// Mutex and MutexLock are std::mutex and std::unique_lock with the annotations libstdc++ lacks.
// Not copyable, not movable. CondVar waits on a MutexLock (std::condition_variable_any).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define RS_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define RS_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) RS_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY RS_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) RS_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) RS_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) RS_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) RS_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) RS_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) RS_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) RS_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS RS_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace rightsize {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  std::mutex mu_;
};

// Holds `mu` from construction to destruction; Unlock()/Lock() in between for a section that
// must run without it (a condition wait does this itself).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_.lock();
    held_ = true;
  }
  // For CondVar (BasicLockable); the analysis sees the wait as holding the lock throughout.
  void lock() NO_THREAD_SAFETY_ANALYSIS { mu_.lock(); }
  void unlock() NO_THREAD_SAFETY_ANALYSIS { mu_.unlock(); }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// Waits hold a MutexLock and loop on their condition where the analysis can see it:
//   while (queue_.empty() && !stop_) cv_.Wait(lock);
class CondVar {
 public:
  void Wait(MutexLock& lock) { cv_.wait(lock); }
  // Waits until notified or `deadline`; false when the deadline passed.
  bool WaitUntil(MutexLock& lock, std::chrono::steady_clock::time_point deadline) {
    return cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable_any cv_;
};

}  // namespace rightsize
