// The fault backend (fault_backend.h) as a plugin, for
// `varlen check --load=fault_backend_plugin.so`, run by tests/run/faults.py.

#include "fault_backend.h"
#include "varlen/backend/plugin.h"

VARLEN_BACKEND_PLUGIN(varlen_test::FaultBackend)
