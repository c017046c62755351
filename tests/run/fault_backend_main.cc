// A backend author's conformance binary for the fault backend
// (fault_backend.h), run by tests/run/faults.py.

#include "fault_backend.h"
#include "varlen/conformance/suite.h"

VARLEN_CONFORMANCE_MAIN(varlen_test::FaultBackend)
