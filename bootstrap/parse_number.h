// Moved to common/parse_number.h (the lowest layer: the knob table parses with it too).
#pragma once
#include "common/parse_number.h"
