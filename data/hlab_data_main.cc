// hlab-data: the `data` command on its own (prepare, verify, inspect,
// encode, decode), for machines and tests without the trainer.
// `hlab-data ...` is the same.
#include "data/data_command.h"
#include "data/sentencepiece_support.h"

int main(int argc, char** argv) {
  hlab::data::EnableSentencePiece();
  return hlab::data::RunDataCommand(argc, argv);
}
