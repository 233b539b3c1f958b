#include "cli/app.h"

int main(int argc, char** argv) { return rightsize::cli::RunCli(argc, argv); }
