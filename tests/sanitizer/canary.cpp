// Planted bugs that prove the sanitizers are live: under the sanitizer build, `canary asan` must
// be reported by AddressSanitizer and `canary ubsan` by UndefinedBehaviorSanitizer. ctest checks
// their reports (tests/CMakeLists.txt); without sanitizers these programs would pass silently.
#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  volatile int i = 0;
  if (std::strcmp(argv[1], "asan") == 0) {
    std::vector<int> v(4);
    int* p = v.data();
    std::printf("%d\n", p[4 + i]);  // heap-buffer-overflow
  } else if (std::strcmp(argv[1], "ubsan") == 0) {
    volatile int big = INT_MAX;
    std::printf("%d\n", big + 1 + i);  // signed-integer-overflow
  }
  return 0;
}
