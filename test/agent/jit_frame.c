// jit_frame: a program that runs code from anonymous executable memory and names it in its own
// perf map (/tmp/perf-PID.map), as a JIT does (python3.12 -X perf, Node's --perf-basic-prof),
// for the stack sampler's perf map test (stacks_test.cc). Built with frame pointers like
// hot_loop.c.
//
//   jit_frame SECONDS   write the map, print "ready", then spin for SECONDS of CPU time in
//                       rightsize_test_jit_callee, called through a trampoline built in
//                       mmap'd memory and named "py::jitted_func:/srv/app/jit.py" in the map;
//                       the map is removed on exit
//   jit_frame --junk SECONDS
//                       spin in rightsize_test_jit_callee under a frame whose return address
//                       points into data (rightsize_test_data), like a broken frame chain
//
// The trampoline (x86-64 only) keeps the frame-pointer chain intact, so the kernel's call chain
// reads main -> [trampoline] -> rightsize_test_jit_callee.
// MAP_ANONYMOUS and the POSIX clocks, also under a strict -std=c11.
#define _DEFAULT_SOURCE

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t g_sink;

static double CpuSeconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) uint64_t rightsize_test_jit_callee(double seconds) {
  volatile uint64_t spill = 1;  // a stack slot: GCC then sets up the frame pointer
  const double deadline = CpuSeconds() + seconds;
  uint64_t x = 88172645463325252ull;
  for (uint64_t i = 1;; ++i) {
    for (int j = 0; j < 256; ++j) x = x * 6364136223846793005ull + 1442695040888963407ull;
    if ((i & 255) == 0 && CpuSeconds() >= deadline) break;
  }
  g_sink = x;
  return x + spill;
}

// Data, not code: what a broken frame-pointer chain hands the sampler as a return address.
uint64_t rightsize_test_data[64] = {1};

// Spins with its return address slot pointing into rightsize_test_data, as a frame of code
// built without frame pointers leaves it for the kernel's chain; restored before returning.
__attribute__((noinline)) uint64_t rightsize_test_junk_frame(double seconds) {
  void** slot = (void**)__builtin_frame_address(0) + 1;
  void* volatile saved = *slot;
  *(void* volatile*)slot = &rightsize_test_data[8];
  const uint64_t x = rightsize_test_jit_callee(seconds);
  *(void* volatile*)slot = saved;
  return x;
}

int main(int argc, char** argv) {
#if defined(__x86_64__)
  if (argc == 3 && strcmp(argv[1], "--junk") == 0) {
    puts("ready");
    fflush(stdout);
    return rightsize_test_junk_frame(atof(argv[2])) == 42;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: jit_frame SECONDS\n");
    return 2;
  }
  const double seconds = atof(argv[1]);
  // push rbp; mov rbp, rsp; movabs rax, callee; call rax; pop rbp; ret
  unsigned char code[] = {0x55, 0x48, 0x89, 0xe5, 0x48, 0xb8, 0,    0,    0,
                          0,    0,    0,    0,    0,    0xff, 0xd0, 0x5d, 0xc3};
  const uint64_t callee = (uint64_t)(uintptr_t)&rightsize_test_jit_callee;
  memcpy(code + 6, &callee, sizeof(callee));
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char* mem = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 1;
  memcpy(mem, code, sizeof(code));
  if (mprotect(mem, page, PROT_READ | PROT_EXEC) != 0) return 1;

  char map_path[64];
  snprintf(map_path, sizeof(map_path), "/tmp/perf-%d.map", (int)getpid());
  FILE* map = fopen(map_path, "w");
  if (map == NULL) return 1;
  fprintf(map, "%llx %zx py::jitted_func:/srv/app/jit.py\n", (unsigned long long)(uintptr_t)mem,
          sizeof(code));
  fclose(map);
  puts("ready");
  fflush(stdout);

  uint64_t (*trampoline)(double) = (uint64_t(*)(double))(void*)mem;
  const uint64_t x = trampoline(seconds);
  unlink(map_path);
  return x == 42;
#else
  (void)argc;
  (void)argv;
  fprintf(stderr, "jit_frame: x86-64 only\n");
  return 3;
#endif
}
