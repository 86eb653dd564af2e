// LD_PRELOAD helper for the device scripts: on SIGSEGV/SIGBUS/SIGFPE/SIGABRT prints the faulting
// address, the thread and a backtrace (resolve brrr frames with addr2line), then dies with the
// same signal. Used to catch an intermittent host-side crash where no debugger run reproduced it.
#define _GNU_SOURCE
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void put(const char* s) { (void)!write(2, s, strlen(s)); }

static void on_fault(int sig, siginfo_t* si, void* uc) {
  (void)uc;
  char line[160];
  snprintf(line, sizeof line, "\n=== brrr segv_backtrace: signal %d at address %p, thread %ld (pid %d)\n",
           sig, si->si_addr, (long)syscall(SYS_gettid), getpid());
  put(line);
  void* frames[96];
  int n = backtrace(frames, 96);
  backtrace_symbols_fd(frames, n, 2);
  put("=== end of backtrace\n");
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  static char stack[1 << 16];
  stack_t ss = {.ss_sp = stack, .ss_size = sizeof stack, .ss_flags = 0};
  sigaltstack(&ss, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigaction(SIGSEGV, &sa, NULL);
  sigaction(SIGBUS, &sa, NULL);
  sigaction(SIGFPE, &sa, NULL);
  sigaction(SIGABRT, &sa, NULL);
}
