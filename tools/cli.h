// The command line of rwin's tools (rwinrun, rwin-perf, ring_shift, rwin-accumulate-bw,
// rwin_tcp_ref, ...): one parser (CLI11), the project's strict number rules and the same --help,
// --version and error behaviour everywhere. Tools only: the libraries never include this header.
//
//   CLI::App app{"what the tool does", "rwin-perf"};
//   rwin::cli::setup(app, rwin::version());
//   app.add_option("-s,--size", bytes)->transform(rwin::cli::Size());
//   rwin::cli::parse_or_exit(app, argc, argv);
//
// Numbers: CLI11's own conversion takes what strtoull/strtold take (leading spaces, "+5", "0x10",
// "010" as octal, "-1" wrapped, "inf"), so every number goes through a transform below that accepts
// only bootstrap/parse_number.h's forms and hands CLI11 the plain decimal. A value it refuses ends
// the tool with exit status 2 and "<tool>: --size: '10abc' is not a size: unknown suffix 'abc' (...)".
// The validators carry no description, so the help shows the option's own ->type_name("SIZE")
// rather than CLI11's "UINT:SIZE".
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "bootstrap/parse_number.h"

namespace rwin::cli {

// Byte sizes: digits with an optional K/KiB/M/MiB/G/GiB suffix (binary), in [lo, hi].
inline CLI::Validator Size(uint64_t lo = 0, uint64_t hi = UINT64_MAX) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        uint64_t v = 0;
        const std::string why = rwin::bootstrap::parse_size(text, v);
        if (!why.empty()) return "'" + text + "' is not a size: " + why + " (want " + rwin::bootstrap::kSizeForm + ")";
        if (v < lo || v > hi) {
          return "'" + text + "' is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "] bytes";
        }
        text = std::to_string(v);
        return {};
      },
      "");
}

// Counts: decimal digits only (no sign, spaces, base prefix or suffix), in [lo, hi].
inline CLI::Validator Count(uint64_t lo = 0, uint64_t hi = UINT64_MAX) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
        uint64_t v = 0;
        const std::string why = rwin::bootstrap::parse_u64(text, v);
        if (!why.empty()) return "'" + text + "' is not an integer: " + why + " (want an integer in " + range + ")";
        if (v < lo || v > hi) return "'" + text + "' is outside " + range;
        text = std::to_string(v);
        return {};
      },
      "");
}

// Counts with an optional size suffix (K = 1024): element counts such as ring_shift --size.
inline CLI::Validator SizedCount(uint64_t lo, uint64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        uint64_t v = 0;
        const std::string why = rwin::bootstrap::parse_size(text, v);
        if (!why.empty()) {
          return "'" + text + "' is not a count: " + why + " (want digits with an optional K, M or G suffix, K = 1024)";
        }
        if (v < lo || v > hi) {
          return "'" + text + "' is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
        }
        text = std::to_string(v);
        return {};
      },
      "");
}

// Seconds as a plain decimal ("30", "0.5", "1e3"), lo < value <= hi (or lo <= value with
// lo_inclusive). from_chars takes no spaces, '+', hex or trailing junk; nan and inf fail the range,
// and a sign is refused outright ("-0" is not a duration).
inline CLI::Validator Seconds(double lo, double hi, bool lo_inclusive = false) {
  return CLI::Validator(
      [lo, hi, lo_inclusive](std::string& text) -> std::string {
        double s = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, s, std::chars_format::general);
        const bool in_range = lo_inclusive ? (s >= lo && s <= hi) : (s > lo && s <= hi);
        if (text.empty() || text[0] == '-' || ec != std::errc() || ptr != end || !in_range) {
          char range[96];
          std::snprintf(range, sizeof range, "%s%g, %g]", lo_inclusive ? "[" : "(", lo, hi);
          return "'" + text + "' is not accepted (want a plain decimal number of seconds in " + range + ")";
        }
        return {};
      },
      "");
}

// Names the library parses itself (rwin::parse_dtype, parse_reduce_op, ...): the option takes what
// `parse` takes, and a refusal is reported with the parser's own message (which lists the names).
template <class Parse>
CLI::Validator ParsedBy(Parse parse) {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        try {
          (void)parse(text);
        } catch (const std::exception& e) {
          return e.what();
        }
        return {};
      },
      "");
}

// --version prints "<tool> <version>" and exits 0; a repeated single-value option keeps the last
// value (as the tools' earlier hand-written parsers did, which scripts may rely on).
inline void setup(CLI::App& app, const std::string& version) {
  app.set_version_flag("--version", app.get_name() + " " + version, "print the rwin version and exit");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.get_formatter()->column_width(30);
}

// Parses; returns only when the tool should run. --help / --version print to stdout and exit 0;
// a bad command line prints "<tool>: <what and which option>" and exits 2 (every tool's usage status).
inline void parse_or_exit(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    std::exit(app.exit(e));
  } catch (const CLI::ParseError& e) {
    // CLI11 checks required options before unexpected arguments; the unexpected one ("--sise")
    // is the user's mistake, so name it rather than the option it hid.
    std::string what = e.what();
    if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
      std::vector<std::string> extra = app.remaining(true);
      std::reverse(extra.begin(), extra.end());  // ExtrasError lists its arguments last to first
      if (!extra.empty()) what = CLI::ExtrasError(extra).what();
    }
    std::cerr << app.get_name() << ": " << what << "\n"
              << "run '" << app.get_name() << " --help' for the options\n";
    std::exit(2);
  }
}

}  // namespace rwin::cli
