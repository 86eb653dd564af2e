// The one median brrr reports (the doctor, bench, probes and profiles all use it).
#pragma once
#include <vector>

namespace brrr {

// Median of a set of timings: the middle element of the sorted values, the upper middle one when
// the count is even (v[n/2]), so that the reported time is always one that was measured, never an
// average of two runs. 0 when `v` is empty.
double median(std::vector<double> v);

}  // namespace brrr
