#include "core/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <functional>
#include <optional>

#include "core/cleanup.hpp"
#include "core/env.hpp"

namespace brrr {

namespace {

// The program's path, found on $PATH here: the child may only make async-signal-safe calls.
std::string resolve(const std::string& prog) {
  if (prog.find('/') != std::string::npos) return prog;
  std::string path = env::raw("PATH").value_or("/usr/local/bin:/usr/bin:/bin");
  for (size_t p = 0; p <= path.size();) {
    size_t q = path.find(':', p);
    if (q == std::string::npos) q = path.size();
    std::string dir = q > p ? path.substr(p, q - p) : ".";
    std::string cand = dir + "/" + prog;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    p = q + 1;
  }
  return "";
}

// Reads the child's output until it exits and closes the pipe, or kills its group at the time
// limit; reaps it and sets r.exit_code / r.timed_out / r.output.
void wait_child(pid_t pid, int out_fd, int timeout_s, size_t max_output,
                std::optional<ChildGroupGuard>& guard, ProcessResult& r) {
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  bool eof = false, exited = false;
  while (!(eof && exited)) {
    // Not reaped yet (WNOWAIT): while it is a zombie its pid, the group id, cannot be reused.
    siginfo_t info{};
    if (!exited && ::waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == pid) {
      exited = true;
      ::kill(-pid, SIGKILL);  // strays it left in its group would hold the pipe open
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0 && !r.timed_out) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      deadline = Clock::now() + std::chrono::seconds(5);  // to reap it and drain the pipe
      continue;
    }
    if (left.count() <= 0) break;  // the group is gone but something still holds the pipe
    if (eof) {
      ::usleep(10000);
      continue;
    }
    pollfd p{out_fd, POLLIN, 0};
    if (::poll(&p, 1, int(std::min<long long>(left.count(), 50))) <= 0) continue;
    char buf[8192];
    ssize_t got = ::read(out_fd, buf, sizeof buf);
    if (got > 0) {
      size_t room = max_output - std::min(max_output, r.output.size());
      r.output.append(buf, std::min(size_t(got), room));
    } else if (got == 0 || errno != EINTR) {
      eof = true;
    }
  }
  ::close(out_fd);
  ::kill(-pid, SIGKILL);  // whatever the program left running in its group
  guard.reset();
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!r.timed_out && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, int timeout_s, size_t max_output) {
  ProcessResult r;
  std::string exe = argv.empty() ? "" : resolve(argv[0]);
  if (exe.empty()) {
    r.exec_errno = ENOENT;
    return r;
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int out[2], err[2];  // output; exec's errno (closed by a successful exec)
  if (::pipe2(out, O_CLOEXEC) != 0) {
    r.exec_errno = errno;
    return r;
  }
  if (::pipe2(err, O_CLOEXEC) != 0) {
    r.exec_errno = errno;
    ::close(out[0]), ::close(out[1]);
    return r;
  }
  pid_t parent = ::getpid();
  // _Fork, not fork: the child makes only async-signal-safe calls before exec, so the atfork
  // handlers of the libraries brrr has loaded must not run in it (LLVM's libomp's crashed there
  // in the sanitizer build's CI run; libcuda registers handlers too).
  pid_t pid = ::_Fork();
  if (pid == 0) {
    // Child: async-signal-safe calls only. The death signal follows the forking thread, which
    // waits for this process, so it fires exactly when brrr dies.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // brrr died before prctl took effect
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::sigaction(s, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::execv(exe.c_str(), args.data());
    int e = errno;
    (void)!::write(err[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  if (pid < 0) {
    r.exec_errno = errno;
    ::close(out[0]), ::close(err[0]);
    return r;
  }
  ::setpgid(pid, pid);  // also here, so the group exists before anyone signals it
  std::optional<ChildGroupGuard> guard(std::in_place, pid);
  int e = 0;
  ssize_t n;
  while ((n = ::read(err[0], &e, sizeof e)) < 0 && errno == EINTR) {
  }
  if (n == sizeof e) r.exec_errno = e;
  ::close(err[0]);
  wait_child(pid, out[0], timeout_s, max_output, guard, r);
  return r;
}

ProcessResult run_forked(const std::function<std::string()>& work, int timeout_s,
                         size_t max_output) {
  ProcessResult r;
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    r.exec_errno = errno;
    return r;
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    // Child: a copy of brrr that does `work` and exits without running brrr's atexit handlers or
    // destructors (_exit): it shares the parent's open files and must not touch its devices.
    ::close(out[0]);
    // Other threads' pipes (compiles forked side by side) would stay open in this copy and
    // keep their readers from seeing the end of their own child's output until this one exits.
    if (out[1] > 3) ::close_range(3, unsigned(out[1]) - 1, 0);
    ::close_range(unsigned(out[1]) + 1, ~0u, 0);
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    // 'K' + the result, or 'E' + the message: an exit status alone cannot tell brrr's error
    // from a sanitizer's or a library's own exit(1).
    int code = 0;
    std::string bytes;
    try {
      bytes = "K" + work();
    } catch (const std::exception& e) {
      bytes = std::string("E") + e.what();
      code = 1;
    } catch (...) {
      bytes = "Eunknown exception";
      code = 1;
    }
    for (size_t off = 0; off < bytes.size();) {
      ssize_t w = ::write(out[1], bytes.data() + off, bytes.size() - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) ::_exit(3);
      off += size_t(w);
    }
    ::_exit(code);
  }
  ::close(out[1]);
  if (pid < 0) {
    r.exec_errno = errno;
    ::close(out[0]);
    return r;
  }
  ::setpgid(pid, pid);
  std::optional<ChildGroupGuard> guard(std::in_place, pid);
  wait_child(pid, out[0], timeout_s, max_output, guard, r);
  const char want = r.exit_code == 0 ? 'K' : 'E';
  if ((r.exit_code == 0 || r.exit_code == 1) && !r.output.empty() && r.output[0] == want)
    r.output.erase(0, 1);
  else if (!r.timed_out)
    r.exit_code = -1;  // died, or exited without brrr's framing: not the work's own result
  return r;
}

}  // namespace brrr
