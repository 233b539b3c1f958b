// hot_loop: a CPU-bound program for the stack sampler tests (stacks_test.cc) and for measuring
// the sampler's overhead. Built with -O1 -g -fno-omit-frame-pointer so that the kernel's
// frame-pointer call chains reach main; the function names are what the tests look for.
//
//   hot_loop SECONDS           spin in rightsize_test_hot_loop for SECONDS of CPU time
//   hot_loop SECONDS THREADS   wait for a line on stdin, then spin in THREADS new threads, each
//                              for SECONDS of CPU time (so a test can watch threads appear)
//   hot_loop --iterations N    do N rounds of fixed work, print "elapsed_s=S"
//
// CPU time, not wall time: on a busy machine the child still runs long enough to give the
// samples a test expects (the sampler's clock is CPU time too). Prints "ready" (flushed) once
// main runs, so a test attaches to this image, not its parent's.

// POSIX clocks, also under a strict -std=c11.
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile uint64_t g_sink;

static double Seconds(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

// A second frame under the hot loop, so that its samples form more than one distinct stack.
__attribute__((noinline)) uint64_t rightsize_test_mix(uint64_t x) {
  // A stack slot makes GCC set up the frame pointer, which it skips in leaf functions that need
  // no stack even with -fno-omit-frame-pointer; without it the caller drops out of the chain.
  volatile uint64_t spill = x;
  for (int i = 0; i < 64; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  return x + spill;
}

// Runs `iterations` rounds, or (when 0) until this thread has used `seconds` of CPU time.
__attribute__((noinline)) uint64_t rightsize_test_hot_loop(double seconds, uint64_t iterations) {
  const double deadline = Seconds(CLOCK_THREAD_CPUTIME_ID) + seconds;
  uint64_t x = 88172645463325252ull;
  for (uint64_t i = 1;; ++i) {
    for (int j = 0; j < 64; ++j) x = x * 6364136223846793005ull + 1442695040888963407ull;
    x = rightsize_test_mix(x);
    if (iterations != 0) {
      if (i >= iterations) break;
    } else if ((i & 1023) == 0 && Seconds(CLOCK_THREAD_CPUTIME_ID) >= deadline) {
      break;
    }
  }
  g_sink = x;
  return x;
}

static double g_thread_seconds;

__attribute__((noinline)) void* rightsize_test_thread_main(void* arg) {
  (void)arg;
  // Using the result after the call keeps it a real call (no sibling call): a frame to see.
  return (void*)(uintptr_t)(rightsize_test_hot_loop(g_thread_seconds, 0) & 1);
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "--iterations") == 0) {
    const uint64_t iterations = strtoull(argv[2], NULL, 10);
    puts("ready");
    fflush(stdout);
    const double start = Seconds(CLOCK_MONOTONIC);
    const uint64_t x = rightsize_test_hot_loop(0, iterations);
    printf("elapsed_s=%.4f sink=%llu\n", Seconds(CLOCK_MONOTONIC) - start,
           (unsigned long long)(x & 1));
    return 0;
  }
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: hot_loop SECONDS [THREADS] | hot_loop --iterations N\n");
    return 2;
  }
  const double seconds = atof(argv[1]);
  puts("ready");
  fflush(stdout);
  if (argc == 2) return rightsize_test_hot_loop(seconds, 0) == 42;

  const int threads = atoi(argv[2]);
  char line[64];
  if (threads < 1 || threads > 64 || fgets(line, sizeof(line), stdin) == NULL) return 2;
  g_thread_seconds = seconds;
  pthread_t ids[64];
  for (int i = 0; i < threads; ++i) pthread_create(&ids[i], NULL, rightsize_test_thread_main, NULL);
  for (int i = 0; i < threads; ++i) pthread_join(ids[i], NULL);
  return 0;
}
