// Measured test power: deliberately broken backends (mutants) and the
// generators that mimic how other projects test attention (anchors), run
// through the suite's properties to see what each one kills.
//
// A kernel mutant is the cpu_flash kernel with one realistic bug switched
// on (FlashBug); a resolver mutant is the correct kernel behind argument
// handling with one realistic bug (Backend::ResolveCall); a cache mutant is
// the correct kernel behind a graph cache keyed on too few fields, which only
// a call made after a slightly different one shows. A mutant is killed
// when a property, or else a corpus case, fails on it; AnalyzeMutants
// records which, after how many executions and seconds.

#ifndef VARLEN_CONFORMANCE_MUTANTS_MUTANTS_H_
#define VARLEN_CONFORMANCE_MUTANTS_MUTANTS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "varlen/backend/backend.h"
#include "varlen/conformance/suite.h"
#include "varlen/run/isolation.h"
#include "varlen/run/shard.h"

namespace varlen {

struct Mutant {
  std::string name;       // "flash_<bug>"
  std::string bug_class;  // the bug class it stands for
  std::unique_ptr<Backend> backend;
};

// One mutant per FlashBug other than kNone ("flash_<bug>").
std::vector<Mutant> FlashMutants();
// The argument-handling mutants ("resolver_<bug>", resolver_mutants.cc).
std::vector<Mutant> ResolverMutants();
// The graph-cache mutants ("cache_<bug>", cache_mutants.cc). Each call
// makes fresh ones, with empty caches.
std::vector<Mutant> CacheMutants();
// All of them: kernel mutants, then resolver and cache mutants.
std::vector<Mutant> AllMutants();

// A way another project generates its test inputs, for the same Numerics
// judgement: FlashAttention's lengths near the max, FlashInfer's uniform
// lengths, cuDNN frontend's random configurations, PyTorch's fixed 11 and 13.
struct AnchorStrategy {
  std::string name;
  std::string description;
  rc::Gen<Case> generator;
};

std::vector<AnchorStrategy> AnchorStrategies(const ForwardLimits& limits);

struct Kill {
  std::string by;  // a property ("<property> (long)" for its long cases),
                   // "Corpus: <case>", or "" when it survived
  int64_t executions = 0;
  double seconds = 0;
  int64_t longest = 0;  // the longest sequence of the killing case
};

struct MutantRow {
  std::string mutant;
  std::string bug_class;
  Kill suite;                 // the first property (then corpus case) that kills it
  std::vector<Kill> anchors;  // per AnchorStrategies(), when requested
};

struct MutationOptions {
  Tier tier = Tier::kSmoke;
  bool anchors = false;  // also run the anchor strategies
  std::string only;      // run only mutants whose name contains this
  // Called after each mutant, for progress on a terminal.
  std::function<void(const MutantRow&, int done, int total)> progress;
  // Set: each mutant's kernel runs in worker processes (varlen/run/isolation.h),
  // found there by the mutant's name, so a mutant that crashes is killed,
  // not the run.
  std::optional<IsolationOptions> isolation;
  Shard shard;  // this run's mutants: every total-th, in AllMutants' order
};

std::vector<MutantRow> AnalyzeMutants(const MutationOptions& options);

// A markdown table: mutant, bug class, killed by, executions and seconds,
// the longest sequence of the killing case, and one column per anchor
// strategy when they ran.
std::string MutantsMarkdown(const std::vector<MutantRow>& rows, const MutationOptions& options);

}  // namespace varlen

#endif  // VARLEN_CONFORMANCE_MUTANTS_MUTANTS_H_
