// meshtrain prepare-data: text (.txt, .jsonl, fortune files, folders of them;
// Debian's fortunes by default) as train/validation token files and their
// tokenizer, streamed (data/corpus.h).
#include "commands.h"
#include "meshtrain/data/corpus.h"

namespace meshtrain::cli {

void add_prepare_data_command(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("prepare-data", "Tokenize a text corpus into train.bin, val.bin and its tokenizer");
  auto o = std::make_shared<data::PrepareOptions>();
  cmd->add_option("--out", o->out_dir, "Output folder")->required();
  cmd->add_option("--input", o->inputs,
                  "Input files and folders (repeatable): .txt (documents separated by blank lines), .jsonl "
                  "(a \"text\" field per line), fortune files (documents separated by '%' lines)")
      ->capture_default_str();
  cmd->add_option("--tokenizer", o->tokenizer,
                  "sentencepiece (trained here), bytes, gpt2, or a .tiktoken / encoder.json / tiktoken .json file")
      ->capture_default_str();
  cmd->add_option("--vocab-size", o->vocab_size, "Vocabulary of the trained SentencePiece tokenizer")
      ->capture_default_str();
  cmd->add_option("--tokenizer-sample-bytes", o->tokenizer_sample_bytes,
                  "At most this much training text trains SentencePiece")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "Threads that tokenize (0: every core)")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the validation split and tokenizer training")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--val-fraction", o->val_fraction, "Share of documents held out for validation")
      ->capture_default_str();
  cmd->callback([&run, o] { run = [o] { return data::run_prepare_data(*o); }; });
}

}  // namespace meshtrain::cli
