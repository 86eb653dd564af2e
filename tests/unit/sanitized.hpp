// Whether this test binary runs under a sanitizer. GCC defines __SANITIZE_ADDRESS__; clang 14
// only answers __has_feature. Tests that set resource limits (address space, file size) skip or
// relax them there: the sanitizers' own shadow memory and files need what the limit takes away.
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BRRR_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define BRRR_TEST_SANITIZED 1
#endif
#endif
#ifndef BRRR_TEST_SANITIZED
#define BRRR_TEST_SANITIZED 0
#endif
