// kiln-tracker (tracker/tracker_cli.h).
#include "tracker/tracker_cli.h"

int main(int argc, char** argv) { return kiln::tracker::TrackerMain(argc, argv, nullptr); }
