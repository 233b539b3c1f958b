// Compiled only by test/build/thread_safety.py, which expects this file to FAIL: a member
// guarded by a mutex written without it held.
#include "core/mutex.h"

namespace rightsize {

class Counter {
 public:
  void Add() { ++n_; }  // the deliberate violation: mu_ is not held

 private:
  Mutex mu_;
  int n_ GUARDED_BY(mu_) = 0;
};

void UseCounter() {
  Counter c;
  c.Add();
}

}  // namespace rightsize
