// The readers of untrusted input, each wrapped so that one call takes the
// bytes of one input and returns normally or throws meshtrain::Error: the
// contract every reader keeps (a parse error of any library is turned into
// Error). Anything else escaping -- another exception, a crash, a hang, a
// sanitizer report -- is a defect. The libFuzzer targets (fuzz/fuzz_*.cc)
// and the seeded mutation run (fuzz/mutation_run.cc) both call these.
#pragma once

#include <string_view>

namespace meshtrain::fuzz {

// An llm.c token file: opened, validated against a vocabulary.
void accept_token_file(std::string_view bytes);
// A model description: parsed, validated, its parameters counted.
void accept_model_json(std::string_view bytes);
// A system description: parsed, validated, and a small configuration predicted on it.
void accept_system_json(std::string_view bytes);
// A CSV table (the published-runs format): read.
void accept_csv(std::string_view bytes);
// A table of published runs as `validate` reads it: the CSV, then each row
// (model shape, knobs, metric) read and checked (tune/validate.h).
void accept_public_runs(std::string_view bytes);
// A checkpoint's metadata.json: parsed and checked against a one-layer
// version of the tiny model (checkpoint/metadata.h).
void accept_checkpoint_metadata(std::string_view bytes);

enum class InputKind { token_file, model_json, system_json, csv, public_runs, checkpoint_metadata };
inline constexpr InputKind kInputKinds[] = {InputKind::token_file,  InputKind::model_json,
                                            InputKind::system_json, InputKind::csv,
                                            InputKind::public_runs, InputKind::checkpoint_metadata};
const char* input_kind_name(InputKind k);  // also the corpus folder: fuzz/corpus/<name>
void accept(InputKind k, std::string_view bytes);

}  // namespace meshtrain::fuzz
