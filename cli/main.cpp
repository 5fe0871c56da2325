// The `paci` executable.
#include "cli/cli.hpp"

int main(int argc, char** argv) {
  return paci::cli::main(argc, argv);
}
