// The Kineto reader for any x86-64 or other CPU (simdjson's portable kernel); see kineto_reader.inc.
#define SIGHTLINE_KINETO_NS kineto_generic
#include "kineto_reader.inc"
