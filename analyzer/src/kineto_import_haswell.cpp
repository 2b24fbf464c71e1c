// The Kineto reader built for AVX2 machines (simdjson's "haswell" kernel); see kineto_reader.inc.
#define SIGHTLINE_KINETO_NS kineto_haswell
#include "kineto_reader.inc"
