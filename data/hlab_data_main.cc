// hlab-data: the `data` command on its own (prepare, verify, inspect), for
// machines and tests without the trainer. `hlab-train data ...` is the same.
#include "data/data_command.h"

int main(int argc, char** argv) {
  return hlab::data::RunDataCommand(argc, argv);
}
