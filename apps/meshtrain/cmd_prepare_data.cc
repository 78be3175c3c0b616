// meshtrain prepare-data: the default corpus (Debian's fortunes) as
// train/validation token files and a SentencePiece tokenizer.
#include "commands.h"
#include "meshtrain/data/corpus.h"

namespace meshtrain::cli {

void add_prepare_data_command(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("prepare-data", "Tokenize a text corpus into train.bin, val.bin and tokenizer.model");
  auto o = std::make_shared<data::PrepareOptions>();
  cmd->add_option("--out", o->out_dir, "Output folder")->required();
  cmd->add_option("--input", o->input_dir, "Folder of fortune files (entries separated by '%' lines)")
      ->capture_default_str();
  cmd->add_option("--vocab-size", o->vocab_size, "Tokenizer vocabulary size")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the document shuffle and tokenizer training")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--val-fraction", o->val_fraction, "Share of documents held out for validation")
      ->capture_default_str();
  cmd->callback([&run, o] { run = [o] { return data::run_prepare_data(*o); }; });
}

}  // namespace meshtrain::cli
