// The one median brrr reports (the doctor, bench, probes and profiles all use it), and the
// percentiles bench reports beside it.
#pragma once
#include <vector>

namespace brrr {

// Median of a set of timings: the middle element of the sorted values, the upper middle one when
// the count is even (v[n/2]), so that the reported time is always one that was measured, never an
// average of two runs. 0 when `v` is empty.
double median(std::vector<double> v);

// The p-th percentile by nearest rank: the smallest sample with at least p% of the samples at or
// below it, i.e. sorted v[ceil(p/100 * n) - 1] (p <= 0: the minimum, p >= 100: the maximum).
// Like median() it is always a measured value, never an interpolation. For an even count,
// percentile(v, 50) is the lower middle and median() the upper one; bench prints median().
// 0 when `v` is empty.
double percentile(std::vector<double> v, double p);

}  // namespace brrr
